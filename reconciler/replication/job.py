"""The replication job of one flow: a PySpark Structured Streaming query from the source to the target cluster.

Started by a runner as `spark-submit ... reconciler/replication/entry.py --spec SPEC --digest D --checkpoint DIR`.

Record path, one pass and JVM only (no Python per record or per batch on it): the Kafka source with the flow's
anchored `subscribePattern`, `includeHeaders`, `read_committed` and a short metadata age (new topics and
partitions are seen at the next trigger and start from their earliest offset), an `observe` aggregate (count,
bytes, record timestamps: `progress.observed_columns`), projected to the Kafka sink's columns: `topic` (the
naming policy's SQL expression), `partition` (the source partition), `key`, `value` (nulls stay nulls:
tombstones stay tombstones), `headers`, written by Spark's Kafka writer from a thin `foreachBatch` (one pass;
the Python callback only refuses batches that start after a stop request). Spark 4.0's sink has no timestamp column,
so the source timestamp, offset and topic reach the sink producer's interceptor (`interceptor.py`,
`jvm/ReplicationInterceptor.java`) another way: in real-time mode the task's reader hands them over on the task's
thread as it reads each row (`jvm/SourcePosition.java`); in micro-batch mode the projection appends them as one
extra last header, which the interceptor removes. The interceptor sets the record timestamp and pairs the source
offset with the offset the record landed at, writing MM2's offset-syncs with MM2's rule from every record (as
MirrorSourceTask.commitRecord does), held syncs every few seconds and at exit. The producer is idempotent with
`acks=all`, and each Kafka partition is one Spark task, so order within a partition is kept.

Remote topics: created or grown before the query starts and then every few seconds by `RemoteTopicKeeper.watch`
(the planner's rules); the sink's producer waits for a topic or partition its metadata does not show yet.

Per batch, Spark's progress event (a `StreamingQueryListener`) feeds the metrics and `status.json`
(`progress.batch_from_progress`). A driver thread emits heartbeats into the source. Progress lives in the Spark
checkpoint (`spark.checkpoint_root/<flow>`); a restart or redeploy resumes from it, at least once. A failed
query is restarted in-process with capped backoff (it re-runs the uncommitted batch), forever: the job never
gives up on its own; restarts, the last error and data-loss events (records the source deleted before they were
copied, partitions whose offsets went back) are in status.json and the metrics. A flow deployed before whose
checkpoint is gone is started by its runner with `--resume-from-syncs`: it reads on from the offset-syncs (the
newest sync per partition, which the target proves copied), so nothing is copied again beyond one
`offset_lag_max` per partition and nothing is skipped.

Metrics (`metrics.py`): a Prometheus endpoint in the driver, http://HOST:PORT/metrics, PORT from
`spark.kmirror.metricsPort` (0, the default, picks a free port; -1 turns it off) and written to status.json as
`metrics_port`. MM2's MirrorSourceMetrics names in snake case with a `kmirror_` prefix, labels source, target,
topic (the remote topic, as MM2), partition: record-count -> kmirror_record_count_total, byte-count ->
kmirror_byte_count_total, record-rate -> kmirror_record_rate, byte-rate -> kmirror_byte_rate, record-age-ms-avg/max/min
-> kmirror_record_age_ms_avg/max/min, replication-latency-ms-avg/max/min -> kmirror_replication_latency_ms_avg/max/min;
plus kmirror_partition_lag (topic = the source topic: source end offset minus the replicated position, end offsets
read every few seconds), kmirror_batches_total, kmirror_last_batch_timestamp_seconds. Counts per partition come
from the batch's offset ranges, ages and latencies from the batch's observed timestamps, so they are
batch-granular: age = when the batch's write began - timestamp, latency = batch end - timestamp (see docs/metrics.md).

Modes (`spark.kmirror.mode`, else chosen by `reconciler.spec.placement` from the replicated source partitions
and the task slots, before the Spark context is created so the job can size it): `realtime`, Spark 4.1's
real-time mode, the default: the same query (source, observe, projection, interceptor) written by the plain
Kafka sink with a real-time trigger, so every source partition is one long-running task that forwards each
record as it arrives, and `triggerInterval` is the checkpoint interval (default 60 s) at which offsets are
committed and a progress event arrives (between them the status counts the records the interceptors saw
acknowledged). It needs a task slot per source partition: with `spark.master` left out the job sets
`local[2 x partitions]`, on a standalone master it asks for a core per partition; too few slots choose
`microbatch` (one micro-batch every `triggerInterval`, as above), or, with `realtime` asked for, refuse to start.
Partitions outgrowing the slots while it runs move the query to micro-batch mode at the next commit.

SIGTERM (or SIGINT): the batch in flight finishes, a batch that starts after the signal is refused before it
writes anything (Spark re-runs it on the next start), the query stops, held offset-syncs are sent, the process
exits 0. In real-time mode batches run back to back and no sink callback can refuse one: the stop waits for the
running batch to commit and stops the next one at once, so the records that batch had already sent (a few
milliseconds' worth) are sent again on the next start. (Spark's async progress tracking would save ~0.3 s per
batch but needs the plain Kafka sink, where a stop cannot refuse the next batch: under a steady stream batches
run back to back and a stop would interrupt one half-written, so micro-batch mode does not use it.)

Secrets: `${env:..}` and `${file:..}` references are resolved here, from this process's environment, into
in-memory options only. Must not: write a resolved secret to a file, a log line or a command line; or run
Python code per record.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reconciler.jobcontract.job_report import JobReport
from reconciler.jobcontract.spec import JobSpec
from reconciler.kafka_clients.admin import KafkaAdmin
from reconciler.kafka_clients.checkpointer import start_checkpointer_thread
from reconciler.kafka_clients.offset_syncs import read_offset_syncs
from reconciler.replication import exactly_once, start_offsets
from reconciler.replication.interceptor import SOURCE_HEADER, interceptor_settings
from reconciler.replication.internal_topics import Heartbeater, ensure_internal_topics
from reconciler.replication.metrics import ReplicationMetrics, progress_positions, serve
from reconciler.replication.progress import OBSERVATION, BatchProgress, batch_from_progress, observed_columns
from reconciler.replication.remote_topics import RemoteTopicKeeper
from reconciler.spec.client_config import java_client_properties, kafka_client_config
from reconciler.spec.defaults import JOB_MODES, RESTART_BACKOFF_MAX_SETTING
from reconciler.spec.intervals import interval_seconds, trigger_interval
from reconciler.spec.models import FlowSpec
from reconciler.spec.placement import (
    REALTIME_MAX_PARTITIONS,
    Placement,
    choose_placement,
    realtime_client_sizing,
    requested_mode,
)
from reconciler.spec.redaction import ScrubbingStream, scrub, scrubbing_log_filter
from reconciler.spec.redaction import learn as learn_secrets
from reconciler.spec.secrets import SecretRef
from reconciler.spec.start import is_duration, is_time, start_time_ms

log = logging.getLogger("kmirror.job")

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


_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$", re.MULTILINE)


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


class JobSettingError(Exception):
    """A Spark setting of the job that it cannot run with (the job exits 1 with this message in its status)."""


def job_mode(value: str) -> str:
    """`spark.kmirror.mode`, checked."""
    mode = value.strip().lower()
    if mode not in MODES:
        raise JobSettingError(f"{MODE} is {value!r}; it must be one of {', '.join(MODES)}")
    return mode


class Superseded(Exception):
    """A newer deployment (generation) of this exactly-once flow writes its partitions: this job stops for good
    rather than fence the newer one's writers (jvm/TransactionalLane.java)."""

    def __init__(self, newer: int) -> None:
        super().__init__(
            f"superseded by generation {newer} of the flow (a newer deployment writes its partitions): this job "
            "stops for good instead of fencing it"
        )
        self.newer = newer


_SUPERSEDED = re.compile(r"superseded by generation (\d+)")


def superseded_by(error: str | None) -> int | None:
    """The newer generation a query failure says superseded this job (None: another failure)."""
    found = _SUPERSEDED.search(error or "")
    return int(found.group(1)) if found else None


class StopRequested(Exception):
    """Raised by a batch that starts after SIGTERM: it writes nothing and is re-run on the next start."""


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


class ReplicationJob:
    def __init__(self, spec: JobSpec, checkpoint: str, status_path: Path, *, resume_from_syncs: bool = False) -> None:
        self.spec = spec
        self.flow = spec.flow
        self.checkpoint = checkpoint
        self.resume_from_syncs = resume_from_syncs
        self._warned: set[str] = set()
        self._starting_offsets: str | None = None
        #: When this process first chose where to start: a `start_from` duration counts back from it.
        self._first_start: datetime | None = None
        self.status = StatusFile(status_path, flow=spec.flow_name, digest=spec.digest)
        self._stopping = threading.Event()
        self._progress_lock = threading.Lock()
        self.batches = 0
        self.restarts = 0
        self._batches_at_restart = 0
        self.records = 0
        self.bytes = 0
        self.metrics = ReplicationMetrics(spec.flow.source, spec.flow.target)
        self._spark: Any = None
        self.mode = "microbatch"
        self.slots: int | None = None
        self.placement: Placement | None = None
        #: Set when partitions outgrew real-time mode's task slots: the query restarts in micro-batch mode.
        self._fallback: str | None = None

    # -- clients (secrets resolved here, kept in memory only) -----------------------------------------------
    def _client(self, alias: str) -> dict[str, Any]:
        return kafka_client_config(self.spec.cluster(alias), alias=alias, base_dir=self.spec.base_dir)

    def _java(self, alias: str) -> dict[str, str]:
        return java_client_properties(self.spec.cluster(alias), alias=alias, base_dir=self.spec.base_dir)

    def _resolved(self, props: Mapping[str, Any]) -> dict[str, str]:
        out = {}
        for k, v in props.items():
            value = v.resolve(self.spec.base_dir) if isinstance(v, SecretRef) else v
            out[k] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out

    # -- lifecycle ------------------------------------------------------------------------------------------
    def run(self) -> int:
        flow = self.flow
        policy = flow.policy()
        self.status.update(state="starting", pid=os.getpid(), host=socket.gethostname(), restarts=0)
        source_admin = KafkaAdmin(flow.source, self._client(flow.source))
        target_admin = KafkaAdmin(flow.target, self._client(flow.target))
        syncs_cluster, syncs_topic = flow.syncs_location()
        source_internal = [policy.heartbeats_topic()] if flow.heartbeats.enabled else []
        if syncs_cluster == flow.source:
            source_internal.append(syncs_topic)
        ensure_internal_topics(source_admin, source_internal)
        if syncs_cluster == flow.target:
            ensure_internal_topics(target_admin, [syncs_topic])
        self._interceptor = interceptor_settings(
            syncs_topic, self._java(syncs_cluster), offset_lag_max=flow.offsets.offset_lag_max
        )

        self.topics = RemoteTopicKeeper(flow, source_admin, target_admin)
        partitions = self.topics.replicated_partitions()
        self.placement = self._place(partitions)
        requested = requested_mode(dict(self.spec.spark.conf))
        if requested is not None:
            job_mode(requested)  # a bad setting stops the job before anything is created on the clusters
        # The remote topics are created or grown while the Spark session starts (seconds, its own threads).
        with ThreadPoolExecutor(1, thread_name_prefix="kmirror-remote-topics") as pool:
            remote_topics = pool.submit(self.topics.refresh)
            spark = self._spark = self._spark_session(partitions)
            self._warm_clients(spark)
            self._check_mode(spark, partitions)
            remote_topics.result()
        self.source_admin = source_admin
        self._syncs = (syncs_cluster, syncs_topic)
        self._choose_start(spark)
        # The source topics' ids as the job starts: a topic deleted and created again before the first lag
        # refresh is still told apart from the one the job read (see ReplicationMetrics.observe_topic_ids).
        with contextlib.suppress(Exception):
            self.metrics.observe_topic_ids(source_admin.topic_ids(self.topics.source_partitions()))
        background_stop = threading.Event()
        self.topics.watch(background_stop)

        self._serve_metrics(spark)
        self._listen(spark)
        try:
            query = self._start_query(spark)
        except Superseded as exc:
            background_stop.set()
            return self._stop_superseded(spark, exc.newer)
        self.status.update(state="running", app_id=spark.sparkContext.applicationId, query_id=str(query.id))
        heartbeats = None
        if flow.heartbeats.enabled:
            heartbeats = Heartbeater(
                self._client(flow.source),
                policy.heartbeats_topic(),
                flow.source,
                flow.target,
                flow.heartbeats.interval.total_seconds(),
            )
            heartbeats.start()
        # Checkpoints (and translated group offsets, with sync.group_offsets) beside the query, every
        # checkpoint_interval; a failed cycle is logged and retried, it never stops replication.
        checkpoints = start_checkpointer_thread(
            flow,
            self._client(flow.source),
            self._client(flow.target),
            background_stop,
            on_cycle=lambda report: self.metrics.observe_failover(flow.name, report.readiness),
        )
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        log.info(
            "flow %s: replicating %s -> %s (query %s, app %s, checkpoint %s)",
            flow.name,
            flow.source,
            flow.target,
            query.id,
            spark.sparkContext.applicationId,
            self.checkpoint,
        )
        error = self._await(query)
        failures = 0
        while (error is not None or self._fallback) and not self._stopping.is_set():
            if superseded_by(error) is not None:
                break  # a newer deployment writes the flow: restarting would fence it
            if self._fallback and error is None:
                log.warning("flow %s: %s; continuing in micro-batch mode (a redeploy sizes the job again)", flow.name,
                            self._fallback)  # fmt: skip
                self.mode = "microbatch"
                self.status.update(mode=self.mode, mode_reason=self._fallback, mode_fallback=True)
                self._fallback = None
                query = self._start_query(spark)
                error = self._await(query)
                continue
            self._fallback = None
            # At least once: the failed batch was not committed, so the restarted query re-runs it.
            if self.batches > self._batches_at_restart:
                failures = 0  # it made progress since the last restart: a new run of failures
            delays = restart_delays(self._spark.conf.get(RESTART_BACKOFF_MAX_SETTING, None))
            delay = delays[min(failures, len(delays) - 1)]
            failures += 1
            log.warning("query failed (%s); restarting it in %.0fs (attempt %d)", error, delay, failures)
            self.status.update(state="restarting", error=error, restarts=self.restarts)
            if self._stopping.wait(delay):
                error = None  # stopped on request while waiting; nothing was lost
                break
            self.restarts += 1
            self.metrics.restarts = self.restarts
            self._batches_at_restart = self.batches
            try:
                if self._starting_offsets is not None:
                    self._choose_start(spark)  # partitions may have come since (Spark wants every one listed)
                query = self._start_query(spark)
            except Exception as exc:  # e.g. the source cluster still unreachable: wait and try again
                error = failure_summary(str(exc))
                continue
            self.status.update(state="running", restarts=self.restarts)
            error = self._await(query)
        if heartbeats is not None:
            heartbeats.stop()
        background_stop.set()
        if checkpoints is not None:
            checkpoints.join(timeout=30)
        self._flush_offset_syncs(spark)
        self._live_counts()
        self._report(final=True)
        newer = superseded_by(error)
        if newer is not None:
            return self._stop_superseded(spark, newer)
        self.status.update(state="failed" if error else "stopped", error=error, stopped_at=time.time())
        spark.stop()
        return 1 if error else 0

    def _stop_superseded(self, spark: Any, newer: int) -> int:
        """Stop for good: a newer generation of the flow writes its partitions (the plan and status say so)."""
        error = str(Superseded(newer))
        log.error("flow %s (generation %d): %s", self.flow.name, self.spec.generation, error)
        self.status.update(state="stopped", error=error, superseded_by=newer, stopped_at=time.time())
        spark.stop()
        return 1

    def _choose_start(self, spark: Any) -> None:
        """Where the query starts when its checkpoint has no offsets: `start_from`, or after the offset-syncs
        when the runner says the flow ran before (its checkpoint was lost)."""
        if self._has_checkpoint(spark):
            self.status.update(resumed_from="checkpoint")
            return
        if not self.resume_from_syncs:
            self._starting_offsets = self._start_at_time(self.topics.source_partitions())
            self.status.update(resumed_from="start_from")
            return
        cluster, topic = self._syncs
        history = read_offset_syncs(self._client(cluster), topic)
        partitions = self.topics.source_partitions()
        newest: dict[tuple[str, int], int] = {}
        if history is not None:
            for tp in history.topic_partitions():
                syncs = history.syncs_for(tp)
                if syncs:
                    newest[(tp.topic, tp.partition)] = max(s.upstream_offset for s in syncs)
        start_from = self.flow.replication.start_from
        unsynced = {t: n for t, n in partitions.items() if any((t, p) not in newest for p in range(n))}
        at_start = self._start_at_time(unsynced) if is_time(start_from) and not is_duration(start_from) else None
        offsets = resume_offsets(partitions, newest, start_from, json.loads(at_start) if at_start else None)
        self._starting_offsets = json.dumps(offsets)
        log.warning(
            "flow %s: checkpoint %s has no offsets although the flow ran before; resuming from the offset-syncs "
            "(%d of %d partitions had one)",
            self.flow.name,
            self.checkpoint,
            sum(1 for t, ps in offsets.items() for p in ps if (t, int(p)) in newest),
            sum(len(ps) for ps in offsets.values()),
        )
        self.status.update(resumed_from="offset-syncs")

    def _start_at_time(self, partitions: Mapping[str, int]) -> str | None:
        """`startingOffsets` JSON for a `start_from` time (None for earliest and latest, which Spark takes as they
        are): each partition's first record at or after it, looked up on the source. A duration counts back from
        the first time this job process chose where to start (a query restarted before its first commit looks
        the same time up again)."""
        start_from = self.flow.replication.start_from
        if self._first_start is None:
            self._first_start = datetime.now(UTC)
        time_ms = start_time_ms(start_from, self._first_start)
        if time_ms is None:
            return None
        at_time, ends = start_offsets.look_up(self._client(self.flow.source), partitions, time_ms)
        offsets = start_offsets.starting_offsets_at(partitions, at_time, ends)
        log.info(
            "flow %s: starting %d of %d partitions at their first record at or after %s (start_from %s), the rest "
            "at their end",
            self.flow.name,
            sum(1 for offset in at_time.values() if offset >= 0),
            sum(len(ps) for ps in offsets.values()),
            datetime.fromtimestamp(time_ms / 1000, UTC).isoformat(),
            start_from,
        )
        return json.dumps(offsets)

    def _has_checkpoint(self, spark: Any) -> bool:
        """Whether the checkpoint holds committed offsets (through Hadoop's filesystem: any URI Spark takes)."""
        jvm = spark.sparkContext._jvm
        path = jvm.org.apache.hadoop.fs.Path(self.checkpoint.rstrip("/") + "/offsets")
        fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        return bool(fs.exists(path)) and len(fs.listStatus(path)) > 0

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._stopping.set()
        self.status.update(state="stopping")

    def _await(self, query: Any) -> str | None:
        """Wait for the query to end (failure) or for a stop signal (graceful). The failure text, or None."""
        last_report = time.monotonic()
        last_lag = 0.0
        while not self._stopping.is_set():
            try:
                if query.awaitTermination(0.5):
                    break
            except Exception:
                break
            if time.monotonic() - last_lag >= LAG_REFRESH_SECONDS:
                self._refresh_lag(query)
                last_lag = time.monotonic()
                if self._outgrown():
                    break
            if time.monotonic() - last_report >= 30:
                self._report()
                last_report = time.monotonic()
        if self._stopping.is_set() or self._fallback:
            log.info(
                "%s: finishing the batch in flight", "stop requested" if self._stopping.is_set() else "mode change"
            )
            if self.flow.replication.exactly_once:
                pass  # what a stopped batch sent is aborted or skipped on the next start: nothing to wait for
            elif self.mode == "realtime":
                self._await_next_batch(query)
            else:
                while query.isActive and query.status.get("isTriggerActive"):
                    time.sleep(0.05)
            query.stop()
        exc = query.exception()
        if exc is None or "StopRequested" in str(exc):
            return None
        log.error("query failed: %s", exc)
        return failure_summary(str(exc))

    def _place(self, partitions: int, slots_now: int | None = None) -> Placement:
        """The mode and task slots for `partitions` replicated source partitions (reconciler.spec.placement)."""
        spark = self.spec.spark
        return choose_placement(
            deploy=spark.deploy, master=spark.master, conf=dict(spark.conf), partitions=partitions, slots_now=slots_now
        )

    def _check_mode(self, spark: Any, partitions: int) -> None:
        """`spark.kmirror.mode` (validated), or the automatic choice, on the task slots the context has."""
        requested = spark.conf.get(MODE, None)
        if requested is not None:
            job_mode(str(requested))
        sc = spark.sparkContext
        slots = self._task_slots(sc, partitions)
        placement = self._place(partitions, slots)
        if placement.mode == "realtime" and slots < 1:
            raise JobSettingError(f"{MODE}=realtime needs a task slot; spark.master {sc.master} has none")
        self.mode, self.slots, self.placement = placement.mode, slots, placement
        self.status.update(
            mode=self.mode, mode_reason=placement.reason, task_slots=slots, delivery=self.flow.replication.delivery
        )
        log.info("flow %s: %s, %d task slot(s) on %s", self.flow.name, placement.describe(), slots, sc.master)

    def _task_slots(self, sc: Any, partitions: int) -> int:
        """The context's task slots; on a cluster, after waiting up to 30 s for executors to register."""
        deadline = time.monotonic() + 30
        while not str(sc.master).startswith("local") and sc.defaultParallelism < partitions:
            if time.monotonic() >= deadline or self._stopping.wait(1.0):
                break
        return int(sc.defaultParallelism)

    def _outgrown(self) -> bool:
        """Real-time mode chosen by kmirror, with more source partitions now than it takes
        (`REALTIME_MAX_PARTITIONS`: their fetches and producer batches would outgrow the heap's budgets): the job
        goes on in micro-batch mode (the plan and status say so). Partitions below that join the running tasks."""
        seen = self.topics.partitions_seen
        if self.mode != "realtime" or seen is None or seen <= REALTIME_MAX_PARTITIONS:
            return False
        if requested_mode(dict(self.spec.spark.conf)) == "realtime":
            return False
        self._fallback = f"{seen} source partitions now: more than the {REALTIME_MAX_PARTITIONS} real-time mode takes"
        return True

    def _interval(self) -> str:
        """`triggerInterval` as Spark's interval text: the micro-batch trigger, or real-time mode's checkpoint
        interval (each mode has its own default)."""
        default = DEFAULT_REALTIME_INTERVAL if self.mode == "realtime" else DEFAULT_TRIGGER_INTERVAL
        return trigger_interval(str(self._spark.conf.get(TRIGGER_INTERVAL, default)))

    def _await_next_batch(self, query: Any) -> None:
        """Real-time mode: wait until the running batch commits (at most its interval and a minute more).

        The next batch starts right after, and what it sends before `stop()` reaches it is sent again on the
        next start, so the end is read from the JVM every 20 ms (the query's last progress, two py4j calls):
        the Python listener's event comes seconds later on a busy machine (pyspark converts the whole
        progress, call by call), and not at all for a batch without records."""
        deadline = time.monotonic() + (interval_seconds(self._interval()) or 300.0) + 60
        seen = last_batch_id(query)
        while last_batch_id(query) == seen and query.isActive and time.monotonic() < deadline:
            time.sleep(0.02)

    def _serve_metrics(self, spark: Any) -> None:
        port = int(spark.conf.get(METRICS_PORT, "0"))
        if port < 0:
            return
        bound = serve(self.metrics, port, str(spark.conf.get(METRICS_ADDRESS, "0.0.0.0")))
        self.status.update(metrics_port=bound)
        log.info("metrics on http://0.0.0.0:%d/metrics", bound)

    def _refresh_lag(self, query: Any) -> None:
        """The query's committed positions and the source end offsets, for `kmirror_partition_lag`.

        The positions are read before the acknowledged counts are drained, and published after: every record of
        a committed batch was acknowledged before the commit, so a lag of 0 on the endpoint never shows before
        the counts of the records it covers."""
        try:
            positions = progress_positions(query.lastProgress)
            self._live_counts()
            self.metrics.observe_positions(positions)
            partitions = self.metrics.partitions()
            if partitions:
                self.metrics.observe_source_ends(self.source_admin.end_offsets(partitions))
                try:
                    ids = self.source_admin.topic_ids({t for t, _ in partitions})
                except Exception as exc:  # ids are a second witness of a re-created topic: never stop the rest
                    self._warn_once(f"topic ids not read: {exc}")
                    ids = {}
                events = self.metrics.observe_topic_ids(ids)
                events += self.metrics.observe_source_starts(self.source_admin.start_offsets(partitions))
                for event in events:
                    log.warning("data loss: %s", event)
                    self.status.update(
                        data_loss_records=self.metrics.data_loss_records,
                        data_loss_events=self.metrics.data_loss_events,
                        data_loss_last=event,
                    )
        except Exception as exc:  # a metric must never stop replication
            self._warn_once(f"lag and data loss not refreshed: {exc}")

    def _warn_once(self, message: str) -> None:
        """A warning for each distinct message (a refresh failing every few seconds would flood the log)."""
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s", message)

    def _local_classes(self) -> Any:
        """The driver JVM's `io.kmirror.replication` classes in local mode, where every task, interceptor and
        exactly-once writer runs in that JVM; None on a cluster (they run in the executors' JVMs)."""
        if not str(self._spark.sparkContext.master).startswith("local"):
            return None
        return self._spark.sparkContext._jvm.io.kmirror.replication

    def _offset_syncs_sent(self) -> int | None:
        """Offset-syncs the interceptors and the exactly-once writers sent (local mode); None if unknown."""
        try:
            classes = self._local_classes()
            if classes is None:
                return None
            return int(classes.ReplicationInterceptor.syncsSent()) + int(classes.ExactlyOnceWriter.syncsSent())
        except Exception:
            return None

    def _unpaired(self) -> int | None:
        """Records the interceptors sent without their source position (see jvm/SourcePosition.java: no
        offset-sync, the producer's timestamp); 0 unless the pairing rule was broken. None if unknown."""
        try:
            classes = self._local_classes()
            return None if classes is None else int(classes.ReplicationInterceptor.unpairedRecords())
        except Exception:
            return None

    def _acknowledged(self) -> tuple[int, int] | None:
        """Records and bytes the target acknowledged, from the interceptors (local mode); None if unknown."""
        try:
            classes = self._local_classes()
            if classes is None:
                return None
            interceptor = classes.ReplicationInterceptor
            return int(interceptor.recordsAcknowledged()), int(interceptor.bytesAcknowledged())
        except Exception:
            return None

    def _acknowledged_metrics(self) -> bool:
        """Real-time mode in local mode: counts, ages and latencies come from the interceptors (per record, as
        acknowledged) rather than from Spark's progress, which arrives once per checkpoint interval. Not with
        exactly-once delivery: its transactional producers have no interceptor, so Spark's progress counts."""
        if self.flow.replication.exactly_once:
            return False
        return self.mode == "realtime" and str(self._spark.sparkContext.master).startswith("local")

    def _live_counts(self) -> None:
        """Real-time mode reports progress once per checkpoint interval: between, the metrics and the status
        count what the target acknowledged (local mode; on a cluster they move at each interval)."""
        if not self._acknowledged_metrics():
            return
        try:
            drained = str(
                self._spark.sparkContext._jvm.io.kmirror.replication.ReplicationInterceptor.drainAcknowledged()
            )
        except Exception as exc:  # a metric must never stop replication
            self._warn_once(f"acknowledged records not read from the interceptors: {exc}")
            return
        with self._progress_lock:
            self.metrics.observe_acknowledged(drained)
            acked = self._acknowledged()
            if acked is not None and acked[0] > self.records:
                self.status.update(records=acked[0], bytes=max(self.bytes, acked[1]))

    def _flush_offset_syncs(self, spark: Any) -> None:
        """Send the held offset-syncs now (local mode; executors elsewhere send theirs when they exit)."""
        try:
            spark.sparkContext._jvm.io.kmirror.replication.ReplicationInterceptor.flushAll()
        except Exception as exc:
            log.debug("held offset-syncs not flushed from the driver: %s", exc)

    def _report(self, *, final: bool = False) -> None:
        unpaired = self._unpaired()
        log.info(
            "%sbatches=%d records=%d bytes=%d offset-syncs=%s remote-topics-created=%d",
            "final: " if final else "",
            self.batches,
            self.records,
            self.bytes,
            self._offset_syncs_sent(),
            len(self.topics.created),
        )
        if unpaired:
            log.warning("%d records were sent without their source position (no offset-sync for them)", unpaired)
            self.status.update(records_without_source=unpaired)
        fenced = self._fenced_writers()
        if fenced:
            log.warning(
                "exactly-once writers of this job were fenced %d time(s) by another writer of the flow's partitions "
                "(a stray task, or an older deployment still alive)",
                fenced,
            )
            self.status.update(fenced_writers=fenced)

    def _fenced_writers(self) -> int | None:
        """Times another writer fenced this job's exactly-once writers (local mode); None if unknown."""
        if not self.flow.replication.exactly_once:
            return None
        try:
            classes = self._local_classes()
            return None if classes is None else int(classes.ExactlyOnceWriter.fencedCount())
        except Exception:
            return None

    # -- Spark ----------------------------------------------------------------------------------------------
    def _spark_session(self, partitions: int) -> Any:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName(f"kmirror-{self.flow.name}")
        # Kafka options carry credentials and TLS key material; Spark shows options in plans and the UI.
        builder = builder.config("spark.sql.redaction.options.regex", "(?i)url|password|secret|token|jaas|key|cert")
        # Settings holding references are resolved here rather than passed on spark-submit's command line.
        refs = {k: v for k, v in self.spec.spark.conf.items() if isinstance(v, SecretRef)}
        for key, value in self._resolved(refs).items():
            builder = builder.config(key, value)
        # Sized by kmirror when the file leaves it open (reconciler.spec.placement): a slot per partition.
        if self.placement is not None and self.placement.master is not None:
            builder = builder.config("spark.master", self.placement.master)
        if self.placement is not None and self.placement.cores_max is not None:
            builder = builder.config("spark.cores.max", str(self.placement.cores_max))
        if (
            self.placement is not None
            and self.placement.mode == "realtime"
            and CONSUMER_CACHE not in self.spec.spark.conf
        ):
            sizing = realtime_client_sizing(partitions, self.placement.slots)
            builder = builder.config(CONSUMER_CACHE, str(sizing.consumer_cache))
        if CHECKPOINT_FILE_MANAGER not in self.spec.spark.conf:
            builder = builder.config(CHECKPOINT_FILE_MANAGER, LOCAL_CHECKPOINT_FILE_MANAGER)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        return spark

    def _warm_clients(self, spark: Any) -> None:
        """The JVM's Kafka clients initialised on a daemon thread while the query is analysed (`ClientWarmup`):
        the first batch's offsets and the tasks' clients come sooner. Best effort: the job's own clients report
        any problem."""
        try:
            jvm = spark.sparkContext._jvm
            warmup = jvm.io.kmirror.replication.ClientWarmup
            warmup.start(self._java(self.flow.source), self._java(self.flow.target))
        except Exception as exc:  # e.g. an interceptor jar without the class: start as before
            log.debug("client warm-up not started: %s", type(exc).__name__)

    def _confirm_leaders_ahead(self, spark: Any) -> None:
        """In local mode, the leaders of every remote topic's partitions asked for in one round on a daemon thread
        while the query starts (`PartitionLeaders.confirmAhead`): the tasks' first records to many topics need not
        wait for one round per topic. Best effort: without it each topic's first record asks for itself."""
        if not str(spark.sparkContext.master).startswith("local") or not self.topics.remote_topics:
            return  # executors in other JVMs have gates of their own
        try:
            leaders = spark.sparkContext._jvm.io.kmirror.replication.PartitionLeaders
            leaders.confirmAhead(self._java(self.flow.target), self.topics.remote_topics)
        except Exception as exc:  # e.g. an interceptor jar without the method
            log.debug("leaders not confirmed ahead: %s", type(exc).__name__)

    def _listen(self, spark: Any) -> None:
        """Every batch's progress event, from Spark's listener bus, to `_on_progress`."""
        from pyspark.sql.streaming.listener import StreamingQueryListener

        job = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                try:
                    job._on_progress(json.loads(event.progress.json))
                except Exception as exc:  # the listener must never break the query
                    log.warning("batch progress not recorded: %s", exc)

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                pass

        spark.streams.addListener(Listener())

    def _start_query(self, spark: Any) -> Any:
        flow = self.flow
        conf = spark.conf
        self._confirm_leaders_ahead(spark)
        consumer, producer = self._resolved(flow.replication.consumer), self._resolved(flow.replication.producer)
        if self.mode == "realtime":  # a consumer and an open batch per partition: sized by their count
            sizing = realtime_client_sizing(self.topics.replicated_partitions(), self.slots)
            consumer, producer = {**sizing.consumer, **consumer}, {**sizing.producer, **producer}
        # A throttled flow's clients take the ids its quotas name (`policy.client_ids`); others keep Kafka's own.
        client_ids = self.spec.effective.get("client_ids") or {}
        source = source_options(
            flow,
            self._java(flow.source),
            consumer,
            self.mode,
            self._starting_offsets,
            client_id=client_ids.get("source"),
        )
        if self.mode == "microbatch":
            source["maxOffsetsPerTrigger"] = str(
                conf.get(MAX_OFFSETS_PER_TRIGGER, str(DEFAULT_MAX_OFFSETS_PER_TRIGGER))
            )
        target_id = client_ids.get("target")
        self._sink = sink_options(self._java(flow.target), producer, self._interceptor, client_id=target_id)
        source_format = "kafka"
        # In real-time mode the reader hands each row's source position to the interceptor on the task's thread
        # (SourcePosition): no header to build, write, convert and strip per record. Exactly-once needs neither.
        positions = self.mode == "realtime" and not flow.replication.exactly_once
        if self.mode == "realtime":
            tasks = self.placement.tasks if self.placement is not None else None
            source_format, source["kmirror.tasks"] = GROUPED_SOURCE, str(tasks or 0)
            source["kmirror.sourcePositions"] = str(positions).lower()
        stream = spark.readStream.format(source_format).options(**source).load()
        if not self._acknowledged_metrics():  # else the interceptors count: no aggregate per record needed
            stream = stream.observe(OBSERVATION, *(_expr(c) for c in observed_columns()))
        if flow.replication.exactly_once:
            return self._start_exactly_once(spark, stream)
        writer = (
            stream.selectExpr(*sink_projection(flow, source_header=not positions))
            .writeStream.queryName(f"kmirror-{flow.name}")
            .option("checkpointLocation", self.checkpoint)
        )
        if self.mode == "realtime":
            writer = writer.format("kafka").options(**self._sink).outputMode("update")
            # pyspark 4.1 has no keyword for it yet; the JVM's RealTimeTrigger is what `realTime=` will set.
            jvm = spark.sparkContext._jvm
            writer._jwrite = writer._jwrite.trigger(
                jvm.org.apache.spark.sql.execution.streaming.RealTimeTrigger.create(self._interval())
            )
            return writer.start()
        return writer.trigger(processingTime=self._interval()).foreachBatch(self._write_batch).start()

    def _start_exactly_once(self, spark: Any, observed: Any) -> Any:
        """The query through the transactional writer (`exactly_once.py`); the syncs go in its transactions when
        they are on the target."""
        syncs_cluster, syncs_topic = self._syncs
        producer = exactly_once.producer_properties(self._sink)
        interval_ms = exactly_once.transaction_interval_ms(
            spark.conf.get(exactly_once.TRANSACTION_INTERVAL, str(exactly_once.DEFAULT_TRANSACTION_INTERVAL_MS))
        )
        problem = exactly_once.interval_problem(interval_ms, exactly_once.transaction_timeout_ms(producer))
        if problem is not None:
            raise JobSettingError(problem)
        settings = exactly_once.writer_settings(
            state_topic=self.spec.state_topic,
            flow=self.spec.eos_name,
            producer=producer,
            source=self._java(self.flow.source),
            generation=self.spec.generation,
            run=uuid.uuid4().hex,  # lanes are never reused across runs of the query
            syncs_topic=syncs_topic,
            syncs_in_transaction=syncs_cluster == self.flow.target,
            syncs_client=self._java(syncs_cluster),
            offset_lag_max=self.flow.offsets.offset_lag_max,
            interval_ms=interval_ms,
        )
        self._fence_on_start(spark, settings)
        return exactly_once.start_query(
            spark, observed, self.flow, settings, checkpoint=self.checkpoint, mode=self.mode, interval=self._interval()
        )

    def _fence_on_start(self, spark: Any, settings: Mapping[str, str]) -> None:
        """Fence every partition's transactional id before the query starts (a dead or stray writer's open
        transactions are aborted now, not after the transaction timeout); raises `Superseded` instead when a newer
        generation of the flow committed positions (fencing it would start a fight)."""
        jvm = spark.sparkContext._jvm
        jsettings, topics, remotes, partitions = (
            jvm.java.util.HashMap(),
            jvm.java.util.ArrayList(),
            jvm.java.util.ArrayList(),
            jvm.java.util.ArrayList(),
        )
        for key, value in settings.items():
            jsettings.put(key, value)
        for topic, count in sorted(self.topics.source_partitions().items()):
            remote = self.flow.remote_topic(topic)
            for partition in range(count):
                topics.add(topic)
                remotes.add(remote)
                partitions.add(partition)
        newer = int(jvm.io.kmirror.replication.ExactlyOnceWriter.fenceOnStart(jsettings, topics, remotes, partitions))
        if newer:
            raise Superseded(newer)
        self.status.update(generation=self.spec.generation)

    def _write_batch(self, df: Any, batch_id: int) -> None:
        """One micro-batch, written by Spark's Kafka writer in one pass; refused once a stop was requested."""
        if self._stopping.is_set():
            log.info(
                "batch %d began after the stop request: refused before writing; it re-runs on the next start "
                "(Spark logs the refusal as an error)",
                batch_id,
            )
            raise StopRequested(f"batch {batch_id} refused: the job is stopping")
        df.write.format("kafka").options(**self._sink).save()

    def _on_progress(self, progress: Mapping[str, Any]) -> None:
        batch = batch_from_progress(progress, self.flow.remote_topic)
        if batch is None:
            return
        with self._progress_lock:
            written_ms = batch.started_ms + batch.duration_ms
            if self._acknowledged_metrics():
                self.metrics.observe_commit()  # its records were counted as the target acknowledged them
            else:
                self.metrics.observe_batch(batch.partitions, batch.read_ms, written_ms)
            self.metrics.observe_positions(batch.ends)
            self.batches += 1
            self.records += batch.records
            self.bytes += batch.bytes
            self._log_batch(batch)
            acked = self._acknowledged() if self.mode == "realtime" else None
            self.status.update(
                batches=self.batches,
                records=max(self.records, acked[0] if acked else 0),
                bytes=max(self.bytes, acked[1] if acked else 0),
                last_batch_id=batch.batch_id,
                last_batch_at=time.time(),
                last_batch_seconds=round(batch.duration_ms / 1000, 3),
                last_batch_records=batch.records,
                last_batch_phases=batch.phases,
                offset_syncs=self._offset_syncs_sent(),
                error=None,
            )

    def _log_batch(self, batch: BatchProgress) -> None:
        log.log(
            logging.INFO if batch.records >= 10_000 or batch.duration_ms >= 10_000 else logging.DEBUG,
            "batch %d: %d records, %d partitions, %.1fs %s",
            batch.batch_id,
            batch.records,
            len(batch.partitions),
            batch.duration_ms / 1000,
            batch.phases,
        )


def last_batch_id(query: Any) -> int:
    """The id of the query's last finished batch (-1 before the first), from the JVM's StreamingQuery."""
    last = query._jsq.lastProgress()
    return -1 if last is None else int(last.batchId())


def _expr(sql: str) -> Any:
    from pyspark.sql import functions as F

    return F.expr(sql)


def failure_summary(text: str) -> str:
    """One line naming what failed: the innermost `SomeError: message` of a Spark/py4j/Python error text."""
    lines = [m for m in _ERROR_LINE.finditer(text) if not m.group(1).startswith(("py4j.", "org.apache.spark"))]
    if lines:
        return f"{lines[-1].group(1)}: {lines[-1].group(2)}"[:500]
    first = text.strip().splitlines()
    return (first[0] if first else "unknown failure")[:500]


class StatusFile:
    """`status.json` in the job's folder (`jobcontract.status.JobReport`): what the runner and `kmirror status`
    read. Written atomically, owner-only."""

    def __init__(self, path: Path, **fixed: Any) -> None:
        self.path = path
        self._data: JobReport = {**fixed, "started_at": time.time()}  # type: ignore[typeddict-item]
        self._lock = threading.RLock()  # re-entrant: the SIGTERM handler updates it on the main thread

    def update(self, **fields: Any) -> None:
        with self._lock:
            self._data.update({**fields, "updated_at": time.time()})  # type: ignore[typeddict-item]
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(scrub(json.dumps(self._data, indent=2, sort_keys=True)) + "\n")
            tmp.replace(self.path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kmirror-replication-job", description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, required=True, help="the job spec file the runner wrote")
    parser.add_argument("--digest", required=True, help="the flow's spec digest (checked against the file)")
    parser.add_argument("--checkpoint", required=True, help="the Spark checkpoint location of the flow (path or URI)")
    parser.add_argument("--status", type=Path, help="status file (default: status.json beside the spec)")
    parser.add_argument(
        "--resume-from-syncs",
        action="store_true",
        help="the flow ran before: if the checkpoint has no offsets, read on from the offset-syncs",
    )
    args = parser.parse_args(argv)
    sys.stdout, sys.stderr = ScrubbingStream(sys.stdout), ScrubbingStream(sys.stderr)  # tracebacks, py4j errors
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    spec = JobSpec.read(args.spec)
    learn_secrets(spec.effective, base_dir=spec.base_dir)  # the log writer and status.json scrub every one
    for handler in logging.getLogger().handlers:
        handler.addFilter(scrubbing_log_filter())
    if spec.digest != args.digest:
        log.error("spec file %s has digest %s, the command line says %s", args.spec, spec.digest, args.digest)
        return 2
    status = args.status or args.spec.with_name("status.json")
    job = ReplicationJob(spec, args.checkpoint, status, resume_from_syncs=args.resume_from_syncs)
    try:
        return job.run()
    except Exception as exc:
        job.status.update(state="failed", error=str(exc)[:2000], stopped_at=time.time())
        log.exception("the replication job of flow %s failed", spec.flow_name)
        return 1
