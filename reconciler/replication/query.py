"""The replication query's Kafka options and sink projection: the source's (subscribe pattern, read_committed,
start offsets, the flow's consumer settings over kmirror's defaults), the sink's (idempotent, acks=all, the
interceptor) and the columns the sink writes; and where a flow whose checkpoint is gone resumes.

Pure: values in, values out. Must not: start Spark or a client, or resolve a secret (the caller hands resolved
client properties in and keeps them in memory).
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.replication.interceptor import SOURCE_HEADER
from reconciler.replication.settings import (
    METADATA_MAX_AGE_MS,
    MICROBATCH_CONSUMER_DEFAULTS,
    REALTIME_CONSUMER_DEFAULTS,
    SINK_PRODUCER_DEFAULTS,
    SINK_PRODUCER_FIXED,
    SOURCE_CONSUMER_DEFAULTS,
)
from reconciler.spec.models import FlowSpec
from reconciler.spec.start import is_time


def source_options(
    flow: FlowSpec,
    source: Mapping[str, str],
    consumer: Mapping[str, str],
    mode: str = "microbatch",
    starting_offsets: str | None = None,
    client_id: str | None = None,
) -> dict[str, str]:
    """Spark Kafka source options (the cluster's Java client properties are in `source`, secrets resolved).

    `client_id`: the flow's source client id (`policy.client_ids`), which its throttle's quota names; a `client.id`
    in the flow's own consumer settings wins (the planner names that one then)."""
    options = {f"kafka.{k}": v for k, v in source.items()}
    options.update({f"kafka.{k}": v for k, v in SOURCE_CONSUMER_DEFAULTS.items()})
    mode_defaults = REALTIME_CONSUMER_DEFAULTS if mode == "realtime" else MICROBATCH_CONSUMER_DEFAULTS
    options.update({f"kafka.{k}": v for k, v in mode_defaults.items()})
    if client_id:
        options["kafka.client.id"] = client_id
    options.update({f"kafka.{k}": v for k, v in consumer.items()})
    options.update(
        {
            "subscribePattern": flow.subscribe_pattern(),
            "includeHeaders": "true",
            "kafka.isolation.level": "read_committed",
            "kafka.metadata.max.age.ms": METADATA_MAX_AGE_MS,
            # A `start_from` time is resolved to per-partition offsets (`starting_offsets`) before a first start;
            # with a checkpoint Spark ignores this option, but still parses it.
            "startingOffsets": starting_offsets or _spark_start(flow.replication.start_from),
            # A replicator must not wedge on records that aged out or on a topic leaving the filter; the gap
            # shows up as an offset-sync at once (MM2 behaves the same).
            "failOnDataLoss": "false",
        }
    )
    return options


def _spark_start(start_from: str) -> str:
    """`start_from` as Spark's `startingOffsets` takes it: earliest or latest (a time only ever reaches Spark looked
    up, as offsets; unresolved, it stands for the earliest offsets Spark starts later partitions at)."""
    return "earliest" if is_time(start_from) else start_from


def sink_options(
    target: Mapping[str, str],
    producer: Mapping[str, str],
    interceptor: Mapping[str, str],
    client_id: str | None = None,
) -> dict[str, str]:
    """Spark Kafka sink options: the target's client properties, producer settings, the interceptor's.

    `client_id`: the flow's target client id (`policy.client_ids`), which its throttle's quota names; a `client.id`
    in the flow's own producer settings wins. The exactly-once producers take it from here too."""
    options = {f"kafka.{k}": v for k, v in target.items()}
    options.update({f"kafka.{k}": v for k, v in SINK_PRODUCER_DEFAULTS.items()})
    if client_id:
        options["kafka.client.id"] = client_id
    options.update({f"kafka.{k}": v for k, v in producer.items()})
    options.update({f"kafka.{k}": v for k, v in SINK_PRODUCER_FIXED.items()})
    options.update({f"kafka.{k}": v for k, v in interceptor.items()})
    return options


def sink_projection(flow: FlowSpec, *, source_header: bool = True) -> list[str]:
    """The sink's columns as SQL expressions over the source's columns, with the source header (`SOURCE_HEADER`)
    built here last in `headers` (`source_header`), or without it when the real-time reader hands each row's source
    position to the interceptor itself (or nothing needs it: exactly-once delivery)."""
    if not source_header:
        return [f"{flow.spark_remote_topic_expr('topic')} AS topic", "partition", "key", "value", "headers"]
    source = (
        f"named_struct('key', '{SOURCE_HEADER}', 'value', CAST(concat(CAST(unix_millis(timestamp) AS STRING), "
        "',', CAST(offset AS STRING), ',', topic) AS BINARY))"
    )
    return [
        f"{flow.spark_remote_topic_expr('topic')} AS topic",
        "partition",
        "key",
        "value",
        f"CASE WHEN headers IS NULL THEN array({source}) ELSE concat(headers, array({source})) END AS headers",
    ]


def resume_offsets(
    partitions: Mapping[str, int],
    newest_syncs: Mapping[tuple[str, int], int],
    start_from: str,
    at_start: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, dict[str, int]]:
    """Spark `startingOffsets` for a flow whose checkpoint is gone: after the newest offset-sync per partition.

    A sync (upstream U, downstream D) proves source offset U reached the target, and every record before it (a
    partition is copied in order), so reading on from U + 1 skips nothing and copies again at most what was
    copied after the newest sync (fewer than `offset_lag_max` records). A partition with no sync had no record
    copied: it starts from `start_from` (-2 earliest, -1 latest, Spark's codes). A `start_from` time: where
    `at_start` (its `startingOffsets`, looked up for a timestamp) puts the partition, else earliest (a duration
    counts from the job's first start, which a lost checkpoint forgot: copying more is safer than skipping).
    Spark wants every partition.
    """
    code = -1 if start_from == "latest" else -2
    return {
        topic: {
            str(p): (
                newest_syncs[(topic, p)] + 1
                if (topic, p) in newest_syncs
                else (at_start or {}).get(topic, {}).get(str(p), code)
            )
            for p in range(count)
        }
        for topic, count in sorted(partitions.items())
    }
