"""The use cases behind the CLI, wiring adapters to the pure core: plan, apply, state, force-unlock.

Each function takes a loaded `DesiredState` and returns values; nothing here prints (the CLI renders), and
nothing here decides what to change (the planner does).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from reconciler.adapters.group_offsets import EXACT_BUDGET
from reconciler.adapters.live_reader import admins_for, read_live_state
from reconciler.adapters.schema_registry import read_registries, registry_clients
from reconciler.app.executor import ChangeOutcome, Executor, JobRunner
from reconciler.app.preflight import preflight_warnings
from reconciler.errors import KmirrorError
from reconciler.kafka_clients.admin import KafkaAdmin
from reconciler.plan.builder import build_plan
from reconciler.plan.definition import Action, AnyChange, Plan, change_differences
from reconciler.resources.addresses import Kind, internal_topic_address, job_flow
from reconciler.resources.deployments import Deployment, deployment_of
from reconciler.resources.job_status import JobStatus
from reconciler.resources.recorded import RecordedState
from reconciler.spec.models import DesiredState
from reconciler.state.lock import StateLock, force_unlock
from reconciler.state.records import HistoryEntry, LockClaim, StateSnapshot
from reconciler.state.store import ApplySession, StateStore


class StalePlanError(KmirrorError):
    """A saved plan no longer matches the state or the clusters it was made against."""


@dataclass(frozen=True)
class ApplyResult:
    plan: Plan
    outcomes: list[ChangeOutcome]
    serial: int

    @property
    def failed(self) -> list[ChangeOutcome]:
        return [o for o in self.outcomes if o.outcome != "applied"]


def state_store(desired: DesiredState, timeout: float = 30.0) -> StateStore:
    cluster = desired.state.cluster
    return StateStore(cluster, desired.client_config(cluster), desired.state.topic, timeout)


def job_runner(desired: DesiredState, recorded: RecordedState | None = None) -> JobRunner | None:
    """The runner of `spark.deploy`, knowing what the state topic recorded of each flow's job; None for none."""
    if desired.spark.deploy == "none":
        return None
    from reconciler.jobcontract.layout import state_key
    from reconciler.runners import runner_for

    if recorded is None:
        return runner_for(desired)
    return runner_for(desired, recorded_deployments(recorded), state_key(desired.state.topic, recorded.cluster_id))


def recorded_deployments(recorded: RecordedState) -> dict[str, Deployment]:
    """Per flow, the runner's record of the job apply last deployed (`deployment` of each `job/<flow>` record)."""
    out = {}
    for r in recorded.of_kind(Kind.JOB):
        deployment = r.attributes.get("deployment")
        flow = r.attributes.get("flow") or job_flow(r.address)
        if isinstance(deployment, dict) and isinstance(flow, str):
            out[flow] = deployment_of(deployment)
    return out


def job_status(desired: DesiredState, runner: JobRunner | None) -> JobStatus:
    if desired.spark.deploy == "none":
        return JobStatus()
    status = getattr(runner, "status", None)
    if status is None:
        return JobStatus(known=False)
    result: JobStatus = status()
    return result


def make_plan(
    desired: DesiredState,
    *,
    recorded: RecordedState | None = None,
    targets: Sequence[str] = (),
    admins: dict[str, KafkaAdmin] | None = None,
    timeout: float = 30.0,
    exact_budget: float | None = EXACT_BUDGET,
) -> Plan:
    if recorded is None:
        recorded = state_store(desired, timeout).read().recorded()
    admins = admins or admins_for(desired, timeout)
    live = read_live_state(desired, recorded, admins=admins, timeout=timeout, exact_budget=exact_budget)
    live = read_registries(desired, live)
    plan = build_plan(
        desired,
        live,
        recorded,
        job_status(desired, job_runner(desired, recorded)),
        plan_id=str(uuid.uuid4()),
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        targets=targets,
    )
    refused = preflight_warnings(plan, admins)
    return plan.model_copy(update={"warnings": (*plan.warnings, *refused)}) if refused else plan


def check_saved_plan(
    saved: Plan, fresh: Plan, snapshot: StateSnapshot, state_topic: str = "", key: bytes | None = None
) -> None:
    """Refuse a saved plan that was edited (its seal does not hold for `key`, or any change it would execute
    differs from the same change planned now), made from another desired state, or made before the state moved
    or the resources it touches changed. Every refusal names what differs.

    `state_topic` (an internal_topic address) is exempt from a create: taking the lock creates the state topic.
    """
    now = {c.address: c for c in fresh.changes}
    problem = saved.seal_problem(key)
    if problem is not None:
        differences = _differences(saved, now, state_topic)
        raise StalePlanError(
            f"Saved plan was altered after it was made: {problem}. The plan's digest "
            f"({saved.digest[:24] + '...' if len(saved.digest) > 24 else saved.digest or 'missing'}) "
            + (
                f"does not cover what it would execute; it differs from a fresh plan: {'; '.join(differences)}. "
                if differences
                else "does not hold. "
            )
            + "Nothing was changed. Apply only a plan file exactly as `kmirror plan --out` wrote it, with the same "
            "KMIRROR_PLAN_KEY; run `kmirror plan --out plan.json` again."
        )
    if saved.spec_digest != fresh.spec_digest:
        raise StalePlanError(
            f"Saved plan is stale: it was made from a desired state with digest {saved.spec_digest}, the file given "
            f"now has {fresh.spec_digest}: the file was edited, or its ${{env:..}} references (bootstrap servers, "
            "state topic, Spark settings) resolve to another environment's values. Nothing was changed. Apply the "
            "plan with the file and environment it was made with, or run `kmirror plan` again and review the new "
            "plan."
        )
    if saved.state.lineage != snapshot.lineage or saved.state.serial != snapshot.serial:
        raise StalePlanError(
            f"Saved plan is stale: it was made against state serial {saved.state.serial} "
            f"(lineage {saved.state.lineage or 'none'}), the state is now at serial {snapshot.serial} "
            f"(lineage {snapshot.lineage or 'none'}); another apply ran since. Nothing was changed. "
            "Run `kmirror plan` again and review the new plan."
        )
    moved = []
    for c in saved.changes:
        if c.address == state_topic and c.action == Action.CREATE:
            continue
        current = now.get(c.address)
        if current is None:
            moved.append(f"{c.address} (no longer needs this change)")
        elif current.before != c.before or current.action != c.action:
            moved.append(f"{c.address} (changed since the plan was made)")
    if moved:
        raise StalePlanError(
            "Saved plan is stale: the clusters changed since it was made: "
            + "; ".join(moved[:10])
            + ("; ..." if len(moved) > 10 else "")
            + ". Nothing was changed. Run `kmirror plan` again and review the new plan."
        )
    differences = _differences(saved, now, state_topic)
    if differences:
        raise StalePlanError(
            "Saved plan differs from what kmirror would execute now, though the state and the clusters it read did "
            f"not change: {'; '.join(differences)}. The plan file was edited after it was made. Nothing was "
            "changed. Run `kmirror plan` again and review the new plan."
        )


def _differences(saved: Plan, now: dict[str, AnyChange], state_topic: str) -> list[str]:
    """`address: what differs` for each saved change that a fresh plan would not execute the same way."""
    found = []
    for c in saved.changes:
        if c.address == state_topic and c.action == Action.CREATE:
            continue
        differences = change_differences(c, now.get(c.address))
        if differences:
            found.append(f"{c.address}: {', '.join(differences)}")
    return found[:10] + ([f"and {len(found) - 10} more changes"] if len(found) > 10 else [])


def apply(
    desired: DesiredState,
    *,
    saved: Plan | None = None,
    confirm: Callable[[Plan], bool] = lambda plan: True,
    progress: Callable[[ChangeOutcome, int, int], None] | None = None,
    lock_wait: float = 0.0,
    targets: Sequence[str] = (),
    timeout: float = 30.0,
    plan_key: bytes | None = None,
) -> ApplyResult | None:
    """Plan (or take `saved`, checked against a fresh plan and `plan_key`), confirm, and execute under the state
    lock. None: declined or nothing to do."""
    store = state_store(desired, timeout)
    lock = StateLock(store, "apply")
    with lock.held(wait=lock_wait) as snapshot:
        admins = admins_for(desired, timeout)
        fresh = make_plan(desired, recorded=snapshot.recorded(), targets=targets, admins=admins, timeout=timeout)
        if saved is not None:
            state_topic = internal_topic_address(desired.state.cluster, desired.state.topic)
            check_saved_plan(saved, fresh, snapshot, state_topic, plan_key)
        plan = saved or fresh.sealed(plan_key)
        if not plan.has_changes or not confirm(plan):
            return ApplyResult(plan, [], snapshot.serial) if not plan.has_changes else None
        session = ApplySession(store, snapshot, plan.plan_id, plan.spec_digest, lock.id)
        executor = Executor(
            admins,
            session,
            job_runner(desired, snapshot.recorded()),
            progress,
            guard=lock.check,
            registries=registry_clients(desired),
        )
        try:
            outcomes = executor.run(plan)
        except BaseException:
            session.finish("interrupted")
            raise
        session.finish("completed" if all(o.outcome == "applied" for o in outcomes) else "failed")
        return ApplyResult(plan, outcomes, session.serial)


def read_state(desired: DesiredState) -> StateSnapshot:
    return state_store(desired).read()


def unlock(desired: DesiredState, lock_id: str) -> LockClaim:
    return force_unlock(state_store(desired), lock_id)


def history_rows(snapshot: StateSnapshot) -> list[HistoryEntry]:
    """Every apply, oldest first, each counted from its outcomes."""
    return [h.counted() for h in snapshot.applies()]


@dataclass(frozen=True)
class StateEdit:
    """What `state rm` or `import` recorded: the addresses, the state serial of its history entry, notes."""

    addresses: tuple[str, ...]
    serial: int
    notes: tuple[str, ...] = ()


def _edit_session(
    store: StateStore,
    snapshot: StateSnapshot,
    desired: DesiredState,
    lock: StateLock,
    operation: str,
    addresses: Sequence[str],
) -> ApplySession:
    """An entry in `kmirror state history` for a state edit, like cutover's: who, when, which addresses."""
    return ApplySession(
        store,
        snapshot,
        f"{operation.replace(' ', '-')}-{uuid.uuid4()}",
        desired.spec_digest(),
        lock.id,
        operation=operation,
        addresses=addresses,
    )


def state_rm(
    desired: DesiredState, addresses: Sequence[str], *, lock_wait: float = 0.0, timeout: float = 30.0
) -> StateEdit:
    """Forget `addresses` in the state topic (Terraform's `state rm`), under the lock; no cluster is touched.

    Every address must be in the state, or nothing is forgotten. The resource stays on its cluster; the next
    plan treats it as any topic or ACL kmirror did not create (a remote topic becomes a plan error until it is
    imported again or adopted, an ACL is left alone).
    """
    store = state_store(desired, timeout)

    def check(snapshot: StateSnapshot) -> None:
        unknown = [a for a in addresses if a not in snapshot.resources]
        if unknown:
            raise KmirrorError(
                f"no resource {', '.join(repr(a) for a in unknown)} in the state; nothing was forgotten. "
                "`kmirror state list` shows what there is"
            )

    check(store.read())  # a typo is refused before the lock is claimed (or the state topic created)
    lock = StateLock(store, "state rm")
    with lock.held(wait=lock_wait) as snapshot:
        check(snapshot)
        session = _edit_session(store, snapshot, desired, lock, "state rm", addresses)
        session.record_many(
            [
                (
                    a,
                    snapshot.resources[a].kind,
                    None,
                    "forget",
                    "applied",
                    "forgotten; cluster untouched",
                )
                for a in addresses
            ]
        )
        session.finish("completed")
        return StateEdit(tuple(addresses), session.serial)


def import_resource(desired: DesiredState, address: str, *, lock_wait: float = 0.0, timeout: float = 30.0) -> StateEdit:
    """Adopt an existing remote topic or ACL as kmirror's (Terraform's `import`), under the lock.

    Refused (`reconciler.app.adoption.ImportRefusedError`), with nothing recorded, unless it already is exactly what
    the flow would create; the cluster is only read.
    """
    from reconciler.app.adoption import ImportRefusedError, adopt, importable_address

    cluster = importable_address(address).cluster  # a malformed address is refused before a cluster is touched
    if cluster not in desired.clusters:
        raise ImportRefusedError(
            f"cannot import {address}: no cluster '{cluster}' in the desired state "
            f"(clusters: {', '.join(sorted(desired.clusters))})"
        )
    store = state_store(desired, timeout)
    lock = StateLock(store, "import")
    with lock.held(wait=lock_wait) as snapshot:
        recorded = snapshot.recorded()
        live = read_live_state(desired, recorded, admins=admins_for(desired, timeout), timeout=timeout, exact_budget=0)
        adoption = adopt(desired, live, recorded, address)
        session = _edit_session(store, snapshot, desired, lock, "import", [address])
        session.record(address, adoption.kind, adoption.attributes, "import", "applied", "adopted as kmirror's")
        session.finish("completed")
        return StateEdit((address,), session.serial, adoption.notes)
