"""Executor: runs a Plan's changes against the clusters and the job runner, recording each as it completes.

Order: internal topics and remote topics, then ACLs, then jobs, then group offsets. Calls are batched per
cluster and kind; each resource's result becomes an outcome (applied / failed / skipped) instead of stopping
at the first failure. A change whose resource depends on a failed one (an ACL or a job on a topic that
failed) is skipped. Transient broker errors are retried with backoff. Only `action`, `before` and `after`
drive what is done; `reason` is never read here.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from reconciler.adapters.group_offsets import write_group_offsets
from reconciler.adapters.kafka_admin import KafkaAdmin, Outcome
from reconciler.live.model import AclEntry
from reconciler.plan.definition import Action, Kind, Plan, ResourceChange, config_ops

RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0)


class ChangeRecorder(Protocol):
    def intend(self, items: list[tuple[str, str, Mapping[str, Any] | None]]) -> None: ...

    def record_many(self, entries: list[tuple[str, str, Mapping[str, Any] | None, str, str, str]]) -> None: ...

    def record(
        self,
        address: str,
        kind: str,
        attributes: Mapping[str, Any] | None,
        action: str,
        outcome: str,
        message: str = "",
    ) -> None: ...


class JobRunner(Protocol):
    """What the executor needs from a job runner (local or standalone)."""

    def deploy(self, flow: str, spec: Mapping[str, Any], spec_digest: str) -> Mapping[str, Any] | None:
        """Start (or restart) the flow's job; the runner's record of what it deployed, kept in the state."""
        ...

    def stop(self, flow: str) -> None: ...

    def move(self, old: str, new: str) -> None:
        """Stop `old`'s job gracefully; `new`'s next deploy starts on its checkpoint (a renamed flow)."""
        ...


@dataclass(frozen=True)
class ChangeOutcome:
    address: str
    action: str
    outcome: str  # applied | failed | skipped
    message: str = ""


class Executor:
    def __init__(
        self,
        admins: Mapping[str, KafkaAdmin],
        recorder: ChangeRecorder,
        runner: JobRunner | None = None,
        progress: Callable[[ChangeOutcome, int, int], None] | None = None,
    ) -> None:
        self.admins = admins
        self.recorder = recorder
        self.runner = runner
        self.progress = progress
        self.outcomes: list[ChangeOutcome] = []
        self._total = 0
        self._unrecorded: list[tuple[tuple[str, str, Mapping[str, Any] | None, str, str, str], ChangeOutcome]] = []

    def run(self, plan: Plan) -> list[ChangeOutcome]:
        changes = [c for c in plan.changes if c.action != Action.NOOP]
        self._total = len(changes)
        by_kind: dict[Kind, list[ResourceChange]] = defaultdict(list)
        for c in changes:
            by_kind[c.kind].append(c)
        self._topics(by_kind[Kind.INTERNAL_TOPIC] + by_kind[Kind.TOPIC])
        self._flush()
        self._acls(by_kind[Kind.ACL])
        self._flush()
        self._jobs(by_kind[Kind.JOB], changes)
        self._flush()
        for c in by_kind[Kind.GROUP_OFFSETS]:
            admin = self.admins[(c.after or {})["cluster"]]
            written = _retry(functools.partial(_write_group_offsets, admin), [c])
            self._done(c, written[c.address])
            self._flush()
        return self.outcomes

    # -- topics -----------------------------------------------------------------------------------------------
    def _topics(self, changes: list[ResourceChange]) -> None:
        per_cluster: dict[str, list[ResourceChange]] = defaultdict(list)
        for c in changes:
            per_cluster[(c.after or c.before or {})["cluster"]].append(c)
        for cluster, items in per_cluster.items():
            admin = self.admins[cluster]
            creates = [c for c in items if c.action == Action.CREATE]
            self._intend(creates)
            results = _retry(functools.partial(_create_topics, admin), creates)
            # Done means usable: wait until the new topics are in the metadata the next plan and the job read
            # (after thousands of creates that takes minutes; the wait lasts while topics keep appearing).
            unseen = admin.wait_visible([(c.after or {})["name"] for c in creates if results[c.address].ok])
            for c in creates:
                result = results[c.address]
                if result.ok and (c.after or {})["name"] in unseen:
                    # Created (the controller said so), so it is kmirror's; the next plan waits for it to show.
                    result = Outcome(c.address, True, "created, but not yet in the cluster's metadata")
                self._done(c, result)
            self._flush()
            self._topic_updates(admin, [c for c in items if c.action == Action.UPDATE])
            for c in (c for c in items if c.action == Action.DELETE):
                # Topic deletion is opt-in (prune.topics) and irreversible; done one by one on purpose.
                self._done(c, _delete_topic(admin, c))
            for c in (c for c in items if c.action not in (Action.CREATE, Action.UPDATE, Action.DELETE)):
                self._done(c, Outcome(c.address, False, f"a topic cannot be {c.action.value}d by kmirror"))

    def _topic_updates(self, admin: KafkaAdmin, updates: list[ResourceChange]) -> None:
        if not updates:
            return
        grow = [c for c in updates if (c.after or {})["partitions"] > (c.before or {}).get("partitions", 0)]
        grown = _retry(
            lambda todo: admin.create_partitions(
                {(c.after or {})["name"]: (c.after or {})["partitions"] for c in todo}
            ),
            grow,
        )
        alter = [c for c in updates if config_ops(c) != ({}, [])]
        altered = _retry(
            lambda todo: admin.alter_topic_configs({(c.after or {})["name"]: config_ops(c) for c in todo}), alter
        )
        for c in updates:
            failures = [r for r in (grown.get(c.address), altered.get(c.address)) if r is not None and not r.ok]
            self._done(c, failures[0] if failures else Outcome(c.address, True))

    # -- ACLs -------------------------------------------------------------------------------------------------
    def _acls(self, changes: list[ResourceChange]) -> None:
        failed_topics = {o.address for o in self.outcomes if o.outcome != "applied"}
        per_cluster: dict[str, list[ResourceChange]] = defaultdict(list)
        for c in changes:
            form = c.after or c.before or {}
            topic_addr = f"topic/{form['cluster']}/{form['topic']}"
            if topic_addr in failed_topics:
                self._skip(c, f"depends on {topic_addr}, which was not applied")
                continue
            per_cluster[form["cluster"]].append(c)
        for cluster, items in per_cluster.items():
            admin = self.admins[cluster]
            to_create: dict[str, list[AclEntry]] = {}
            to_delete: dict[str, list[AclEntry]] = {}
            for c in items:
                before, after = _entries(c.before), _entries(c.after)
                to_create[c.address] = sorted(after - before)
                to_delete[c.address] = sorted(before - after)
            self._intend([c for c in items if c.action == Action.CREATE])
            created = admin.create_acls([e for es in to_create.values() for e in es])
            deleted = admin.delete_acls([e for es in to_delete.values() for e in es])
            results = iter(created + deleted)
            per_address: dict[str, list[Outcome]] = defaultdict(list)
            for addr, es in list(to_create.items()) + list(to_delete.items()):
                for _ in es:
                    per_address[addr].append(next(results))
            for c in items:
                bad = [o for o in per_address[c.address] if not o.ok]
                self._done(c, bad[0] if bad else Outcome(c.address, True))

    # -- jobs -------------------------------------------------------------------------------------------------
    def _jobs(self, jobs: list[ResourceChange], all_changes: Sequence[ResourceChange]) -> None:
        not_applied = {o.address for o in self.outcomes if o.outcome != "applied"}
        for c in jobs:
            self._flush()  # each job is recorded as soon as it is deployed or stopped
            flow = c.address.split("/", 1)[1]
            blocked = [
                x.address
                for x in all_changes
                if x.kind in (Kind.TOPIC, Kind.INTERNAL_TOPIC)
                and x.address in not_applied
                and (x.after or {}).get("source", {}).get("flow", flow) == flow
            ]
            if blocked and c.action != Action.DELETE:
                self._skip(c, f"depends on {', '.join(blocked[:3])}, not applied")
                continue
            if self.runner is None:
                self._done(c, Outcome(c.address, False, "no job runner is configured for this apply"))
                continue
            deployment = None
            try:
                if c.action == Action.DELETE:
                    self.runner.stop(flow)
                else:
                    after = c.after or {}
                    if after.get("operation") == "move":
                        self.runner.move(str(after["moved_from"]), flow)
                    deployment = self.runner.deploy(flow, after["spec"], after["spec_digest"])
            except Exception as exc:  # a runner failure is this change's outcome, not the apply's end
                self._done(c, Outcome(c.address, False, str(exc)))
                continue
            self._done(c, Outcome(c.address, True), {"deployment": dict(deployment)} if deployment else None)
            old = (c.after or {}).get("moved_from")
            if isinstance(old, str):  # the old name's record goes: its job is the renamed one now
                why = f"moved to {c.address}"
                entry = (f"job/{old}", c.kind.value, None, Action.DELETE.value, "applied", why)
                self._unrecorded.append((entry, ChangeOutcome(f"job/{old}", Action.DELETE.value, "applied", why)))

    # -- outcomes ---------------------------------------------------------------------------------------------
    def _done(self, c: ResourceChange, result: Outcome, extra: Mapping[str, Any] | None = None) -> None:
        outcome = ChangeOutcome(c.address, c.action.value, "applied" if result.ok else "failed", result.message)
        attributes = None if c.action == Action.DELETE else _recorded_form(c)
        if attributes is not None and extra:
            attributes = {**attributes, **extra}
        entry = (c.address, c.kind.value, attributes, c.action.value, outcome.outcome, outcome.message)
        self._unrecorded.append((entry, outcome))

    def _flush(self) -> None:
        """Record what the last batch call completed (one state transaction), then report it."""
        if not self._unrecorded:
            return
        batch, self._unrecorded = self._unrecorded, []
        self.recorder.record_many([entry for entry, _ in batch])
        for _, outcome in batch:
            self._emit(outcome)

    def _intend(self, creates: list[ResourceChange]) -> None:
        if creates:
            self.recorder.intend([(c.address, c.kind.value, _recorded_form(c)) for c in creates])

    def _skip(self, c: ResourceChange, why: str) -> None:
        entry = (c.address, c.kind.value, None, c.action.value, "skipped", why)
        self._unrecorded.append((entry, ChangeOutcome(c.address, c.action.value, "skipped", why)))

    def _emit(self, outcome: ChangeOutcome) -> None:
        self.outcomes.append(outcome)
        if self.progress:
            self.progress(outcome, len(self.outcomes), self._total)


def _recorded_form(c: ResourceChange) -> dict[str, Any] | None:
    after = dict(c.after or {})
    if c.kind == Kind.ACL:
        # Recorded: only what kmirror manages, so a later prune never touches ACLs made by others.
        after["entries"] = after.get("managed", [])
        if not after["entries"]:
            return None
    return after


def _create_topics(admin: KafkaAdmin, changes: list[ResourceChange]) -> list[Outcome]:
    afters = [c.after or {} for c in changes]
    return admin.create_topics([(a["name"], a["partitions"], a["replication_factor"], a["configs"]) for a in afters])


def _write_group_offsets(admin: KafkaAdmin, changes: list[ResourceChange]) -> list[Outcome]:
    return [write_group_offsets(admin, c.after or {}) for c in changes]


def _entries(form: Mapping[str, Any] | None) -> set[AclEntry]:
    if not form:
        return set()
    return {
        AclEntry(
            "TOPIC",
            form.get("pattern_type", "LITERAL"),
            form["topic"],
            form["principal"],
            e["host"],
            form["operation"],
            e["permission"],
        )
        for e in form.get("entries", ())
    }


def _delete_topic(admin: KafkaAdmin, c: ResourceChange) -> Outcome:
    if c.before is None:
        return Outcome(c.address, True, "already gone")
    return admin.delete_topic(c.before["name"])


def _retry(call: Callable[[list[ResourceChange]], list[Outcome]], changes: list[ResourceChange]) -> dict[str, Outcome]:
    """Run `call` on the changes, retrying the transient failures with backoff; outcomes keyed by address."""
    results: dict[str, Outcome] = {}
    todo = list(changes)
    for delay in (*RETRY_DELAYS, None):
        if not todo:
            break
        outcomes = call(todo)
        by_key = dict(zip((c.address for c in todo), outcomes, strict=True))
        results.update(by_key)
        todo = [c for c in todo if not by_key[c.address].ok and by_key[c.address].transient]
        if todo and delay is not None:
            time.sleep(delay)
    return results
