"""A flow's `start_from` time turned into Spark `startingOffsets`, per source partition, at its job's first start.

`replication.start_from` may name a time (a timestamp, or a duration back from the job's first start). Spark's
Kafka source has `startingOffsetsByTimestamp`, but kmirror resolves the time itself, on the driver, so the query
gets explicit `startingOffsets` JSON that both modes (micro-batch and the real-time `GroupedKafkaSource`, which
passes Spark's options through) read the same way, and the job can log what it chose. Kafka's offsets-for-times
(ListOffsets with a timestamp, read_committed as the job reads) gives the first offset whose record timestamp is
at or after the time; a partition with no such record starts at its end as of the lookup (Kafka's answer -1:
records written after the lookup are copied, none before). Partitions and topics that appear later are not in
the JSON: Spark starts them at their earliest offset, as it does for every flow.

`starting_offsets_at` is pure (the lookup's answers in, the JSON's mapping out); `look_up` asks the source.
Must not: be used when the job resumes from a checkpoint (the checkpoint wins), or write anything to a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from reconciler.spec.client_config import ClientConfig

Partition = tuple[str, int]
#: Spark's code for "the partition's end at the query's start" in `startingOffsets`.
SPARK_LATEST = -1


def starting_offsets_at(
    partitions: Mapping[str, int], at_time: Mapping[Partition, int], ends: Mapping[Partition, int]
) -> dict[str, dict[str, int]]:
    """Spark `startingOffsets` (every partition listed, as Spark wants): the offsets-for-times answer of each
    partition, or, where it is -1 (no record at or after the time), the partition's end offset from the same
    lookup (Spark's -1, its end when the query starts, if the lookup had no answer for it)."""
    out: dict[str, dict[str, int]] = {}
    for topic, count in sorted(partitions.items()):
        out[topic] = {}
        for p in range(count):
            found = at_time.get((topic, p), -1)
            out[topic][str(p)] = found if found >= 0 else ends.get((topic, p), SPARK_LATEST)
    return out


def look_up(
    client_config: ClientConfig, partitions: Mapping[str, int], time_ms: int, timeout: float = 30.0
) -> tuple[dict[Partition, int], dict[Partition, int]]:
    """Ask the source for each partition's first offset at or after `time_ms`, and the end offsets of the
    partitions that have none: two batched ListOffsets requests, read_committed."""
    wanted = [(t, p) for t, count in sorted(partitions.items()) for p in range(count)]
    if not wanted:
        return {}, {}
    admin = AdminClient(dict(client_config))

    def list_offsets(spec: Any, which: list[Partition]) -> dict[Partition, int]:
        futures = admin.list_offsets(
            {TopicPartition(t, p): spec for t, p in which},
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=timeout,
        )
        return {(tp.topic, tp.partition): f.result(timeout=timeout + 5).offset for tp, f in futures.items()}

    at_time = list_offsets(OffsetSpec.for_timestamp(time_ms), wanted)
    none = [tp for tp in wanted if at_time.get(tp, -1) < 0]
    ends = list_offsets(OffsetSpec.latest(), none) if none else {}
    return at_time, ends
