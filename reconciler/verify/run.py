"""`kmirror verify` for one flow: choose the ranges, read both clusters, compare, report.

Per replicated source partition (the flow's topic filters, less heartbeats, narrowed by `topics`): the range to
check (from a time by offsets-for-times, the last N offsets, or everything still on the source) up to the
source's end, the remote partition up to its committed end, both read when the verify starts, then the flow's
offset-syncs (`adapters.offset_syncs`, MM2's startup read), which place the source records on the target
(`compare.plan_partition`); then each walk is read on both sides and classified (`compare.Walker`). Records
the target does not hold yet past the newest sync are in flight (unverifiable, with a note); everything else
absent is missing. Each partition's scan (`scan_partition`) runs here, one after the other (`scan_here`), or as a
task of a Spark batch job (`spark_scan`). Nothing is written; no consumer group is joined or committed.

Must not: print (progress goes through `say`), write to a cluster, or decide a record's class (that is
`reconciler.verify.compare`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Literal

from reconciler.adapters.record_ranges import RangeReader
from reconciler.core.mm2.wire import TopicPartition
from reconciler.errors import KmirrorError
from reconciler.kafka_clients.admin import KafkaAdmin
from reconciler.kafka_clients.offset_syncs import read_offset_syncs
from reconciler.spec.client_config import ClientConfig
from reconciler.spec.models import DesiredState, FlowSpec
from reconciler.verify.compare import (
    IN_FLIGHT,
    PartitionPlan,
    PartitionTally,
    Walker,
    plan_partition,
    tally_uncovered,
)
from reconciler.verify.kafka_reads import RateLimiter, ReadError, offsets_for_time, reader, records
from reconciler.verify.report import PartitionRange, VerifyReport

__all__ = ["PartitionTask", "Selection", "VerifyError", "scan_here", "scan_partition", "verify"]

Say = Callable[[str], None]

LATER = 2**62
"""End of the read of the source records after a range: the partition's end when verify gets there."""


class VerifyError(KmirrorError):
    """The verify cannot start (no such flow, no topic matches, bad options)."""


@dataclass(frozen=True, slots=True)
class Selection:
    """Which source records to check: all still on the source, those at or after `since_ms`, or the `last` N
    offsets of each partition."""

    since_ms: int | None = None
    last: int | None = None
    label: str = "everything on the source"


@dataclass(frozen=True, slots=True)
class PartitionTask:
    """One source partition to scan: its plan and what the scan needs besides (picklable: a Spark task)."""

    plan: PartitionPlan
    source_end: int
    target_end: int
    source_compacted: bool
    target_compacted: bool


def scan_partition(
    task: PartitionTask,
    src_reader: RangeReader,
    dst_reader: RangeReader,
    src_limit: RateLimiter,
    dst_limit: RateLimiter,
) -> PartitionTally:
    """Read and compare one partition's walks (its uncovered ranges counted); a read that fails is its `error`."""
    plan = task.plan
    t, p, r = plan.topic, plan.partition, plan.remote_topic
    tally = PartitionTally(t, p, r)
    try:
        for u in plan.uncovered:
            with closing(records(src_reader, t, p, u.start, u.end, src_limit)) as counted:
                tally_uncovered(tally, u, counted)
        for w in plan.walks:
            walker = Walker(
                tally,
                w,
                proven_up_to=plan.proven_up_to,
                source_compacted=task.source_compacted,
                target_compacted=task.target_compacted,
            )
            # Closed when the walk ends, read to its end or not: each reader is free for the next walk.
            # `later`: the source after the walk, for target records after the copies of its range (read only
            # then, after `ours` is done with the source reader).
            later_end = task.source_end if w.source_end < task.source_end else LATER
            with (
                closing(records(src_reader, t, p, w.source_start, w.source_end, src_limit)) as ours,
                closing(records(dst_reader, r, p, w.target_start, w.target_end, dst_limit)) as theirs,
                closing(records(src_reader, t, p, w.source_end, later_end, src_limit, most=100)) as later,
            ):
                walker.run(ours, theirs, later)
    except ReadError as exc:
        tally.error = str(exc)
    return tally


def scan_here(
    tasks: Sequence[PartitionTask],
    source_config: ClientConfig,
    target_config: ClientConfig,
    max_records_per_second: int | None,
    timeout: float,
) -> list[PartitionTally]:
    """The tasks scanned one after the other in this process (`--engine python`)."""
    src_limit, dst_limit = RateLimiter(max_records_per_second), RateLimiter(max_records_per_second)
    src_reader, dst_reader = reader(source_config, timeout=timeout), reader(target_config, timeout=timeout)
    try:
        return [scan_partition(x, src_reader, dst_reader, src_limit, dst_limit) for x in tasks]
    finally:
        src_reader.close()
        dst_reader.close()


def _flow(desired: DesiredState, name: str) -> FlowSpec:
    try:
        return desired.flow(name)
    except KeyError:
        names = ", ".join(f.name for f in desired.flows) or "none"
        raise VerifyError(
            f"there is no flow '{name}' in the desired state (flows: {names}); pass one of them with --flow"
        ) from None


def _compacted(configs: dict[str, str]) -> bool:
    return "compact" in configs.get("cleanup.policy", "")


def verify(
    desired: DesiredState,
    flow_name: str,
    *,
    topics: str | None = None,
    selection: Selection = Selection(),
    sample: float = 1.0,
    max_records_per_second: int | None = None,
    timeout: float = 30.0,
    engine: Literal["python", "spark"] = "python",
    say: Say = lambda _: None,
) -> VerifyReport:
    began = time.monotonic()
    flow = _flow(desired, flow_name)
    if not 0 < sample <= 1:
        raise VerifyError(f"--sample must be a fraction in (0, 1], got {sample}")
    pattern = None
    if topics is not None:
        try:
            pattern = re.compile(topics)
        except re.error as exc:
            raise VerifyError(f"--topics {topics!r} is not a valid regular expression: {exc}") from None
    src_admin = KafkaAdmin(flow.source, desired.client_config(flow.source), timeout)
    dst_admin = KafkaAdmin(flow.target, desired.client_config(flow.target), timeout)
    heartbeats = flow.policy().heartbeats_topic()
    source_topics = {
        t: m
        for t, m in src_admin.topics().items()
        if t != heartbeats and flow.topic_matches(t) and (pattern is None or pattern.fullmatch(t))
    }
    if not source_topics:
        narrowed = f" and --topics {topics!r}" if topics is not None else ""
        raise VerifyError(
            f"no topic on {flow.source} matches the filters of flow {flow.name}{narrowed}; "
            "check the flow's topics.include and the --topics pattern (it must match whole names)"
        )
    partitions = sorted((t, p) for t, m in source_topics.items() for p in range(m.partitions))
    # Ends first (source, then target), then the syncs: every sync that places a record below the target's end
    # read here has been written by then.
    src_start, src_end = src_admin.start_offsets(partitions), src_admin.end_offsets(partitions)
    target_topics = dst_admin.topics()
    remote = {t: flow.remote_topic(t) for t in source_topics}
    on_target = [
        (remote[t], p) for t, p in partitions if remote[t] in target_topics and p < target_topics[remote[t]].partitions
    ]
    dst_start, dst_end = dst_admin.start_offsets(on_target), dst_admin.end_offsets(on_target)
    syncs_cluster, syncs_topic = flow.syncs_location()
    store = read_offset_syncs(desired.client_config(syncs_cluster), syncs_topic, timeout=timeout)
    if selection.since_ms is not None:
        at = offsets_for_time(desired.client_config(flow.source), partitions, selection.since_ms, timeout=timeout)
        first = {}
        for tp in partitions:
            found = at.get(tp)
            first[tp] = src_end[tp] if found is None else max(src_start[tp], found)
    elif selection.last is not None:
        first = {tp: max(src_start[tp], src_end[tp] - selection.last) for tp in partitions}
    else:
        first = dict(src_start)
    compacted_src = {t for t, c in src_admin.explicit_topic_configs(list(source_topics)).items() if _compacted(c)}
    present = sorted({r for r, _ in on_target})
    compacted_dst = {t for t, c in dst_admin.explicit_topic_configs(present).items() if _compacted(c)}

    report = VerifyReport(flow.name, flow.source, flow.target, selection.label, sample)
    if store is None:
        report.notes.append(f"the offset-syncs topic {syncs_topic} on {syncs_cluster} does not exist (yet)")
    tasks: list[PartitionTask | PartitionTally] = []
    for t, p in partitions:
        r, tp = remote[t], (t, p)
        if (r, p) not in dst_end:
            tally = PartitionTally(t, p, r, error=f"the remote partition {r}/{p} does not exist on {flow.target}")
            tasks.append(tally)
            continue
        syncs = store.syncs_since_rewind(TopicPartition(t, p)) if store is not None else ()
        plan = plan_partition(
            t,
            p,
            r,
            range_start=first[tp],
            range_end=src_end[tp],
            syncs=syncs,
            target_start=dst_start[(r, p)],
            target_end=dst_end[(r, p)],
            sample=sample,
        )
        say(f"{t}/{p}: source [{plan.range_start}, {plan.range_end}), {len(plan.walks)} walk(s)")
        tasks.append(PartitionTask(plan, src_end[tp], dst_end[(r, p)], t in compacted_src, r in compacted_dst))
    todo = [x for x in tasks if isinstance(x, PartitionTask)]
    source_config, target_config = desired.client_config(flow.source), desired.client_config(flow.target)
    if engine == "spark":
        from reconciler.verify.spark_scan import scan_on_spark  # pyspark: the `spark` extra

        spark = desired.spark
        done = scan_on_spark(
            todo,
            source_config,
            target_config,
            master=spark.master or "local[*]",
            conf={str(k): str(v) for k, v in spark.conf.items()},
            max_records_per_second=max_records_per_second,
            timeout=timeout,
        )
    else:
        done = scan_here(todo, source_config, target_config, max_records_per_second, timeout)
    results = iter(done)
    for x in tasks:
        if isinstance(x, PartitionTask):
            tally = next(results)
            report.partitions.append((tally, PartitionRange(x.plan.range_start, x.plan.range_end, x.target_end)))
        else:
            report.partitions.append((x, None))
    in_flight = sum(tl.reasons.get(IN_FLIGHT, 0) for tl, _ in report.partitions)
    if in_flight:
        report.notes.append(
            f"{in_flight} record(s) were still in flight (past the newest offset-sync, not on the target when the "
            "verify started): the flow is copying; run verify again once it has caught up to check them"
        )
    duplicated = report.total("duplicated")
    if duplicated and not flow.replication.exactly_once:
        report.notes.append(
            f"{duplicated} record(s) written twice: expected of an at-least-once flow after a job restart or a "
            "retried write (consumers on the target read them twice); replication.delivery exactly_once avoids them"
        )
    report.seconds = time.monotonic() - began
    return report
