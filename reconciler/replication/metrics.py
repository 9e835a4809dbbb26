"""Prometheus metrics of the replication job's driver, with MirrorMaker 2's names and meaning where MM2 has them.

MM2's `MirrorSourceMetrics` (JMX group `MirrorSourceConnector`, tags source, target, topic, partition; `topic` is
the *remote* topic's name) maps to (snake case, `kmirror_` prefix, same labels):

    record-count                  kmirror_record_count_total       counter
    byte-count                    kmirror_byte_count_total         counter
    record-rate                   kmirror_record_rate              gauge, records/s over the last 30 s
    byte-rate                     kmirror_byte_rate                gauge, bytes/s over the last 30 s
    record-age-ms-{avg,max,min}   kmirror_record_age_ms_{avg,max,min}
    replication-latency-ms-{avg,max,min}   kmirror_replication_latency_ms_{avg,max,min}

MM2 measures per record; kmirror has no Python per record, so these are *batch-granular*: each batch's progress
(`progress.py`) yields per-partition record counts (offset ranges scaled to the exact batch count), bytes (the
batch's exact bytes shared out by count) and the batch's min/max/sum of record timestamps. Record age is the
time the batch's write began minus a record's timestamp; replication latency is the batch's end (written with acks=all,
committed) minus a record's timestamp.
avg is over the records of the batches of the last 30 s (MM2's sample window), max and min over the same
batches; with no batch in the window the last batch's values stay.

kmirror adds:

    kmirror_partition_lag{source,target,topic,partition}  the source end offset minus the replicated position
        (last copied offset + 1, or the query's committed position if further: commit markers count as copied);
        `topic` is the *source* topic here. Source end offsets are refreshed at most every few seconds.
    kmirror_batches_total{source,target}                   micro-batches that wrote records
    kmirror_last_batch_timestamp_seconds{source,target}    wall-clock time the last such batch finished
    kmirror_last_record_timestamp_seconds{source,target,topic,partition}  the newest record timestamp copied
        (`topic` the remote topic): on the replicated heartbeats topic, time() minus it is the heartbeat age

Failover readiness, from the job's checkpointer (each cycle's `CycleReport.readiness`), labels flow, group,
topic (the *source* topic the group committed on), partition:

    kmirror_group_failover_rereads          records the group would re-read on the target if it moved now
    kmirror_group_failover_translatable     1: its committed offset translates; 0: no offset-sync answers yet
    kmirror_group_checkpoint_age_seconds    seconds since a cycle last translated its committed offset

Counters start at 0 with each start of the job (as MM2's do with each task).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from reconciler.core.offsets.readiness import FailoverReadiness

#: MM2's sample window for rates, averages and maxima (Kafka metrics: 2 samples of 30 s; one window here).
WINDOW_SECONDS = 30.0

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class PartitionBatch:
    """One source partition's share of a written batch (see `progress.batch_from_progress`)."""

    topic: str
    remote_topic: str
    partition: int
    count: int
    bytes: int
    last_offset: int
    ts_min: int  # ms
    ts_max: int
    ts_sum: int


@dataclass
class _Sample:
    at: float  # monotonic
    count: int
    bytes: int
    age_sum: float
    age_max: float
    age_min: float
    latency_sum: float
    latency_max: float
    latency_min: float


@dataclass
class _Partition:
    remote_topic: str
    count: int = 0
    bytes: int = 0
    window: deque[_Sample] = field(default_factory=deque)
    last: _Sample | None = None
    newest_ms: int | None = None  # the newest record timestamp copied


class ReplicationMetrics(Collector):
    """The driver's metric state; a prometheus_client collector rendered at scrape time."""

    def __init__(self, source: str, target: str, window: float = WINDOW_SECONDS) -> None:
        self.source, self.target, self.window = source, target, window
        self._lock = threading.Lock()
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._positions: dict[TopicPartition, int] = {}
        self._source_ends: dict[TopicPartition, int] = {}
        self.batches = 0
        self.last_batch_at: float | None = None
        self.restarts = 0
        self._topic_ids: dict[str, str] = {}
        #: Partitions of re-created topics: (the job's old position, records below it counted as lost so far).
        self._holes: dict[TopicPartition, tuple[int, int]] = {}
        self.data_loss_records = 0
        self.data_loss_events = 0
        # (flow, group, source topic, partition) -> (its readiness at the last checkpoint cycle, wall time it last
        # translated); a group partition the last cycle did not see is dropped.
        self._failover: dict[tuple[str, str, str, int], tuple[FailoverReadiness, float | None]] = {}

    # -- updates from the driver ------------------------------------------------------------------------------
    def observe_batch(self, rows: Iterable[PartitionBatch], polled_ms: int, written_ms: int) -> None:
        """A written batch: `polled_ms` when it started reading, `written_ms` when its write returned."""
        now = time.monotonic()
        with self._lock:
            for r in rows:
                if r.count <= 0:
                    continue
                key = (r.topic, r.partition)
                part = self._partitions.setdefault(key, _Partition(r.remote_topic))
                part.remote_topic = r.remote_topic
                part.count += r.count
                part.bytes += r.bytes
                sample = _Sample(
                    at=now,
                    count=r.count,
                    bytes=r.bytes,
                    age_sum=float(r.count * polled_ms - r.ts_sum),
                    age_max=float(polled_ms - r.ts_min),
                    age_min=float(polled_ms - r.ts_max),
                    latency_sum=float(r.count * written_ms - r.ts_sum),
                    latency_max=float(written_ms - r.ts_min),
                    latency_min=float(written_ms - r.ts_max),
                )
                part.window.append(sample)
                part.last = sample
                part.newest_ms = r.ts_max if part.newest_ms is None else max(part.newest_ms, r.ts_max)
                self._positions[key] = max(self._positions.get(key, 0), r.last_offset + 1)
            self.batches += 1
            self.last_batch_at = time.time()

    def observe_acknowledged(self, lines: str) -> int:
        """What the target acknowledged per source partition since the last call (the interceptors'
        `drainAcknowledged()` text: real-time mode, where Spark's progress comes once per checkpoint interval).
        Ages and latencies are per record there: age at send, latency at acknowledgement. Returns the records."""
        now = time.monotonic()
        total = 0
        with self._lock:
            for line in lines.splitlines():
                f = line.split("\t")
                if len(f) != 15:
                    continue
                topic, partition, remote = f[0], int(f[1]), f[2]
                count, size, _ts_sum, _ts_min, ts_max, age_sum, age_max, age_min, lat_sum, lat_max, lat_min, last = (
                    int(v) for v in f[3:]
                )
                key = (topic, partition)
                part = self._partitions.setdefault(key, _Partition(remote))
                part.remote_topic = remote
                part.count += count
                part.bytes += size
                sample = _Sample(now, count, size, age_sum, age_max, age_min, lat_sum, lat_max, lat_min)
                part.window.append(sample)
                part.last = sample
                if ts_max:
                    part.newest_ms = ts_max if part.newest_ms is None else max(part.newest_ms, ts_max)
                self._positions[key] = max(self._positions.get(key, 0), last + 1)
                total += count
        return total

    def observe_commit(self, when: float | None = None) -> None:
        """A batch committed whose records were counted as they were acknowledged (`observe_acknowledged`)."""
        with self._lock:
            self.batches += 1
            self.last_batch_at = time.time() if when is None else when

    def observe_positions(self, positions: Mapping[TopicPartition, int]) -> None:
        """Committed positions (next offset to read) of the query, e.g. from its last progress."""
        with self._lock:
            for key, offset in positions.items():
                self._positions[key] = max(self._positions.get(key, 0), offset)

    def partitions(self) -> set[TopicPartition]:
        """The source partitions whose end offsets the lag needs."""
        with self._lock:
            return set(self._positions)

    def observe_source_ends(self, ends: Mapping[TopicPartition, int]) -> None:
        with self._lock:
            self._source_ends.update(ends)

    def observe_source_starts(self, starts: Mapping[TopicPartition, int]) -> list[str]:
        """Log start offsets of the source partitions (after `observe_source_ends`): what the job can no longer
        copy is data loss, counted and returned as events in words; never silent.

        - A start past the replicated position: records deleted (retention, DeleteRecords) before they were
          copied. Counted; the position moves to the start (Spark reads on from there).
        - An end below the position: the partition's offsets went back, the topic was deleted and created again
          (see also `observe_topic_ids`). Spark reads on from its old position, so the new topic's records below it
          are never copied: a hole, counted as records arrive in it (`_count_holes`), until the new log reaches
          the old position.
        """
        events = []
        with self._lock:
            for key, start in starts.items():
                pos = self._positions.get(key)
                if pos is None:
                    continue
                end = self._source_ends.get(key)
                if end is not None and end < pos and key not in self._holes:
                    events.append(f"{key[0]}[{key[1]}]: offsets went back from {pos} to {end} (topic re-created?)")
                    self._open_hole(key, pos)
                    self._topic_ids.pop(key[0], None)  # the new topic's id is a first sight, not a second re-creation
                elif start > pos and key not in self._holes:
                    events.append(f"{key[0]}[{key[1]}]: {start - pos} records deleted before they were copied")
                    self.data_loss_records += start - pos
                    self.data_loss_events += 1
                    self._positions[key] = start
            events.extend(self._count_holes())
        return events

    def observe_topic_ids(self, ids: Mapping[str, str]) -> list[str]:
        """The source topics' ids (KIP-516): a topic whose id changed was deleted and created again under its
        name. Each of its partitions gets a hole below the job's position (see `observe_source_starts`)."""
        events = []
        with self._lock:
            for topic, topic_id in ids.items():
                known = self._topic_ids.get(topic)
                self._topic_ids[topic] = topic_id
                if known is None or known == topic_id:
                    continue
                opened = [key for key in self._positions if key[0] == topic and key not in self._holes]
                for key in opened:
                    self._open_hole(key, self._positions[key])
                if opened:
                    events.append(
                        f"{topic}: deleted and created again (topic id {known} -> {topic_id}); the job reads on from "
                        "its old positions, so the new topic's records below them are not copied (counted as lost)"
                    )
        return events

    def _open_hole(self, key: TopicPartition, position: int) -> None:
        self._holes[key] = (position, 0)
        self.data_loss_events += 1

    def _count_holes(self) -> list[str]:
        """Records that arrived below a hole's old position since the last look: lost, counted once each."""
        events = []
        for key, (position, counted) in list(self._holes.items()):
            below = min(self._source_ends.get(key, 0), position)
            if below > counted:
                self.data_loss_records += below - counted
                events.append(
                    f"{key[0]}[{key[1]}]: {below - counted} record(s) of the re-created topic below offset {position} "
                    "not copied"
                )
                self._holes[key] = (position, below)
            if below >= position:
                del self._holes[key]  # the new log reached the old position: the job copies from here on
        return events

    def reset_positions(self, positions: Mapping[TopicPartition, int]) -> None:
        """Positions that may go back (a query restarted from older offsets)."""
        with self._lock:
            self._positions.update(positions)

    def observe_failover(self, flow: str, rows: Iterable[FailoverReadiness], at: float | None = None) -> None:
        """One checkpoint cycle's failover readiness of every group partition (`CycleReport.readiness`)."""
        now = time.time() if at is None else at
        with self._lock:
            previous = self._failover
            current: dict[tuple[str, str, str, int], tuple[FailoverReadiness, float | None]] = {}
            for r in rows:
                key = (flow, r.group, r.topic, r.partition)
                last = now if r.translatable else (previous.get(key) or (r, None))[1]
                current[key] = (r, last)
            self._failover = current

    def lag(self) -> dict[TopicPartition, int]:
        with self._lock:
            return {
                key: max(0, self._source_ends[key] - pos)
                for key, pos in self._positions.items()
                if key in self._source_ends
            }

    # -- rendering ----------------------------------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        labels = ["source", "target", "topic", "partition"]
        top = ["source", "target"]
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {
            "record_count": CounterMetricFamily(
                "kmirror_record_count", "Records replicated to the target (MM2 record-count).", labels=labels
            ),
            "byte_count": CounterMetricFamily(
                "kmirror_byte_count", "Key and value bytes replicated (MM2 byte-count).", labels=labels
            ),
            "record_rate": GaugeMetricFamily(
                "kmirror_record_rate", "Records replicated per second, last 30 s (MM2 record-rate).", labels=labels
            ),
            "byte_rate": GaugeMetricFamily(
                "kmirror_byte_rate", "Bytes replicated per second, last 30 s (MM2 byte-rate).", labels=labels
            ),
        }
        for stat in ("avg", "max", "min"):
            families[f"age_{stat}"] = GaugeMetricFamily(
                f"kmirror_record_age_ms_{stat}",
                f"{stat} of (time the batch was read - record timestamp), batch-granular (MM2 record-age-ms-{stat}).",
                labels=labels,
            )
            families[f"latency_{stat}"] = GaugeMetricFamily(
                f"kmirror_replication_latency_ms_{stat}",
                f"{stat} of (time the batch's write returned - record timestamp), batch-granular "
                f"(MM2 replication-latency-ms-{stat}).",
                labels=labels,
            )
        lag = GaugeMetricFamily(
            "kmirror_partition_lag",
            "Source end offset minus the replicated position, per source topic and partition.",
            labels=labels,
        )
        batches = CounterMetricFamily("kmirror_batches", "Micro-batches that wrote records.", labels=top)
        restarts = CounterMetricFamily(
            "kmirror_job_restarts", "Query restarts after a failure (it retries forever, with backoff).", labels=top
        )
        lost = CounterMetricFamily(
            "kmirror_data_loss_records",
            "Records the source deleted (retention, DeleteRecords) before the job could copy them.",
            labels=top,
        )
        loss_events = CounterMetricFamily(
            "kmirror_data_loss_events",
            "Data-loss events: skipped ranges, partitions whose offsets went back.",
            labels=top,
        )
        last_batch = GaugeMetricFamily(
            "kmirror_last_batch_timestamp_seconds", "Wall-clock time the last batch with records finished.", labels=top
        )
        newest = GaugeMetricFamily(
            "kmirror_last_record_timestamp_seconds",
            "Timestamp (Unix seconds) of the newest record copied, per remote topic and partition; on the "
            "heartbeats topic, time() minus it is the heartbeat age.",
            labels=labels,
        )
        group_labels = ["flow", "group", "topic", "partition"]
        rereads = GaugeMetricFamily(
            "kmirror_group_failover_rereads",
            "Records the group would re-read on the target if it moved now: its translated offset against the exact "
            "position of its committed source offset (topic: the source topic).",
            labels=group_labels,
        )
        translatable = GaugeMetricFamily(
            "kmirror_group_failover_translatable",
            "1 when the group's committed offset translates to the target (it can move now), 0 when no offset-sync "
            "answers for it yet.",
            labels=group_labels,
        )
        checkpoint_age = GaugeMetricFamily(
            "kmirror_group_checkpoint_age_seconds",
            "Seconds since a checkpoint cycle last translated the group's committed offset.",
            labels=group_labels,
        )
        wall = time.time()
        now = time.monotonic()
        with self._lock:
            for (flow, group, topic, partition), (row, last) in sorted(self._failover.items()):
                values = [flow, group, topic, str(partition)]
                translatable.add_metric(values, 1 if row.translatable else 0)
                if row.rereads is not None:
                    rereads.add_metric(values, row.rereads)
                if last is not None:
                    checkpoint_age.add_metric(values, max(0.0, wall - last))
            for (_topic, partition), part in sorted(self._partitions.items()):
                while part.window and now - part.window[0].at > self.window:
                    part.window.popleft()
                values = [self.source, self.target, part.remote_topic, str(partition)]
                families["record_count"].add_metric(values, part.count)
                families["byte_count"].add_metric(values, part.bytes)
                if part.newest_ms is not None:
                    newest.add_metric(values, part.newest_ms / 1000.0)
                samples = list(part.window) or ([part.last] if part.last else [])
                in_window = list(part.window)
                families["record_rate"].add_metric(values, sum(s.count for s in in_window) / self.window)
                families["byte_rate"].add_metric(values, sum(s.bytes for s in in_window) / self.window)
                if samples:
                    n = sum(s.count for s in samples)
                    families["age_avg"].add_metric(values, sum(s.age_sum for s in samples) / n)
                    families["age_max"].add_metric(values, max(s.age_max for s in samples))
                    families["age_min"].add_metric(values, min(s.age_min for s in samples))
                    families["latency_avg"].add_metric(values, sum(s.latency_sum for s in samples) / n)
                    families["latency_max"].add_metric(values, max(s.latency_max for s in samples))
                    families["latency_min"].add_metric(values, min(s.latency_min for s in samples))
            for (topic, partition), pos in sorted(self._positions.items()):
                if (topic, partition) in self._source_ends:
                    value = max(0, self._source_ends[(topic, partition)] - pos)
                    lag.add_metric([self.source, self.target, topic, str(partition)], value)
            batches.add_metric([self.source, self.target], self.batches)
            restarts.add_metric([self.source, self.target], self.restarts)
            lost.add_metric([self.source, self.target], self.data_loss_records)
            loss_events.add_metric([self.source, self.target], self.data_loss_events)
            if self.last_batch_at is not None:
                last_batch.add_metric([self.source, self.target], self.last_batch_at)
        yield from families.values()
        yield lag
        yield batches
        yield last_batch
        yield newest
        yield restarts
        yield lost
        yield loss_events
        yield rereads
        yield translatable
        yield checkpoint_age


def progress_positions(progress: Any) -> dict[TopicPartition, int]:
    """The next offsets to read per source partition from a query's last progress (`endOffset` of its source)."""
    out: dict[TopicPartition, int] = {}
    if not progress:
        return out
    for source in progress["sources"] or []:
        end = source["endOffset"]
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue
        if not isinstance(end, dict):
            continue
        for topic, partitions in end.items():
            if isinstance(partitions, dict):
                for partition, offset in partitions.items():
                    if isinstance(offset, int) and offset >= 0:
                        out[(topic, int(partition))] = offset
    return out


def serve(metrics: ReplicationMetrics, port: int, addr: str = "0.0.0.0") -> int:
    """Serve `metrics` on http://addr:port/metrics from a daemon thread; the port bound (0 picks a free one)."""
    return int(serve_closable(metrics, port, addr).server_port)


def serve_closable(metrics: ReplicationMetrics, port: int, addr: str = "0.0.0.0") -> Any:
    """`serve`, returning the server (`shutdown()` and `server_close()` end it): a flow's query in an application
    ends before the driver does."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return server
