"""build_plan: the one pure function from (DesiredState, LiveState, RecordedState, JobStatus) to a Plan.

Steps run in a fixed order (internal topics, remote topics, ACLs, quotas, schemas, jobs, group offsets); every step
returns changes, warnings and errors, and all errors are reported together as one `PlanError`, so a reviewer sees every
problem at once. No I/O here: plan id and time come in as arguments.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from reconciler.errors import Diagnostic, KmirrorError
from reconciler.live.model import LiveState
from reconciler.plan.acls import plan_acls
from reconciler.plan.definition import KIND_ORDER, AnyChange, Plan, StateRef, summarize
from reconciler.plan.group_offsets import plan_group_offsets
from reconciler.plan.jobs import plan_jobs
from reconciler.plan.quotas import live_brokers, live_quotas, plan_quotas
from reconciler.plan.schemas import plan_schemas
from reconciler.plan.topics import TopicPlan, plan_internal_topics, plan_remote_topics
from reconciler.resources.job_status import JobStatus
from reconciler.resources.recorded import RecordedState
from reconciler.spec.models import DesiredState


class PlanError(KmirrorError):
    """Changes that are dangerous or impossible; nothing is planned until they are resolved."""

    def __init__(self, problems: Sequence[Diagnostic]) -> None:
        self.problems = tuple(problems)
        n = len(self.problems)
        super().__init__(
            f"{n} problem{'s' if n != 1 else ''} make{'s' if n == 1 else ''} this plan impossible:\n"
            + "\n".join(f"  - {p}" for p in self.problems)
        )


def build_plan(
    desired: DesiredState,
    live: LiveState,
    recorded: RecordedState,
    jobs: JobStatus,
    *,
    plan_id: str,
    created_at: str,
    targets: Sequence[str] = (),
) -> Plan:
    steps: list[TopicPlan] = [
        plan_internal_topics(desired, live, recorded),
        plan_remote_topics(desired, live, recorded),
        plan_acls(desired, live, recorded),
        plan_quotas(desired, recorded, live_quotas(live), live_brokers(live)),
        plan_schemas(desired, live, recorded),
        plan_jobs(desired, recorded, jobs, live),
        plan_group_offsets(desired, live),
    ]
    errors = [e for s in steps for e in s.errors]
    if errors:
        raise PlanError(errors)
    changes = [c for s in steps for c in s.changes]
    warnings = [*live.warnings, *(w for s in steps for w in s.warnings)]
    if targets:
        changes = [c for c in changes if matches_target(c.address, targets)]
        warnings = [w for w in warnings if w.address is None or matches_target(w.address, targets)]
    ordered = tuple(sorted(changes, key=lambda c: (KIND_ORDER.index(c.kind), c.address)))
    return Plan(
        plan_id=plan_id,
        created_at=created_at,
        spec_digest=desired.spec_digest(),
        state=StateRef(lineage=recorded.lineage, serial=recorded.serial),
        changes=ordered,
        warnings=tuple(str(w) for w in warnings),
        summary=summarize(ordered),
    ).sealed()


def matches_target(address: str, targets: Sequence[str]) -> bool:
    """Terraform's -target: an exact address, a prefix ending in '/', or a glob (`topic/cloud/orders.*`)."""
    return any(
        address == t or (t.endswith("/") and address.startswith(t)) or fnmatch.fnmatchcase(address, t) for t in targets
    )


def changes_by_address(changes: Sequence[AnyChange]) -> dict[str, AnyChange]:
    return {c.address: c for c in changes}
