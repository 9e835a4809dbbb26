"""The replication job's Spark settings (`spark.kmirror.*`) and the client defaults it writes with: what each is
for and why its default is what it is.

Must not: start Spark, a client or a thread (values and their checks only).
"""

from __future__ import annotations

from reconciler.spec.defaults import JOB_MODES

#: Spark settings kmirror reads from `spark.conf` (they are Spark-prefixed so spark-submit passes them on).
MAX_OFFSETS_PER_TRIGGER = "spark.kmirror.maxOffsetsPerTrigger"

CONSUMER_CACHE = "spark.kafka.consumer.cache.capacity"

#: The checkpoint's files on a local disk are written by `jvm/LocalCheckpointFileManager.java` (java.nio instead
#: of Hadoop's shell commands: 100-200 ms less driver work at every checkpoint); other file systems as Spark does.
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"

LOCAL_CHECKPOINT_FILE_MANAGER = "io.kmirror.replication.LocalCheckpointFileManager"

TRIGGER_INTERVAL = "spark.kmirror.triggerInterval"

METRICS_PORT = "spark.kmirror.metricsPort"

METRICS_ADDRESS = "spark.kmirror.metricsAddress"

MODE = "spark.kmirror.mode"

MODES = JOB_MODES

#: Real-time mode's source (`jvm/GroupedKafkaSource.java`): Spark's Kafka source with the partitions dealt to at
#: most `Placement.tasks` tasks (`spark.kmirror.realtimeTasks`), each reading its partitions with one consumer.
GROUPED_SOURCE = "io.kmirror.replication.GroupedKafkaSource"

#: How often the lag's source end offsets are read (at most).
LAG_REFRESH_SECONDS = 5.0

#: Upper bound of records per micro-batch (all partitions); see benchmarks/README.md for the measurements.
DEFAULT_MAX_OFFSETS_PER_TRIGGER = 1_000_000

DEFAULT_TRIGGER_INTERVAL = "250 milliseconds"

#: Real-time mode's checkpoint interval: offsets committed, metrics and status updated, new topics seen. Records
#: are forwarded as they arrive whatever it is; at each boundary the tasks end, the driver commits and plans, and
#: new tasks start (on 2 cores 0.2-0.5 s with tens of partitions, up to 2.5 s with 265, during which records wait),
#: so fewer boundaries mean a lower p99. A minute is MM2's own offset commit interval (offset.flush.interval.ms);
#: Spark's guide recommends minutes.
#: The cost: a crash re-sends up to one interval's records (none with `delivery: exactly_once`), a graceful stop
#: waits for the running interval to end (nothing re-sent), and new source topics are read from the next one.
DEFAULT_REALTIME_INTERVAL = "60 seconds"

#: How soon new source topics and partitions are noticed (Spark lists them at every trigger; this bounds the
#: client-side metadata cache of the consumers and admin it uses).
METADATA_MAX_AGE_MS = "3000"

#: The job's clients publish no JMX metrics (kmirror's own endpoint has the replication metrics): Kafka's
#: JmxReporter re-registers a client's MBean under one JVM-wide lock for each metric it adds, and
#: `AppInfoParser` registers every client under another. A real-time query creates one consumer per source
#: partition at once; with 265 partitions on 2 cores its tasks waited about 1,300 thread-seconds on those locks
#: (JFR, benchmarks/README.md). A flow that wants them back sets `auto.include.jmx.reporter: true` in
#: `replication.consumer` / `replication.producer`. (Kafka 4 clients dropped that setting for `metric.reporters`,
#: whose default there is JmxReporter; the job's clients are the Kafka connector's 3.9.)
CLIENT_METRICS_DEFAULTS = {"auto.include.jmx.reporter": "false"}

#: Consumer settings for throughput (a task reads one partition, or a real-time task several); `replication.consumer`
#: overrides them.
SOURCE_CONSUMER_DEFAULTS = {
    "max.partition.fetch.bytes": "8388608",
    "fetch.max.bytes": "67108864",
    **CLIENT_METRICS_DEFAULTS,
}

#: Real-time mode's tasks start on every checkpoint interval with a fetch; one that finds its partition empty
#: for a moment waits up to fetch.max.wait.ms (Kafka's default 500 ms) before the records that arrive next are
#: seen. 100 ms bounds that wait at a tenth of the fetches per idle partition that 10 ms (Spark's real-time
#: benchmark) costs; on a quiet 2-core machine the three gave p99 805 (100 ms), 824 (500 ms) and 967 ms (10 ms)
#: at 10,000 records/s, and 10 ms the most broker CPU (benchmarks/README.md).
REALTIME_CONSUMER_DEFAULTS = {"fetch.max.wait.ms": "100"}

#: A micro-batch task reads a range it knows is there, then asks the broker for the partition's offset range
#: (Spark's consumer does after every poll). That request queues behind the fetch the consumer pipelined past
#: the range's end, which the broker holds for fetch.max.wait.ms when the partition has nothing newer: with
#: Kafka's 500 ms every task with records waited half a second. 10 ms: 240 partitions on 2 slots copied 37,197
#: records/s instead of 12,681, p50 at 10,000 records/s 535 ms instead of 1.9 s (0 ms spun: 30,966 records/s).
MICROBATCH_CONSUMER_DEFAULTS = {"fetch.max.wait.ms": "10"}

#: Producer settings for throughput; the flow's `replication.producer` overrides them. Idempotence and
#: acks=all are not overridable.
SINK_PRODUCER_DEFAULTS = {"linger.ms": "10", "batch.size": "262144", **CLIENT_METRICS_DEFAULTS}

SINK_PRODUCER_FIXED = {"enable.idempotence": "true", "acks": "all"}

#: Waits before restarting a failed query, then the last one again, forever: a cluster that is down for an
#: hour is waited out (status and metrics show the restarts and the last error), never given up on. Each is
#: capped by `spark.kmirror.restartBackoffMaxMs` (`restart_delays`).
RESTART_DELAYS = (2.0, 5.0, 15.0, 30.0, 60.0)


def restart_delays(cap_ms: str | None) -> tuple[float, ...]:
    """`RESTART_DELAYS`, each at most `cap_ms` (the setting's value, validated when the file was loaded)."""
    cap = float(cap_ms) / 1000 if cap_ms is not None else RESTART_DELAYS[-1]
    return tuple(min(delay, cap) for delay in RESTART_DELAYS)


class JobSettingError(Exception):
    """A Spark setting of the job that it cannot run with (the job exits 1 with this message in its status)."""


def job_mode(value: str) -> str:
    """`spark.kmirror.mode`, checked."""
    mode = value.strip().lower()
    if mode not in MODES:
        raise JobSettingError(f"{MODE} is {value!r}; it must be one of {', '.join(MODES)}")
    return mode
