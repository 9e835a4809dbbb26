"""Builds the JVM classes of the replication job's record path: the sink producer's interceptor.

`jvm/ReplicationInterceptor.java`, set as the Kafka sink producer's `interceptor.classes`, does two things per
record, inside the producer, without Python:
  - Spark 4.0's Kafka sink has no `timestamp` column (`KafkaRowWriter` sends
    `ProducerRecord(topic, partition, key, value, headers)`), so the job gives it each record's source timestamp,
    offset and topic: in real-time mode the task's reader hands them over on the task's thread
    (`jvm/SourcePosition.java`); in micro-batch mode the sink projection appends them as a last header
    (`SOURCE_HEADER`), which the interceptor removes. It sets the record's timestamp;
  - from each acknowledgement it pairs the record's source offset with the offset it landed at and writes MM2's
    offset-syncs with MM2's rule (`jvm/OffsetSyncRule.java`, the same rule as `reconciler.core.offsets.emitter`).
`interceptor_settings` gives the producer settings that configure it; `reconciler.artifacts.interceptor_jar`
compiles the sources (the runners put the jar on the job's classpath).

Must not: build or fetch anything (that is `reconciler.artifacts`).
"""

from __future__ import annotations

from collections.abc import Mapping

SOURCE_HEADER = "__kmirror.source"
"""Header the micro-batch job appends last to every record: ASCII `timestampMs,sourceOffset,sourceTopic`."""

INTERCEPTOR_CLASS = "io.kmirror.replication.ReplicationInterceptor"
SYNC_RULE_CLASS = "io.kmirror.replication.OffsetSyncRule"

#: How often the interceptor sends the held (delayed) offset-syncs, MM2's periodic promotion.
DELAYED_SYNCS_FLUSH_MS = 5000


def interceptor_settings(
    syncs_topic: str | None,
    syncs_client: Mapping[str, str],
    *,
    offset_lag_max: int,
    flush_ms: int = DELAYED_SYNCS_FLUSH_MS,
) -> dict[str, str]:
    """Producer settings for the interceptor: where offset-syncs go (None: write none) and MM2's lag bound.

    `syncs_client` holds the Java client properties of the cluster with the syncs topic; they stay in memory
    (Spark passes them to the producer, which hands them to its interceptor).
    """
    settings = {"interceptor.classes": INTERCEPTOR_CLASS, "kmirror.offset.lag.max": str(offset_lag_max)}
    if syncs_topic is not None:
        settings["kmirror.offset.syncs.topic"] = syncs_topic
        settings["kmirror.offset.syncs.flush.ms"] = str(flush_ms)
        settings.update({f"kmirror.offset.syncs.client.{k}": v for k, v in syncs_client.items()})
    return settings
