"""Executor: runs a Plan's changes against the clusters and the job runner, recording each as it completes.

Order is by dependency, not by kind (`dependencies`): a job is stopped (or redeployed) before the topics it
wrote are deleted; remote topics, and the internal topics on the job's clusters, exist before a job that writes
them starts; a flow's quotas (its throttle) are set before its job starts, so a backfill never runs unthrottled;
ACLs follow their topic; group offsets are written only after the job change of their flow (a stop
or redeploy ends with the job's final checkpoint) and after the topics they point into. The walk goes in waves:
every change whose dependencies are done runs in the next wave, batched per cluster and kind; a change whose
dependency was not applied is skipped, naming it. Each resource's result becomes an outcome (applied / failed /
skipped) instead of stopping at the first failure; transient broker errors are retried with backoff. A create
whose answer was lost (a timeout) is confirmed with the controller before its pending record is withdrawn.

The executor talks to a `ClusterAdmin` per cluster and a `JobRunner` (protocols, so tests use fakes), records
through a `ChangeRecorder`, and may be told to stop before its next cluster change (`guard`, the lock's lease).

Must not: read a change's `reason` (only `kind`, `action`, `before` and `after` drive what is done), or decide
what to change (the planner does).
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from reconciler.adapters.group_offsets import write_group_offsets
from reconciler.adapters.schema_registry import RegistryClient
from reconciler.app.schema_changes import apply_schema_change
from reconciler.jobcontract.spec import EffectiveSpec
from reconciler.kafka_clients.admin import Outcome
from reconciler.live.model import AclEntry
from reconciler.plan.definition import (
    AclChange,
    Action,
    AnyChange,
    GroupOffsetsChange,
    InternalTopicChange,
    JobChange,
    Plan,
    QuotaChange,
    SchemaChange,
    TopicChange,
    config_ops,
)
from reconciler.plan.forms import AclForm, EosGroup, Form, JobRecord, QuotaForm, TopicForm
from reconciler.resources.addresses import job_address, topic_address
from reconciler.resources.deployments import Deployment
from reconciler.state.records import RecordEntry

C = TypeVar("C", bound=AnyChange)

RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0)

#: The recorded outcome of a create whose fate is not known (its answer was lost and the controller could not say):
#: its pending record is kept, so the next plan confirms the topic instead of calling it foreign.
UNCONFIRMED = "unconfirmed"


class ChangeRecorder(Protocol):
    """Where the executor records each change (`reconciler.state.store.ApplySession`): a create's form before the
    call (pending), then every outcome with the form as applied."""

    def intend(self, items: list[tuple[str, str, Form | None]]) -> None: ...

    def record_many(self, entries: list[RecordEntry]) -> None: ...


class ClusterAdmin(Protocol):
    """What the executor needs from one cluster's admin (`reconciler.kafka_clients.admin.KafkaAdmin`)."""

    cluster: str

    def create_topics(
        self, topics: Sequence[tuple[str, int, int, Mapping[str, str]]], validate_only: bool = False
    ) -> list[Outcome]: ...

    def wait_visible(self, names: Iterable[str]) -> set[str]: ...

    def confirm_created(self, names: Iterable[str]) -> dict[str, bool | None]: ...

    def create_partitions(self, increases: Mapping[str, int]) -> list[Outcome]: ...

    def alter_topic_configs(
        self, changes: Mapping[str, tuple[Mapping[str, str], Iterable[str]]], validate_only: bool = False
    ) -> list[Outcome]: ...

    def delete_topic(self, name: str) -> Outcome: ...

    def delete_group(self, group: str) -> Outcome: ...

    def create_acls(self, entries: Sequence[AclEntry]) -> list[Outcome]: ...

    def delete_acls(self, entries: Sequence[AclEntry]) -> list[Outcome]: ...

    def alter_client_quotas(self, alterations: Mapping[str, Mapping[str, float | None]]) -> list[Outcome]: ...

    def alter_group_offsets(
        self,
        group: str,
        offsets: Mapping[tuple[str, int], int],
        metadata: Mapping[tuple[str, int], str] | None = None,
    ) -> Outcome: ...


class JobRunner(Protocol):
    """What the executor needs from a job runner (local or standalone).

    `deploy` returns the runner's identity of the deployed job (runner, submission or application id, where its
    checkpoint lives...), which is recorded with the job, or None when it has none to give.
    """

    def deploy(self, flow: str, spec: EffectiveSpec, spec_digest: str) -> Deployment | None: ...

    def stop(self, flow: str) -> None: ...

    def move(self, old: str, new: str) -> None:
        """Stop `old`'s job gracefully; `new`'s next deploy starts on its checkpoint (a renamed flow)."""
        ...

    def forget(self, flow: str) -> None:
        """Drop a stopped job's checkpoint and record: the flow was removed; added back, it starts afresh."""
        ...


@dataclass(frozen=True)
class ChangeOutcome:
    address: str
    action: str
    outcome: str  # applied | failed | skipped
    message: str = ""


# -- the dependency graph (pure) ------------------------------------------------------------------------------
def dependencies(changes: Sequence[AnyChange]) -> dict[str, tuple[str, ...]]:
    """For each change, the addresses of the changes (in `changes`) that must be applied before it.

    - a topic delete waits for the job change of the flow that wrote the topic (a stop, or a redeploy that no
      longer writes it); when the topic's flow is not known, for every job stop and redeploy;
    - a job start (deploy, redeploy, restart) waits for its flow's remote topics, the internal topics on its
      source and target clusters, its flow's quotas (set or changed) and schema subjects, and every job stop (a
      renamed flow's old job writes the same topics);
    - an ACL waits for its topic;
    - group offsets wait for their flow's job change and the topics they are written for.
    """
    by_address = {c.address: c for c in changes}
    jobs = {c.flow: c for c in changes if isinstance(c, JobChange)}
    topic_writes = [
        c for c in changes if isinstance(c, TopicChange | InternalTopicChange) and c.action != Action.DELETE
    ]
    # A flow's quotas (its throttle) and schema subjects (the ids its records name) are in place before it runs.
    quotas = [c for c in changes if isinstance(c, QuotaChange | SchemaChange) and c.action != Action.DELETE]
    deps: dict[str, tuple[str, ...]] = {}
    for c in changes:
        found: list[str] = []
        if isinstance(c, TopicChange | InternalTopicChange) and c.action == Action.DELETE:
            flow = _topic_flow(c.before)
            if flow is not None:
                found += [jobs[flow].address] if flow in jobs else []
            else:
                found += [j.address for j in jobs.values() if j.action in (Action.DELETE, Action.REPLACE)]
        elif isinstance(c, JobChange) and c.action != Action.DELETE:
            clusters = c.after.clusters if c.after is not None else None
            # A stopped job's topics may be the ones this job writes (a renamed flow): never two writers at once.
            found += [j.address for j in jobs.values() if j.action == Action.DELETE]
            for t in topic_writes:
                if isinstance(t, TopicChange):
                    mine = _topic_flow(t.after) == c.flow
                else:  # internal topics carry no flow: the ones on the job's clusters
                    mine = clusters is None or (t.after is not None and t.after.cluster in clusters)
                if mine:
                    found.append(t.address)
            found += [q.address for q in quotas if q.after is not None and q.after.flow == c.flow]
        elif isinstance(c, AclChange):
            acl = c.after or c.before
            topic = topic_address(acl.cluster, acl.topic) if acl is not None else ""
            if topic in by_address and by_address[topic].action != Action.DELETE:
                found.append(topic)
        elif isinstance(c, GroupOffsetsChange) and c.after is not None:
            if c.after.flow is not None and c.after.flow in jobs:
                found.append(jobs[c.after.flow].address)
            for row in c.after.partitions:
                topic = topic_address(c.after.cluster, row.topic)
                if topic in by_address and by_address[topic].action != Action.DELETE and topic not in found:
                    found.append(topic)
        deps[c.address] = tuple(found)
    return deps


def _topic_flow(form: TopicForm | None) -> str | None:
    return form.source.flow if form is not None and form.source is not None else None


# -- the walk -------------------------------------------------------------------------------------------------
class Executor:
    def __init__(
        self,
        admins: Mapping[str, ClusterAdmin],
        recorder: ChangeRecorder,
        runner: JobRunner | None = None,
        progress: Callable[[ChangeOutcome, int, int], None] | None = None,
        guard: Callable[[], None] | None = None,
        retry_delays: Sequence[float] = RETRY_DELAYS,
        registries: Mapping[str, RegistryClient] | None = None,
    ) -> None:
        self.admins = admins
        #: Per cluster, its schema registry's client (`adapters.schema_registry.RegistryClient`), for schema/ rows.
        self.registries = registries or {}
        self.recorder = recorder
        self.runner = runner
        self.progress = progress
        self.guard = guard
        self.retry_delays = tuple(retry_delays)
        self.outcomes: list[ChangeOutcome] = []
        self._total = 0
        self._unrecorded: list[tuple[RecordEntry, ChangeOutcome]] = []
        self._unconfirmed: set[str] = set()

    def run(self, plan: Plan) -> list[ChangeOutcome]:
        changes = [c for c in plan.changes if c.action != Action.NOOP]
        self._total = len(changes)
        deps = dependencies(changes)
        state: dict[str, str] = {}  # address -> outcome, once done
        todo = list(changes)
        while todo:
            ready, blocked, waiting = [], [], []
            for c in todo:
                if any(d not in state for d in deps[c.address]):
                    waiting.append(c)
                elif any(state[d] != "applied" for d in deps[c.address]):
                    blocked.append(c)
                else:
                    ready.append(c)
            if not ready and not blocked:  # cannot happen with the rules above; never loop forever
                blocked, waiting = waiting, []
            for c in blocked:
                bad = [d for d in deps[c.address] if state.get(d, "") != "applied"]
                self._skip(c, f"depends on {', '.join(bad[:3])}{', ...' if len(bad) > 3 else ''}, not applied")
            self._flush()
            self._wave(ready)
            state.update({o.address: o.outcome for o in self.outcomes})
            todo = waiting
        return self.outcomes

    def _wave(self, changes: list[AnyChange]) -> None:
        """A wave of independent changes: job stops, topic writes, ACLs, quotas, job starts, topic deletes, offsets."""
        jobs = [c for c in changes if isinstance(c, JobChange)]
        topics = [c for c in changes if isinstance(c, TopicChange | InternalTopicChange)]
        self._jobs([c for c in jobs if c.action == Action.DELETE])
        self._topics([c for c in topics if c.action != Action.DELETE])
        self._acls([c for c in changes if isinstance(c, AclChange)])
        self._quotas([c for c in changes if isinstance(c, QuotaChange)])
        self._schemas([c for c in changes if isinstance(c, SchemaChange)])
        self._jobs([c for c in jobs if c.action != Action.DELETE])
        self._topic_deletes([c for c in topics if c.action == Action.DELETE])
        self._group_offsets([c for c in changes if isinstance(c, GroupOffsetsChange)])

    # -- topics -----------------------------------------------------------------------------------------------
    def _topics(self, changes: list[TopicChange | InternalTopicChange]) -> None:
        per_cluster: dict[str, list[TopicChange | InternalTopicChange]] = defaultdict(list)
        for c in changes:
            per_cluster[_topic_form(c).cluster].append(c)
        for cluster, items in per_cluster.items():
            admin = self.admins[cluster]
            creates = [c for c in items if c.action == Action.CREATE]
            if creates:
                self._check_lease()
                self._intend(creates)
                results = self._retry(functools.partial(_create_topics, admin), creates)
                results = self._confirm_unanswered(admin, creates, results)
                # Done means usable: wait until the new topics are in the metadata the next plan and the job read
                # (after thousands of creates that takes minutes; the wait lasts while topics keep appearing).
                unseen = admin.wait_visible([_topic_form(c).name for c in creates if results[c.address].ok])
                for c in creates:
                    result = results[c.address]
                    if result.ok and _topic_form(c).name in unseen:
                        # Created (the controller said so), so it is kmirror's; the next plan waits for it to show.
                        result = Outcome(c.address, True, "created, but not yet in the cluster's metadata")
                    self._done(c, result)
                self._flush()
            self._topic_updates(admin, [c for c in items if c.action == Action.UPDATE])
            for c in (c for c in items if c.action not in (Action.CREATE, Action.UPDATE)):
                self._done(c, Outcome(c.address, False, f"a topic cannot be {c.action.value}d by kmirror"))
            self._flush()

    def _topic_updates(self, admin: ClusterAdmin, updates: list[TopicChange | InternalTopicChange]) -> None:
        if not updates:
            return
        self._check_lease()
        grow = [c for c in updates if _topic_form(c).partitions > (c.before.partitions if c.before else 0)]
        grown = self._retry(
            lambda todo: admin.create_partitions({_topic_form(c).name: _topic_form(c).partitions for c in todo}),
            grow,
        )
        alter = [c for c in updates if config_ops(c) != ({}, [])]
        altered = self._retry(
            lambda todo: admin.alter_topic_configs({_topic_form(c).name: config_ops(c) for c in todo}), alter
        )
        for c in updates:
            failures = [r for r in (grown.get(c.address), altered.get(c.address)) if r is not None and not r.ok]
            self._done(c, failures[0] if failures else Outcome(c.address, True))
        self._flush()

    def _topic_deletes(self, changes: list[TopicChange | InternalTopicChange]) -> None:
        for c in changes:
            # Topic deletion is opt-in (prune.topics) and irreversible; done one by one on purpose.
            if c.before is None:
                self._done(c, Outcome(c.address, True, "already gone"))
            else:
                self._check_lease()
                admin, name = self.admins[c.before.cluster], c.before.name
                deleted = self._retry(functools.partial(_delete_topic, admin, name), [c])
                self._done(c, deleted[c.address])
            self._flush()

    # -- ACLs -------------------------------------------------------------------------------------------------
    def _acls(self, changes: list[AclChange]) -> None:
        per_cluster: dict[str, list[AclChange]] = defaultdict(list)
        for c in changes:
            form = c.after or c.before
            if form is not None:
                per_cluster[form.cluster].append(c)
        for cluster, items in per_cluster.items():
            self._check_lease()
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
            self._flush()

    # -- quotas -----------------------------------------------------------------------------------------------
    def _quotas(self, changes: list[QuotaChange]) -> None:
        """Set, change or remove client quotas: one batched call per cluster, one outcome per client id."""
        per_cluster: dict[str, list[QuotaChange]] = defaultdict(list)
        for c in changes:
            form = c.after or c.before
            if form is None:  # a delete of a quota already gone: only kmirror's record goes
                self._done(c, Outcome(c.address, True, "already gone"))
            else:
                per_cluster[form.cluster].append(c)
        for cluster, items in per_cluster.items():
            self._check_lease()
            admin = self.admins[cluster]
            self._intend([c for c in items if c.action == Action.CREATE])
            results = self._retry(
                lambda todo: admin.alter_client_quotas({_client_id(c): _quota_ops(c) for c in todo}),  # noqa: B023
                items,
            )
            for c in items:
                self._done(c, results[c.address])
        self._flush()

    # -- schema subjects --------------------------------------------------------------------------------------
    def _schemas(self, changes: list[SchemaChange]) -> None:
        """Register each subject's missing versions (and its compatibility level) on the target's registry, or
        delete a pruned subject; the source id -> target id map is recorded with the subject."""
        for c in changes:
            self._check_lease()
            outcome, attributes = apply_schema_change(c, self.registries)
            self._done(c, outcome, attributes)
            self._flush()

    # -- jobs -------------------------------------------------------------------------------------------------
    def _jobs(self, jobs: list[JobChange]) -> None:
        for c in jobs:
            flow = c.flow
            if self.runner is None:
                self._done(c, Outcome(c.address, False, "no job runner is configured for this apply"))
                self._flush()
                continue
            self._check_lease()
            if c.action == Action.CREATE:
                # Pending before the runner starts it: an apply killed while the job starts leaves the job known.
                self._intend([c])
            deployment: Deployment | None = None
            forgotten: Outcome | None = None
            try:
                if c.action == Action.DELETE:
                    self.runner.stop(flow)
                    if c.before is not None and c.before.removed:
                        self.runner.forget(flow)  # the flow is gone from the file: added back, it starts afresh
                        forgotten = self._forget_eos_group(c.before.eos_group)
                elif c.after is not None:
                    if c.after.operation == "move" and c.after.moved_from is not None:
                        self.runner.move(c.after.moved_from, flow)
                    deployment = self.runner.deploy(flow, c.after.spec, c.after.spec_digest)
            except Exception as exc:  # a runner failure is this change's outcome, not the apply's end
                self._done(c, Outcome(c.address, False, str(exc)))
            else:
                if forgotten is not None and not forgotten.ok:  # the job stays recorded: the next apply retries
                    why = f"job stopped; its exactly-once group {forgotten.key} was not deleted: {forgotten.message}"
                    self._done(c, Outcome(c.address, False, why, transient=forgotten.transient))
                    self._flush()
                    continue
                attributes = None
                if deployment is not None and c.after is not None:
                    attributes = JobRecord.of(c.after, deployment)
                self._done(c, Outcome(c.address, True), attributes)
                old = c.after.moved_from if c.after is not None else None
                if old is not None:  # the old name's record goes: its job is the renamed one now
                    why, gone = f"moved to {c.address}", job_address(old)
                    entry = (gone, c.kind.value, None, Action.DELETE.value, "applied", why)
                    self._unrecorded.append((entry, ChangeOutcome(gone, Action.DELETE.value, "applied", why)))
            self._flush()  # each job is recorded as soon as it is deployed or stopped

    def _forget_eos_group(self, eos: EosGroup | None) -> Outcome | None:
        """Delete a removed flow's exactly-once group (its source positions): added back, the flow starts afresh."""
        if eos is None or eos.cluster not in self.admins:
            return None
        return self.admins[eos.cluster].delete_group(eos.group)

    # -- group offsets ----------------------------------------------------------------------------------------
    def _group_offsets(self, changes: list[GroupOffsetsChange]) -> None:
        for c in changes:
            if c.after is None:
                self._done(c, Outcome(c.address, False, "group offsets are never deleted by kmirror"))
                self._flush()
                continue
            self._check_lease()
            admin = self.admins[c.after.cluster]
            written = self._retry(functools.partial(_write_group_offsets, admin), [c])
            self._done(c, written[c.address])
            self._flush()

    # -- outcomes ---------------------------------------------------------------------------------------------
    def _done(self, c: AnyChange, result: Outcome, attributes: Form | None = None) -> None:
        recorded = "applied" if result.ok else UNCONFIRMED if c.address in self._unconfirmed else "failed"
        outcome = ChangeOutcome(c.address, c.action.value, "applied" if result.ok else "failed", result.message)
        if c.action == Action.DELETE:
            attributes = None
        elif attributes is None:
            attributes = _recorded_form(c)
        entry = (c.address, c.kind.value, attributes, c.action.value, recorded, outcome.message)
        self._unrecorded.append((entry, outcome))

    def _flush(self) -> None:
        """Record what the last batch call completed (one state transaction), then report it."""
        if not self._unrecorded:
            return
        batch, self._unrecorded = self._unrecorded, []
        self.recorder.record_many([entry for entry, _ in batch])
        for _, outcome in batch:
            self._emit(outcome)

    def _intend(self, creates: Sequence[AnyChange]) -> None:
        if creates:
            self.recorder.intend([(c.address, c.kind.value, _recorded_form(c)) for c in creates])

    def _skip(self, c: AnyChange, why: str) -> None:
        entry = (c.address, c.kind.value, None, c.action.value, "skipped", why)
        self._unrecorded.append((entry, ChangeOutcome(c.address, c.action.value, "skipped", why)))

    def _emit(self, outcome: ChangeOutcome) -> None:
        self.outcomes.append(outcome)
        if self.progress:
            self.progress(outcome, len(self.outcomes), self._total)

    def _check_lease(self) -> None:
        """Before every cluster or runner change: stop (recording what is done) when the lock's lease is lost."""
        if self.guard is not None:
            self._flush()
            self.guard()

    def _confirm_unanswered(
        self, admin: ClusterAdmin, creates: list[TopicChange | InternalTopicChange], results: dict[str, Outcome]
    ) -> dict[str, Outcome]:
        """Creates that still timed out after the retries may have happened: ask the controller before giving up.

        There: applied. Not there: failed (the pending record is withdrawn). Not known (the controller does not
        answer either): failed for this apply, but recorded as unconfirmed, so the pending record stays and the
        next plan confirms it.
        """
        unanswered = {
            _topic_form(c).name: c for c in creates if not results[c.address].ok and results[c.address].transient
        }
        if not unanswered:
            return results
        try:
            known = admin.confirm_created(unanswered)
        except Exception:  # the controller could not be asked: every one of them is unknown
            known = {}
        confirmed = dict(results)
        for name, c in unanswered.items():
            there = known.get(name)
            if there:
                confirmed[c.address] = Outcome(
                    c.address, True, "created (confirmed with the controller after a timeout)"
                )
            elif there is None:
                self._unconfirmed.add(c.address)
                confirmed[c.address] = Outcome(
                    c.address,
                    False,
                    f"{results[c.address].message}; the controller could not confirm whether it was created, so it "
                    "stays recorded as pending and the next plan checks it",
                )
        return confirmed

    def _retry(self, call: Callable[[list[C]], list[Outcome]], changes: list[C]) -> dict[str, Outcome]:
        """Run `call` on the changes, retrying the transient failures with backoff; outcomes keyed by address."""
        results: dict[str, Outcome] = {}
        todo = list(changes)
        for delay in (*self.retry_delays, None):
            if not todo:
                break
            outcomes = call(todo)
            by_key = dict(zip((c.address for c in todo), outcomes, strict=True))
            results.update(by_key)
            todo = [c for c in todo if not by_key[c.address].ok and by_key[c.address].transient]
            if todo and delay is not None:
                time.sleep(delay)
                self._check_lease()
        return results


def _topic_form(c: TopicChange | InternalTopicChange) -> TopicForm:
    """The topic a create or update makes (its `after`), or the one a delete removes (its `before`)."""
    form = c.after or c.before
    assert form is not None, "a topic change has a before or an after"  # the planner never makes one without
    return form


def _recorded_form(c: AnyChange) -> Form | None:
    if isinstance(c, AclChange):
        # Recorded: only what kmirror manages, so a later prune never touches ACLs made by others.
        if c.after is None or not c.after.managed:
            return None
        return c.after.model_copy(update={"entries": c.after.managed})
    return c.after


def _create_topics(admin: ClusterAdmin, changes: list[TopicChange | InternalTopicChange]) -> list[Outcome]:
    forms = [_topic_form(c) for c in changes]
    return admin.create_topics([(f.name, f.partitions, f.replication_factor, f.configs) for f in forms])


def _delete_topic(admin: ClusterAdmin, name: str, changes: list[TopicChange | InternalTopicChange]) -> list[Outcome]:
    return [admin.delete_topic(name)]


def _write_group_offsets(admin: ClusterAdmin, changes: list[GroupOffsetsChange]) -> list[Outcome]:
    return [write_group_offsets(admin, c.after.group, *c.after.commits()) for c in changes if c.after is not None]


def _client_id(c: QuotaChange) -> str:
    form = c.after or c.before
    assert form is not None, "a quota change has a before or an after"
    return form.client_id


def _quota_ops(c: QuotaChange) -> dict[str, float | None]:
    """A quota change's call from before -> after: each rate in `after` set, each rate only in `before` removed."""
    before, after = _quota_rates(c.before), _quota_rates(c.after)
    ops: dict[str, float | None] = {name: None for name in before if name not in after}
    ops.update(after)
    return ops


def _quota_rates(form: QuotaForm | None) -> dict[str, float]:
    return {} if form is None else form.rates()


def _entries(form: AclForm | None) -> set[AclEntry]:
    if form is None:
        return set()
    return {
        AclEntry("TOPIC", form.pattern_type, form.topic, form.principal, e.host, form.operation, e.permission)
        for e in form.entries
    }
