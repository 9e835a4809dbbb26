"""What one micro-batch of the replication query did, from Spark's progress event (pure; no Spark import).

The record path is one pass (Kafka source -> Kafka sink), so nothing is computed per batch in Python. Spark
reports each batch in a `StreamingQueryProgress`: the source's offset ranges per partition (`startOffset`,
`endOffset`, JSON `{"topic": {"partition": offset}}`), `numInputRows`, durations, and the query's observed
metrics: the job adds `observe(OBSERVATION, ...)` to the stream (`observed_columns`), an aggregate Spark
computes while the batch is written: record count, key+value bytes and min/max/sum of the record timestamps.

`batch_from_progress` turns that into per-partition shares for the metrics: a partition's record count is its
offset delta scaled so that the partitions add up to the exact `numInputRows` (deltas also count offsets that
hold no record, such as transaction markers or compacted records); bytes are split by the same shares; the
timestamp statistics are the batch's (batch-granular, as before). A partition absent from `startOffset` (the
first batch, a new topic or partition) starts at 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.replication.metrics import PartitionBatch

OBSERVATION = "kmirror"
"""Name of the job's observed metrics in the query's progress."""

TopicPartition = tuple[str, int]


def observed_columns() -> list[str]:
    """SQL aggregates of the observation, over the Kafka source's columns."""
    ts = "unix_millis(timestamp)"
    return [
        "count(1) AS n",
        "sum(coalesce(length(key), 0) + coalesce(length(value), 0)) AS bytes",
        f"min({ts}) AS ts_min",
        f"max({ts}) AS ts_max",
        f"sum({ts}) AS ts_sum",
    ]


@dataclass(frozen=True)
class BatchProgress:
    batch_id: int
    records: int
    bytes: int
    partitions: tuple[PartitionBatch, ...]
    started_ms: int  # when the trigger began, before the batch's offsets were chosen
    duration_ms: int  # the whole trigger: offsets, plan, write, commit
    read_ms: int  # when the write began: every record of the batch existed by then
    phases: dict[str, int]
    ends: dict[TopicPartition, int]  # next offset to read per source partition after this batch


def offsets_json(value: Any) -> dict[TopicPartition, int]:
    """`{"topic": {"0": 12}}` (a JSON string or already decoded) as {(topic, 0): 12}; anything else: {}."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    out: dict[TopicPartition, int] = {}
    if not isinstance(value, dict):
        return out
    for topic, partitions in value.items():
        if isinstance(partitions, dict):
            for partition, offset in partitions.items():
                if isinstance(offset, int) and offset >= 0:
                    out[(str(topic), int(partition))] = offset
    return out


def batch_from_progress(progress: Mapping[str, Any], remote_topic: Any) -> BatchProgress | None:
    """The batch a progress event reports, or None for an event without records (idle trigger)."""
    records = int(progress.get("numInputRows") or 0)
    if records <= 0:
        return None
    observed = (progress.get("observedMetrics") or {}).get(OBSERVATION) or {}
    total_bytes = int(observed.get("bytes") or 0)
    ts_min = int(observed.get("ts_min") or 0)
    ts_max = int(observed.get("ts_max") or 0)
    ts_sum = int(observed.get("ts_sum") or 0)
    starts: dict[TopicPartition, int] = {}
    ends: dict[TopicPartition, int] = {}
    for source in progress.get("sources") or []:
        starts.update(offsets_json(source.get("startOffset")))
        ends.update(offsets_json(source.get("endOffset")))
    deltas = {tp: end - starts.get(tp, 0) for tp, end in ends.items() if end - starts.get(tp, 0) > 0}
    counts = _shares(deltas, records)
    byte_shares = _shares(counts, total_bytes)
    observed_n = int(observed.get("n") or records)
    parts = tuple(
        PartitionBatch(
            topic=topic,
            remote_topic=remote_topic(topic),
            partition=partition,
            count=n,
            bytes=byte_shares.get((topic, partition), 0),
            last_offset=ends[(topic, partition)] - 1,
            ts_min=ts_min,
            ts_max=ts_max,
            # The batch's mean timestamp for each of the partition's records.
            ts_sum=ts_sum * n // observed_n if observed_n else 0,
        )
        for (topic, partition), n in sorted(counts.items())
        if n > 0
    )
    durations = {str(k): int(v) for k, v in (progress.get("durationMs") or {}).items()}
    started = _epoch_ms(progress.get("timestamp"))
    total = durations.get("triggerExecution", 0)
    after_read = durations.get("addBatch", 0) + durations.get("commitOffsets", 0)
    return BatchProgress(
        batch_id=int(progress.get("batchId") or 0),
        records=records,
        bytes=total_bytes,
        partitions=parts,
        started_ms=started,
        duration_ms=total,
        read_ms=started + max(0, total - after_read),
        phases={k: v for k, v in durations.items() if k != "triggerExecution"},
        ends=ends,
    )


def _shares(weights: Mapping[TopicPartition, int], total: int) -> dict[TopicPartition, int]:
    """`total` split in proportion to `weights`, in whole units that add up to `total` (largest remainders)."""
    weight = sum(weights.values())
    if weight <= 0 or total <= 0:
        return dict.fromkeys(weights, 0)
    exact = {tp: w * total / weight for tp, w in weights.items()}
    out = {tp: int(v) for tp, v in exact.items()}
    rest = total - sum(out.values())
    for tp in sorted(exact, key=lambda k: (out[k] - exact[k], k))[:rest]:
        out[tp] += 1
    return out


def _epoch_ms(timestamp: Any) -> int:
    """Spark's progress timestamp (`2026-11-21T23:50:26.783Z`) in epoch milliseconds; 0 if unreadable."""
    if not isinstance(timestamp, str):
        return 0
    try:
        return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0
