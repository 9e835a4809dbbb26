"""Default values that mirror Apache Kafka MirrorMaker 2's, in one place so the models, the importer and the
docs agree. Sources: MM2's DefaultTopicFilter, DefaultGroupFilter, DefaultConfigPropertyFilter,
MirrorSourceConfig, MirrorCheckpointConfig and MirrorHeartbeatConfig (Kafka 4.0).

Pure data, no behaviour.
"""

from __future__ import annotations

from reconciler.core.policy.filters import KMIRROR_INTERNAL_TOPIC_PATTERN

MM2_TOPIC_EXCLUDES: tuple[str, ...] = (r"mm2.*\.internal", r".*\.replica", r"__.*")
"""MM2's `topics.exclude` default."""

DEFAULT_TOPIC_INCLUDES: tuple[str, ...] = (".*",)
DEFAULT_TOPIC_EXCLUDES: tuple[str, ...] = (*MM2_TOPIC_EXCLUDES, KMIRROR_INTERNAL_TOPIC_PATTERN)
"""MM2's excludes plus kmirror's own internal topics (which are also excluded unconditionally)."""

DEFAULT_GROUP_INCLUDES: tuple[str, ...] = (".*",)
DEFAULT_GROUP_EXCLUDES: tuple[str, ...] = ("console-consumer-.*", "connect-.*", "__.*")
"""MM2's `groups.exclude` default."""

DEFAULT_CONFIG_EXCLUDES: tuple[str, ...] = (
    r"follower\.replication\.throttled\.replicas",
    r"leader\.replication\.throttled\.replicas",
    r"message\.timestamp\.difference\.max\.ms",
    r"message\.timestamp\.type",
    r"unclean\.leader\.election\.enable",
    r"min\.insync\.replicas",
)
"""MM2's `config.properties.exclude` default: topic configs never copied to the remote topic."""

MM2_OFFSET_LAG_MAX = 100
MM2_CHECKPOINT_INTERVAL_SECONDS = 60
MM2_HEARTBEAT_INTERVAL_SECONDS = 1
MM2_REPLICATION_FACTOR = 2
"""MM2 creates remote topics with replication factor 2 unless told otherwise; kmirror defaults to the broker's."""

DEFAULT_STATE_TOPIC = "_kmirror.state"

JOB_MODES = ("microbatch", "realtime")
"""Values of the Spark setting `spark.kmirror.mode`: Spark micro-batches, or Spark 4.1's real-time mode."""

REALTIME_MIN_INTERVAL_SECONDS = 5.0
"""Spark's `spark.sql.streaming.realTimeMode.minBatchDuration` default: real-time mode's shortest interval."""

#: The Spark setting with the most tasks a real-time job reads its source partitions with (each task reads a
#: share of them with one consumer), and its default, MM2's tasks in the benchmark: on 2 cores 2 tasks copied
#: 1.31x / 1.02x / 0.87x MM2's records/s (1 KB x 6, 100 B x 6, 1 KB x 240 partitions) at 0.76x / 0.95x / 1.08x its
#: CPU, p99 21-22 ms; a task per partition made 0.39x at 2.4x the CPU and 2.1 s with 240 (benchmarks/README.md).
#: Give a job more cores and raise it with them.
REALTIME_TASKS_SETTING = "spark.kmirror.realtimeTasks"
DEFAULT_REALTIME_TASKS = 2

#: The Spark setting with the longest wait (ms) before a failed query is restarted: the waits grow 2, 5, 15, 30,
#: 60 s and stay at the last, capped by it. A lower cap resumes sooner after an outage ends, at one query start
#: per cap while it lasts.
RESTART_BACKOFF_MAX_SETTING = "spark.kmirror.restartBackoffMaxMs"
