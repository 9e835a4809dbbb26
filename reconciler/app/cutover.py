"""Cutover readiness and the migration procedure of one flow, wiring adapters to the pure offset code.

`readiness()` answers "can the consumers of this flow move to the target now?": replication lag per source
partition (records on the source that the offset-syncs do not show as copied), the groups whose committed
offsets all translate, and each group's checkpoint age. `run_cutover()` walks the documented procedure:

  1. producers stopped: wait until the lag is 0 and the source end offsets stay still;
  2. consumers stopped on the source: wait until every group of the flow is EMPTY there;
  3. final checkpoint: one checkpoint cycle (MM2-format checkpoints to `<source>.checkpoints.internal`);
  4. translated offsets written for every group of the flow that is EMPTY on the target (an active one is an
     error naming it), never moving a target group backwards: the same planning as `kmirror plan`, except that
     each committed offset is first translated exactly where the records prove it (the records after its
     offset-sync read on both clusters and matched one for one, `reconciler.core.offsets.exact`), and MM2's
     conservative rule answers the rest; each row says which, and why;
  5. what to switch: bootstrap servers, topic names, group ids.

With `dry_run` every step reports what it sees and would do, and nothing waits or writes. Nothing here prints:
steps are reported through the `say` callback.

Locking: the writing steps (3 and 4) run under the state lock that `kmirror apply` takes
(`reconciler.state.lock`, operation "cutover"), so a cutover and an apply never both write checkpoints or group
offsets at once. When step 3 finds the lock held it waits up to `lock_wait` seconds, then fails naming the
holder, having written nothing; with `lock_wait` 0 (the default, as apply's) a lock already held when the cutover
starts fails it at once, before it waits for lag 0. `dry_run` (and `readiness`) take no lock.

How lag is measured: the replication job writes an exact offset-sync for the last record it copied of every
partition (its delayed syncs, every few seconds), so a partition is caught up when no committed record follows
its newest sync's upstream offset. Transaction markers and compaction gaps at the end are not records, so a
short read (read_committed) confirms the remainder before calling it lag.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from reconciler.adapters.group_offsets import with_exact_offsets, with_group_offsets, write_group_offsets
from reconciler.adapters.replication_lag import replication_lag
from reconciler.core.offsets.checkpoints import translate_group
from reconciler.core.offsets.exact import ExactTranslation
from reconciler.core.offsets.history import SyncHistory
from reconciler.core.offsets.readiness import FailoverReadiness, failover_readiness
from reconciler.errors import KmirrorError
from reconciler.kafka_clients.admin import KafkaAdmin
from reconciler.kafka_clients.checkpointer import CycleReport, checkpoint_once
from reconciler.kafka_clients.offset_syncs import read_checkpoints, read_offset_syncs
from reconciler.live.model import ClusterState, LiveState
from reconciler.live.selection import flow_source_groups
from reconciler.plan.builder import PlanError
from reconciler.plan.definition import GroupOffsetsChange
from reconciler.plan.group_offsets import plan_group_offsets
from reconciler.spec.models import DesiredState, FlowSpec
from reconciler.state.lock import LockHeldError, StateLock, describe, holder
from reconciler.state.records import RecordEntry
from reconciler.state.store import ApplySession, StateStore

Say = Callable[[str], None]


class CutoverError(KmirrorError):
    """The cutover cannot go on (lag does not reach 0, consumers still run on the source, ...)."""


@dataclass(frozen=True)
class Readiness:
    flow: str
    lag: Mapping[tuple[str, int], int]
    groups: tuple[str, ...]
    untranslated: Mapping[str, tuple[tuple[str, int], ...]]
    checkpoint_age_ms: Mapping[str, int | None]
    active_source_groups: tuple[str, ...] = ()
    syncs_found: bool = True
    #: Per group partition: where it would resume on the target now, and the records it would re-read there.
    failover: tuple[FailoverReadiness, ...] = ()

    @property
    def total_lag(self) -> int:
        return sum(self.lag.values())

    def lag_per_topic(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (t, _), n in sorted(self.lag.items()):
            out[t] = out.get(t, 0) + n
        return out

    @property
    def ready(self) -> bool:
        return self.syncs_found and self.total_lag == 0 and not self.untranslated

    def verdict(self) -> str:
        n = len(self.groups)
        if self.ready:
            return f"ready: lag 0, all {n} group(s) translated"
        missing = []
        if not self.syncs_found:
            missing.append("no offset-syncs yet (has the replication job copied anything?)")
        if self.total_lag:
            lagging = ", ".join(f"{t} {n}" for t, n in self.lag_per_topic().items() if n)
            missing.append(f"lag {self.total_lag} ({lagging})")
        if self.untranslated:
            missing.append(f"{len(self.untranslated)} of {n} group(s) not translated ({', '.join(self.untranslated)})")
        return "not ready: " + "; ".join(missing)

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "ready": self.ready,
            "verdict": self.verdict(),
            "lag": self.lag_per_topic(),
            "groups": list(self.groups),
            "untranslated": {g: [f"{t}/{p}" for t, p in tps] for g, tps in self.untranslated.items()},
            "checkpoint_age_ms": dict(self.checkpoint_age_ms),
            "active_source_groups": list(self.active_source_groups),
        }


@dataclass
class CutoverResult:
    readiness: Readiness | None = None
    checkpoint: CycleReport | None = None
    written: list[GroupOffsetsChange] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (address, why), for the state's history
    translations: list[ExactTranslation] = field(default_factory=list)  # step 4: exact or conservative, and why


def _admins(desired: DesiredState, flow: FlowSpec, timeout: float) -> dict[str, KafkaAdmin]:
    return {c: KafkaAdmin(c, desired.client_config(c), timeout) for c in (flow.source, flow.target)}


def _flow(desired: DesiredState, name: str) -> FlowSpec:
    try:
        return desired.flow(name)
    except KeyError:
        names = ", ".join(f.name for f in desired.flows) or "none"
        raise KmirrorError(f"there is no flow '{name}' in the desired state (flows: {names})") from None


def readiness(desired: DesiredState, flow_name: str, *, timeout: float = 30.0) -> Readiness:
    flow = _flow(desired, flow_name)
    admins = _admins(desired, flow, timeout)
    cluster, topic = flow.syncs_location()
    store = read_offset_syncs(desired.client_config(cluster), topic, timeout=timeout)
    return _readiness(desired, flow, admins, store, timeout)


def _readiness(
    desired: DesiredState,
    flow: FlowSpec,
    admins: Mapping[str, KafkaAdmin],
    store: SyncHistory | None,
    timeout: float,
) -> Readiness:
    lag = replication_lag(desired, flow, admins[flow.source], store, timeout=min(timeout, 10.0))
    source = admins[flow.source].groups(flow.group_matches)
    live = LiveState(clusters={flow.source: ClusterState(flow.source, {}, None, source)})
    groups = flow_source_groups(flow, live)
    untranslated: dict[str, tuple[tuple[str, int], ...]] = {}
    failover: list[FailoverReadiness] = []
    heartbeats = flow.policy().heartbeats_topic()
    for g, info in groups.items():
        if store is None:
            untranslated[g] = tuple(sorted(info.offsets))
            continue
        rows = translate_group(
            info.offsets,
            store,
            remote_topic=flow.remote_topic,
            replicated=lambda t: t != heartbeats and flow.topic_matches(t),
        )
        missing = tuple((r.source_topic, r.partition) for r in rows if r.target_offset is None)
        if missing:
            untranslated[g] = missing
        failover += failover_readiness(
            g,
            info.offsets,
            store,
            remote_topic=flow.remote_topic,
            replicated=lambda t: t != heartbeats and flow.topic_matches(t),
        )
    ages: dict[str, int | None] = dict.fromkeys(groups)
    if flow.offsets.emit_checkpoints:
        _, stored, _ = read_checkpoints(
            desired.client_config(flow.target), flow.policy().checkpoints_topic(flow.source), timeout=timeout
        )
        now = int(time.time() * 1000)
        for (g, _, _), s in stored.items():
            if g in ages:
                age = now - s.timestamp
                current = ages[g]
                ages[g] = age if current is None else min(current, age)
    active = tuple(g for g, info in groups.items() if info.state not in ("EMPTY", "DEAD"))
    return Readiness(flow.name, lag, tuple(groups), untranslated, ages, active, store is not None, tuple(failover))


def _state_store(desired: DesiredState, timeout: float) -> StateStore:
    cluster = desired.state.cluster
    return StateStore(cluster, desired.client_config(cluster), desired.state.topic, timeout)


def _locked(claim_text: str) -> LockHeldError:
    return LockHeldError(
        f"cutover needs the state lock for its writing steps and {claim_text}; nothing was written. Wait for it "
        "to finish and run cutover again (or, if that holder is gone, `kmirror force-unlock LOCK_ID` first)."
    )


def run_cutover(
    desired: DesiredState,
    flow_name: str,
    *,
    say: Say,
    dry_run: bool = False,
    timeout: float = 300.0,
    poll: float = 2.0,
    client_timeout: float = 30.0,
    lock_wait: float = 0.0,
) -> CutoverResult:
    flow = _flow(desired, flow_name)
    admins = _admins(desired, flow, client_timeout)
    syncs_cluster, syncs_topic = flow.syncs_location()
    result = CutoverResult()
    src, dst = flow.source, flow.target
    store = None if dry_run else _state_store(desired, client_timeout)
    if store is not None and lock_wait <= 0:  # it would fail at step 3: fail now, not after waiting for lag 0
        current = holder(store.read())
        if current is not None:
            raise _locked(describe(current))

    def load() -> SyncHistory | None:
        return read_offset_syncs(desired.client_config(syncs_cluster), syncs_topic, timeout=client_timeout)

    note = " (dry run: nothing waits, nothing is written)" if dry_run else ""
    say(f"Cutover of flow {flow.name}: {src} -> {dst}{note}")

    # 1. producers stopped, lag 0 -------------------------------------------------------------------------
    say(f"1. Stop every producer writing to the replicated topics on {src}; waiting for replication lag 0.")
    deadline = time.monotonic() + timeout
    previous_ends: dict[tuple[str, int], int] | None = None
    while True:
        state = _readiness(desired, flow, admins, load(), client_timeout)
        ends = _source_ends(flow, admins[src])
        still = previous_ends == ends
        if dry_run or (state.total_lag == 0 and state.syncs_found and still):
            break
        if time.monotonic() > deadline:
            raise CutoverError(
                f"replication lag did not reach 0 within {timeout:.0f}s ({state.verdict()}); "
                f"are producers still writing to {src}, and is the replication job of flow {flow.name} running?"
            )
        previous_ends = ends
        time.sleep(poll)
    result.readiness = state
    lag_text = ", ".join(f"{t}={n}" for t, n in state.lag_per_topic().items()) or "no replicated topics"
    say(f"   lag per topic: {lag_text}")

    # 2. consumers stopped on the source ------------------------------------------------------------------
    say(f"2. Stop the consumers of the flow's groups on {src}; waiting until every group is EMPTY there.")
    while state.active_source_groups and not dry_run:
        if time.monotonic() > deadline:
            raise CutoverError(
                f"consumer group(s) still active on {src}: {', '.join(state.active_source_groups)}; stop them, "
                "then run cutover again"
            )
        time.sleep(poll)
        state = _readiness(desired, flow, admins, load(), client_timeout)
    if state.active_source_groups:
        say(f"   still active on {src}: {', '.join(state.active_source_groups)}")
    say(f"   {len(state.groups)} group(s): {', '.join(state.groups) or '-'}")

    with ExitStack() as stack:
        session = None
        if store is not None:
            lock = StateLock(store, "cutover")
            try:
                snapshot = stack.enter_context(lock.held(wait=lock_wait))
            except LockHeldError:
                now = holder(store.read())
                raise _locked(describe(now) if now is not None else "another process held it") from None
            say(f"   state lock {lock.id} taken for steps 3 and 4")
            # An entry in `kmirror state history`, like an apply's: who moved which groups, when, with what outcome.
            session = ApplySession(
                store,
                snapshot,
                f"cutover-{uuid.uuid4()}",
                desired.spec_digest(),
                lock.id,
                operation="cutover",
                flow=flow.name,
            )
        try:
            _write_steps(desired, flow, admins, result, say=say, dry_run=store is None, client_timeout=client_timeout)
        except BaseException:
            if session is not None:
                session.finish("interrupted")
            raise
        if session is not None:
            entries: list[RecordEntry] = [
                (
                    c.address,
                    c.kind.value,
                    c.after,
                    c.action.value,
                    "applied",
                    "",
                )
                for c in result.written
            ]
            entries += [(address, "group_offsets", None, "update", "failed", why) for address, why in result.failures]
            session.record_many(entries)
            session.finish("completed" if not result.failed else "failed")

    # 5. what to switch -----------------------------------------------------------------------------------
    say("5. Switch the clients:")
    say(f"   bootstrap servers: {desired.clusters[src].bootstrap_servers} -> {desired.clusters[dst].bootstrap_servers}")
    heartbeats = flow.policy().heartbeats_topic()
    replicated = sorted(t for t in admins[src].topics() if t != heartbeats and flow.topic_matches(t))
    renamed = [(t, flow.remote_topic(t)) for t in replicated if flow.remote_topic(t) != t]
    if not renamed:
        say("   topic names: unchanged (identity naming)")
    for t, r in renamed:
        say(f"   topic {t} -> subscribe to {r} on {dst}")
    say(f"   consumer groups: keep their ids ({', '.join(state.groups) or '-'}); start them on {dst}")
    if result.failed:
        raise CutoverError("could not write the offsets of: " + "; ".join(result.failed))
    return result


def _write_steps(
    desired: DesiredState,
    flow: FlowSpec,
    admins: Mapping[str, KafkaAdmin],
    result: CutoverResult,
    *,
    say: Say,
    dry_run: bool,
    client_timeout: float,
) -> None:
    """Steps 3 and 4; the caller holds the state lock unless `dry_run`."""
    src, dst = flow.source, flow.target
    # 3. final checkpoint ---------------------------------------------------------------------------------
    say(f"3. Final checkpoint to {flow.policy().checkpoints_topic(src)} on {dst}.")
    if not dry_run and flow.offsets.emit_checkpoints:
        result.checkpoint = checkpoint_once(
            flow,
            desired.client_config(src),
            desired.client_config(dst),
            sync_group_offsets=False,
            timeout=client_timeout,
        )
        say(f"   {result.checkpoint.emitted} checkpoint(s) emitted for {result.checkpoint.groups} group(s)")

    # 4. translated offsets -------------------------------------------------------------------------------
    say(f"4. Write the translated offsets of groups EMPTY on {dst} (never backwards).")
    live = LiveState(clusters={c: ClusterState(c, {}, None) for c in (src, dst)})
    live = with_group_offsets(desired, live, admins, flows=[flow], timeout=client_timeout)
    live = _exact_offsets(desired, flow, live, admins, result, say=say, client_timeout=client_timeout)
    planned = plan_group_offsets(desired, live, flows=[flow])
    for w in planned.warnings:
        say(f"   warning: {w}")
    if planned.errors:
        raise PlanError(planned.errors)
    if not planned.changes:
        say(f"   nothing to write: every group is already at or past its translated offsets on {dst}")
    for change in planned.changes:
        if not isinstance(change, GroupOffsetsChange) or change.after is None:
            continue
        after = change.after
        say(f"   {change.address}:")
        for r in after.partitions:
            current = "-" if r.current_offset is None else r.current_offset
            how = r.translation or "conservative"
            why = f": {r.why}" if r.why else ""
            if how == "unknown":
                how, why = "conservative", f", exactness unknown ({r.why})"
            mm2 = r.conservative_offset
            if how == "exact" and mm2 is not None and r.target_offset is not None and mm2 != r.target_offset:
                why = f" (MM2's rule: {mm2}, {r.target_offset - mm2} re-read)"
            say(
                f"     {r.topic}/{r.partition}: source {r.source_offset} -> target {r.target_offset} "
                f"(now {current}) {how}{why}"
            )
        if dry_run:
            continue
        outcome = write_group_offsets(admins[dst], after.group, *after.commits())
        if outcome.ok:
            result.written.append(change)
        else:
            result.failed.append(f"{change.address}: {outcome.message}")
            result.failures.append((change.address, outcome.message))
            say(f"     FAILED: {outcome.message}")


def _exact_offsets(
    desired: DesiredState,
    flow: FlowSpec,
    live: LiveState,
    admins: Mapping[str, KafkaAdmin],
    result: CutoverResult,
    *,
    say: Say,
    client_timeout: float,
) -> LiveState:
    """Step 4's exact translation, as `kmirror plan` makes it (`with_exact_offsets`, no time budget): the records
    after each group's offset-sync read on both clusters and matched (`reconciler.core.offsets.exact`)."""
    began = time.monotonic()
    live = with_exact_offsets(desired, live, admins, flows=[flow], timeout=client_timeout, budget=None)
    found = list(live.exact_offsets.get(flow.name, ()))
    result.translations = found
    exact = sum(1 for x in found if x.is_exact)
    unknown = sum(1 for x in found if x.unknown)
    unread = f", {unknown} unknown (records not read)" if unknown else ""
    say(
        f"   exact translation: {exact} of {len(found)} committed offset(s) matched record for record; "
        f"{len(found) - exact - unknown} conservative (MM2's rule){unread}; "
        f"records read in {time.monotonic() - began:.1f}s"
    )
    return live


def _source_ends(flow: FlowSpec, admin: KafkaAdmin) -> dict[tuple[str, int], int]:
    heartbeats = flow.policy().heartbeats_topic()
    partitions = [
        (t, p)
        for t, m in admin.topics().items()
        if t != heartbeats and flow.topic_matches(t)
        for p in range(m.partitions)
    ]
    return admin.end_offsets(partitions)
