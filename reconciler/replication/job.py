"""The replication job of one flow: a PySpark Structured Streaming query from the source to the target cluster.

This module holds the job's lifecycle (`ReplicationJob.run`: start, supervise, restart, stop) and `main`; its parts
live beside it: `settings` (the Spark settings and client defaults), `query` (the Kafka options and projection,
where a lost checkpoint resumes), `query_start` (clients, Spark session, the query), `reporting` (metrics, lag,
status), `supervision` (failure summaries, supersession, the status file).

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
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reconciler.jobcontract.spec import JobSpec
from reconciler.kafka_clients.admin import KafkaAdmin
from reconciler.kafka_clients.checkpointer import start_checkpointer_thread
from reconciler.kafka_clients.offset_syncs import read_offset_syncs
from reconciler.replication import start_offsets
from reconciler.replication.interceptor import interceptor_settings
from reconciler.replication.internal_topics import Heartbeater, ensure_internal_topics
from reconciler.replication.metrics import ReplicationMetrics
from reconciler.replication.query import resume_offsets
from reconciler.replication.query_start import QueryStart
from reconciler.replication.remote_topics import RemoteTopicKeeper
from reconciler.replication.schema_ids import schema_id_settings
from reconciler.replication.settings import (
    LAG_REFRESH_SECONDS,
    MODE,
    JobSettingError,
    job_mode,
    restart_delays,
)
from reconciler.replication.supervision import (
    StatusFile,
    Superseded,
    failure_summary,
    last_batch_id,
    superseded_by,
)
from reconciler.spec.defaults import RESTART_BACKOFF_MAX_SETTING
from reconciler.spec.intervals import interval_seconds
from reconciler.spec.placement import (
    Placement,
    choose_placement,
    requested_mode,
)
from reconciler.spec.redaction import ScrubbingStream, scrubbing_log_filter
from reconciler.spec.redaction import learn as learn_secrets
from reconciler.spec.start import is_duration, is_time, start_time_ms

log = logging.getLogger("kmirror.job")


class ReplicationJob(QueryStart):
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
        self._interceptor.update(schema_id_settings(self.spec, flow))

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
        except Exception:
            background_stop.set()  # the topic keeper ends with it (an application's flow is started again later)
            raise
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
        self._install_signals()
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
        while error is not None and not self._stopping.is_set():
            if superseded_by(error) is not None:
                break  # a newer deployment writes the flow: restarting would fence it
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
        self._end_session(spark)
        return 1 if error else 0

    def _stop_superseded(self, spark: Any, newer: int) -> int:
        """Stop for good: a newer generation of the flow writes its partitions (the plan and status say so)."""
        error = str(Superseded(newer))
        log.error("flow %s (generation %d): %s", self.flow.name, self.spec.generation, error)
        self.status.update(state="stopped", error=error, superseded_by=newer, stopped_at=time.time())
        self._end_session(spark)
        return 1

    def _install_signals(self) -> None:
        """SIGTERM and SIGINT stop the job gracefully (an application's driver handles them for its flows)."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _end_session(self, spark: Any) -> None:
        """The job's end: its Spark session stops with it (an application's outlives each flow's query)."""
        spark.stop()

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
            if time.monotonic() - last_report >= 30:
                self._report()
                last_report = time.monotonic()
        if self._stopping.is_set():
            log.info("stop requested: finishing the batch in flight")
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
        slots = self._task_slots(sc, self.placement.slots if self.placement is not None else None)
        placement = self._place(partitions, slots)
        if placement.mode == "realtime" and slots < 1:
            raise JobSettingError(f"{MODE}=realtime needs a task slot; spark.master {sc.master} has none")
        self.mode, self.slots, self.placement = placement.mode, slots, placement
        self.status.update(
            mode=self.mode, mode_reason=placement.reason, task_slots=slots, delivery=self.flow.replication.delivery
        )
        log.info("flow %s: %s, %d task slot(s) on %s", self.flow.name, placement.describe(), slots, sc.master)

    def _task_slots(self, sc: Any, asked: int | None) -> int:
        """The context's task slots; on a cluster, after waiting up to 30 s for executors to register the slots
        `asked` for (one, when the file leaves the cores to the cluster)."""
        deadline = time.monotonic() + 30
        while not str(sc.master).startswith("local") and sc.defaultParallelism < (asked or 1):
            if time.monotonic() >= deadline or self._stopping.wait(1.0):
                break
        return int(sc.defaultParallelism)

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
