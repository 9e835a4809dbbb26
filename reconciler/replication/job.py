"""The replication job of one flow: a PySpark Structured Streaming query from the source to the target cluster.

Started by a runner as `spark-submit ... reconciler/replication/entry.py --spec SPEC --digest D --checkpoint DIR`.

Record path (JVM only, no Python per record): the Kafka source with the flow's anchored `subscribePattern`,
`includeHeaders`, `read_committed` and a short metadata age (new topics and partitions are seen at the next
trigger and start from their earliest offset), projected to the Kafka sink's columns: `topic` (the naming
policy's SQL expression), `partition` (the source partition), `key`, `value` (nulls stay nulls: tombstones stay
tombstones), `headers`. Spark 4.0's sink has no timestamp column (`KafkaRowWriter` sends
`ProducerRecord(topic, partition, key, value, headers)`), so the source timestamp travels as one extra last
header that `TimestampInterceptor` (see `interceptor.py`) turns back into the record timestamp inside the
sink's producer. The producer is idempotent with `acks=all`, and each Kafka partition is one Spark task, so
order within a partition is kept.

Per micro-batch (`foreachBatch`, driven from the driver): aggregate per source partition the record count, the
last source offset and every `offset_lag_max/4`-th source offset (a first pass over the batch, JVM only); create
or grow the remote topics the batch needs (`RemoteTopicKeeper`, the planner's rules); write (a second pass;
`spark.kmirror.cacheBatch=true` caches the batch between the two, off by default: measured no faster here and it
holds up to `maxOffsetsPerTrigger` records in the driver's heap). Then read the target end offsets of the
partitions written to: kmirror is the only writer of its remote topics and writes without transactions, so the
batch's records of a partition are the last `count` records of its remote partition, in order, and each sampled
source offset maps to an exact target offset. Those pairs go through MM2's offset-sync rule
(`OffsetSyncEmitter.observe_batch`) into the offset-syncs topic; held syncs are flushed every few seconds.
A driver thread emits heartbeats into the source. Progress lives in the Spark checkpoint
(`spark.checkpoint_root/<flow>`); a restart or redeploy resumes from it, at least once. A failed query is
restarted in-process with backoff (it re-runs the uncommitted batch); after five failures in a row without
progress the job exits 1.

Metrics (`metrics.py`): a Prometheus endpoint in the driver, http://HOST:PORT/metrics, PORT from
`spark.kmirror.metricsPort` (0, the default, picks a free port; -1 turns it off) and written to status.json as
`metrics_port`. MM2's MirrorSourceMetrics names in snake case with a `kmirror_` prefix, labels source, target,
topic (the remote topic, as MM2), partition: record-count -> kmirror_record_count_total, byte-count ->
kmirror_byte_count_total, record-rate -> kmirror_record_rate, byte-rate -> kmirror_byte_rate, record-age-ms-avg/max/min
-> kmirror_record_age_ms_avg/max/min, replication-latency-ms-avg/max/min -> kmirror_replication_latency_ms_avg/max/min;
plus kmirror_partition_lag (topic = the source topic: source end offset minus the replicated position, end offsets
read every few seconds), kmirror_batches_total, kmirror_last_batch_timestamp_seconds. Ages and latencies come from
the batch aggregate's min/max/sum of the record timestamps, so they are batch-granular: age = when the aggregate had
read the batch - timestamp, latency = when the write returned - timestamp (see docs/metrics.md).

SIGTERM (or SIGINT): the batch in flight finishes, a batch that starts after the signal is refused before it
writes anything (Spark re-runs it on the next start), the query stops, the process exits 0.

Secrets: `${env:..}` and `${file:..}` references are resolved here, from this process's environment, into
in-memory options only. Must not: write a resolved secret to a file, a log line or a command line; or run
Python code per record.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from reconciler.adapters.checkpointer import start_checkpointer_thread
from reconciler.adapters.kafka_admin import KafkaAdmin
from reconciler.replication.interceptor import INTERCEPTOR_CLASS, TIMESTAMP_HEADER
from reconciler.replication.internal_topics import Heartbeater, OffsetSyncPublisher, ensure_internal_topics
from reconciler.replication.jobspec import JobSpec
from reconciler.replication.metrics import PartitionBatch, ReplicationMetrics, progress_positions, serve
from reconciler.replication.remote_topics import RemoteTopicKeeper
from reconciler.spec.client_config import java_client_properties, kafka_client_config
from reconciler.spec.models import FlowSpec
from reconciler.spec.secrets import SecretRef

log = logging.getLogger("kmirror.job")

#: Spark settings kmirror reads from `spark.conf` (they are Spark-prefixed so spark-submit passes them on).
MAX_OFFSETS_PER_TRIGGER = "spark.kmirror.maxOffsetsPerTrigger"
TRIGGER_INTERVAL = "spark.kmirror.triggerInterval"
CACHE_BATCH = "spark.kmirror.cacheBatch"
METRICS_PORT = "spark.kmirror.metricsPort"
METRICS_ADDRESS = "spark.kmirror.metricsAddress"
#: How often the lag's source end offsets are read (at most).
LAG_REFRESH_SECONDS = 5.0
#: Measured by benchmarks/replication.py (1 KB records, 6 partitions, 2 cores): 250,000 instead of 100,000 gave
#: +37 % records/s, -17 % CPU per record and p50 latency at 10,000 records/s down from 22 s to 6.6 s, because
#: every batch has a fixed cost of seconds here (two Spark jobs, a shuffle, checkpoint writes).
DEFAULT_MAX_OFFSETS_PER_TRIGGER = 250_000
DEFAULT_TRIGGER_INTERVAL = "250 milliseconds"
#: How soon new source topics and partitions are noticed (Spark lists them at every trigger; this bounds the
#: client-side metadata cache of the consumers and admin it uses).
METADATA_MAX_AGE_MS = "3000"
#: Consumer settings for throughput (each Spark task reads one partition); `replication.consumer` overrides them.
SOURCE_CONSUMER_DEFAULTS = {"max.partition.fetch.bytes": "8388608", "fetch.max.bytes": "67108864"}
#: Producer settings for throughput; the flow's `replication.producer` overrides them. Idempotence and
#: acks=all are not overridable.
SINK_PRODUCER_DEFAULTS = {"linger.ms": "10", "batch.size": "262144"}
SINK_PRODUCER_FIXED = {"enable.idempotence": "true", "acks": "all", "interceptor.classes": INTERCEPTOR_CLASS}


#: Waits before restarting a failed query; after that many failures in a row (no batch completed between
#: them) the job exits failed and the next plan shows it not running.
RESTART_DELAYS = (2.0, 5.0, 15.0, 30.0, 60.0)
_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$", re.MULTILINE)


class StopRequested(Exception):
    """Raised by a batch that starts after SIGTERM: it writes nothing and is re-run on the next start."""


def source_options(flow: FlowSpec, source: Mapping[str, str], consumer: Mapping[str, str]) -> dict[str, str]:
    """Spark Kafka source options (the cluster's Java client properties are in `source`, secrets resolved)."""
    options = {f"kafka.{k}": v for k, v in source.items()}
    options.update({f"kafka.{k}": v for k, v in SOURCE_CONSUMER_DEFAULTS.items()})
    options.update({f"kafka.{k}": v for k, v in consumer.items()})
    options.update(
        {
            "subscribePattern": flow.subscribe_pattern(),
            "includeHeaders": "true",
            "kafka.isolation.level": "read_committed",
            "kafka.metadata.max.age.ms": METADATA_MAX_AGE_MS,
            "startingOffsets": flow.replication.start_from,
            # A replicator must not wedge on records that aged out or on a topic leaving the filter; the gap
            # shows up as an offset-sync at once (MM2 behaves the same).
            "failOnDataLoss": "false",
        }
    )
    return options


def sink_options(target: Mapping[str, str], producer: Mapping[str, str]) -> dict[str, str]:
    options = {f"kafka.{k}": v for k, v in target.items()}
    options.update({f"kafka.{k}": v for k, v in SINK_PRODUCER_DEFAULTS.items()})
    options.update({f"kafka.{k}": v for k, v in producer.items()})
    options.update({f"kafka.{k}": v for k, v in SINK_PRODUCER_FIXED.items()})
    return options


def sink_projection(flow: FlowSpec) -> list[str]:
    """The sink's columns as SQL expressions over the source's columns."""
    timestamp_header = (
        f"named_struct('key', '{TIMESTAMP_HEADER}', 'value', CAST(CAST(unix_millis(timestamp) AS STRING) AS BINARY))"
    )
    return [
        f"{flow.spark_remote_topic_expr('topic')} AS topic",
        "partition",
        "key",
        "value",
        f"CASE WHEN headers IS NULL THEN array({timestamp_header}) "
        f"ELSE concat(headers, array({timestamp_header})) END AS headers",
    ]


class ReplicationJob:
    def __init__(self, spec: JobSpec, checkpoint: Path, status_path: Path) -> None:
        self.spec = spec
        self.flow = spec.flow
        self.checkpoint = checkpoint
        self.status = StatusFile(status_path, flow=spec.flow_name, digest=spec.digest)
        self._stopping = threading.Event()
        self.batches = 0
        self.restarts = 0
        self._batches_at_restart = 0
        self.records = 0
        self.bytes = 0
        self.metrics = ReplicationMetrics(spec.flow.source, spec.flow.target)

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
        self.status.update(state="starting", pid=os.getpid())
        source_admin = KafkaAdmin(flow.source, self._client(flow.source))
        target_admin = KafkaAdmin(flow.target, self._client(flow.target))
        if flow.offsets.offset_syncs_location == "source":
            syncs_cluster, syncs_topic = flow.source, policy.offset_syncs_topic(flow.target)
        else:
            syncs_cluster, syncs_topic = flow.target, policy.offset_syncs_topic(flow.source)
        source_internal = [policy.heartbeats_topic()] if flow.heartbeats.enabled else []
        if syncs_cluster == flow.source:
            source_internal.append(syncs_topic)
        ensure_internal_topics(source_admin, source_internal)
        if syncs_cluster == flow.target:
            ensure_internal_topics(target_admin, [syncs_topic])

        self.topics = RemoteTopicKeeper(flow, source_admin, target_admin)
        self.topics.refresh()
        self.target_admin = target_admin
        self.source_admin = source_admin
        self.syncs = OffsetSyncPublisher(
            self._client(syncs_cluster),
            syncs_topic,
            offset_lag_max=flow.offsets.offset_lag_max,
            client_id=f"kmirror-{flow.name}-offset-syncs",
        )

        spark = self._spark_session()
        self._serve_metrics(spark)
        query = self._start_query(spark)
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
        checkpoints_stop = threading.Event()
        checkpoints = start_checkpointer_thread(
            flow, self._client(flow.source), self._client(flow.target), checkpoints_stop
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
        while error is not None and not self._stopping.is_set():
            # At least once: the failed batch was not committed, so the restarted query re-runs it.
            if self.batches > self._batches_at_restart:
                failures = 0  # it made progress since the last restart: a new run of failures
            if failures >= len(RESTART_DELAYS):
                break
            delay = RESTART_DELAYS[failures]
            failures += 1
            log.warning("query failed (%s); restarting it in %.0fs (attempt %d)", error, delay, failures)
            self.status.update(state="restarting", error=error, restarts=self.restarts)
            if self._stopping.wait(delay):
                error = None  # stopped on request while waiting; nothing was lost
                break
            self.restarts += 1
            self._batches_at_restart = self.batches
            query = self._start_query(spark)
            self.status.update(state="running", error=None, restarts=self.restarts)
            error = self._await(query)
        if heartbeats is not None:
            heartbeats.stop()
        checkpoints_stop.set()
        if checkpoints is not None:
            checkpoints.join(timeout=30)
        self.syncs.close()
        self._report(final=True)
        self.status.update(state="failed" if error else "stopped", error=error, stopped_at=time.time())
        spark.stop()
        return 1 if error else 0

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
            self.syncs.flush_delayed()
            if time.monotonic() - last_lag >= LAG_REFRESH_SECONDS:
                self._refresh_lag(query)
                last_lag = time.monotonic()
            if time.monotonic() - last_report >= 30:
                self._report()
                last_report = time.monotonic()
        if self._stopping.is_set():
            log.info("stop requested: finishing the batch in flight")
            while query.isActive and query.status.get("isTriggerActive"):
                time.sleep(0.1)
            query.stop()
        exc = query.exception()
        if exc is None or "StopRequested" in str(exc):
            return None
        log.error("query failed: %s", exc)
        return failure_summary(str(exc))

    def _serve_metrics(self, spark: Any) -> None:
        port = int(spark.conf.get(METRICS_PORT, "0"))
        if port < 0:
            return
        bound = serve(self.metrics, port, str(spark.conf.get(METRICS_ADDRESS, "0.0.0.0")))
        self.status.update(metrics_port=bound)
        log.info("metrics on http://0.0.0.0:%d/metrics", bound)

    def _refresh_lag(self, query: Any) -> None:
        """The query's committed positions and the source end offsets, for `kmirror_partition_lag`."""
        try:
            self.metrics.observe_positions(progress_positions(query.lastProgress))
            partitions = self.metrics.partitions()
            if partitions:
                self.metrics.observe_source_ends(self.source_admin.end_offsets(partitions))
        except Exception as exc:  # a metric must never stop replication
            log.debug("lag not refreshed: %s", exc)

    def _target_ends(self, partitions: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """End offsets of remote partitions; a partition just created may need a metadata refresh first."""
        for attempt in range(5):
            try:
                return self.target_admin.end_offsets(partitions)
            except Exception as exc:
                if attempt == 4:
                    raise
                log.info("target end offsets not readable yet (%s); refreshing metadata", exc)
                time.sleep(0.2 * 2**attempt)
                self.target_admin.topics()
        raise AssertionError("unreachable")

    def _report(self, *, final: bool = False) -> None:
        log.info(
            "%sbatches=%d records=%d bytes=%d offset-syncs=%d remote-topics-created=%d",
            "final: " if final else "",
            self.batches,
            self.records,
            self.bytes,
            self.syncs.emitted,
            len(self.topics.created),
        )

    # -- Spark ----------------------------------------------------------------------------------------------
    def _spark_session(self) -> Any:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName(f"kmirror-{self.flow.name}")
        # Settings holding references are resolved here rather than passed on spark-submit's command line.
        refs = {k: v for k, v in self.spec.spark.conf.items() if isinstance(v, SecretRef)}
        for key, value in self._resolved(refs).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        return spark

    def _start_query(self, spark: Any) -> Any:
        flow = self.flow
        conf = spark.conf
        source = source_options(flow, self._java(flow.source), self._resolved(flow.replication.consumer))
        source["maxOffsetsPerTrigger"] = str(conf.get(MAX_OFFSETS_PER_TRIGGER, str(DEFAULT_MAX_OFFSETS_PER_TRIGGER)))
        self._sink = sink_options(self._java(flow.target), self._resolved(flow.replication.producer))
        self._projection = sink_projection(flow)
        self._cache_batch = str(conf.get(CACHE_BATCH, "false")).lower() == "true"
        stream = spark.readStream.format("kafka").options(**source).load()
        return (
            stream.select("topic", "partition", "offset", "key", "value", "headers", "timestamp")
            .writeStream.queryName(f"kmirror-{flow.name}")
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(processingTime=conf.get(TRIGGER_INTERVAL, DEFAULT_TRIGGER_INTERVAL))
            .foreachBatch(self._batch)
            .start()
        )

    def _batch(self, df: Any, batch_id: int) -> None:
        if self._stopping.is_set():
            log.info(
                "batch %d began after the stop request: refused before writing; it re-runs on the next start "
                "(Spark logs the refusal as an error)",
                batch_id,
            )
            raise StopRequested(f"batch {batch_id} refused: the job is stopping")
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        started = time.monotonic()
        stride = sync_sample_stride(self.flow.offsets.offset_lag_max)
        if self._cache_batch:
            df.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
            ts = F.expr("unix_millis(timestamp)")
            stats = (
                df.groupBy("topic", "partition")
                .agg(
                    F.sort_array(F.collect_list("offset")).alias("offsets"),
                    F.sum(size).alias("bytes"),
                    F.min(ts).alias("ts_min"),
                    F.max(ts).alias("ts_max"),
                    F.sum(ts).alias("ts_sum"),
                )
                .selectExpr(
                    "topic",
                    "partition",
                    "bytes",
                    "ts_min",
                    "ts_max",
                    "ts_sum",
                    *batch_offsets_columns("offsets", stride),
                )
                .collect()
            )
            if not stats:
                return
            aggregated = time.monotonic()
            polled_ms = int(time.time() * 1000)
            touched: dict[str, int] = {}
            for row in stats:
                touched[row["topic"]] = max(touched.get(row["topic"], 0), row["partition"])
            self.topics.ensure(touched)
            ensured = time.monotonic()
            df.selectExpr(*self._projection).write.format("kafka").options(**self._sink).save()
            written = time.monotonic()
            written_ms = int(time.time() * 1000)
        finally:
            if self._cache_batch:
                df.unpersist()
        remote = {(r["topic"], r["partition"]): (self.flow.remote_topic(r["topic"]), r["partition"]) for r in stats}
        ends = self._target_ends(set(remote.values()))
        pairs = {
            (r["topic"], r["partition"]): landed_pairs(
                r["samples"], r["last"], r["n"], ends[remote[(r["topic"], r["partition"])]], stride
            )
            for r in stats
        }
        synced = self.syncs.observe(pairs)
        self.metrics.observe_batch(
            (
                PartitionBatch(
                    topic=r["topic"],
                    remote_topic=remote[(r["topic"], r["partition"])][0],
                    partition=r["partition"],
                    count=r["n"],
                    bytes=r["bytes"] or 0,
                    last_offset=r["last"],
                    ts_min=r["ts_min"],
                    ts_max=r["ts_max"],
                    ts_sum=r["ts_sum"],
                )
                for r in stats
            ),
            polled_ms,
            written_ms,
        )
        n = sum(r["n"] for r in stats)
        self.batches += 1
        self.records += n
        self.bytes += sum(r["bytes"] or 0 for r in stats)
        now = time.monotonic()
        elapsed = now - started
        phases = {
            "aggregate": round(aggregated - started, 3),
            "topics": round(ensured - aggregated, 3),
            "write": round(written - ensured, 3),
            "offset_syncs": round(now - written, 3),
        }
        log.log(
            logging.INFO if n >= 10_000 or elapsed >= 10 else logging.DEBUG,
            "batch %d: %d records, %d partitions, %d syncs, %.1fs %s",
            batch_id,
            n,
            len(stats),
            synced,
            elapsed,
            phases,
        )
        self.status.update(
            batches=self.batches,
            records=self.records,
            bytes=self.bytes,
            last_batch_id=batch_id,
            last_batch_at=time.time(),
            last_batch_seconds=round(elapsed, 3),
            last_batch_records=n,
            last_batch_phases=phases,
            offset_syncs=self.syncs.emitted,
        )


def failure_summary(text: str) -> str:
    """One line naming what failed: the innermost `SomeError: message` of a Spark/py4j/Python error text."""
    lines = [m for m in _ERROR_LINE.finditer(text) if not m.group(1).startswith(("py4j.", "org.apache.spark"))]
    if lines:
        return f"{lines[-1].group(1)}: {lines[-1].group(2)}"[:500]
    first = text.strip().splitlines()
    return (first[0] if first else "unknown failure")[:500]


def sync_sample_stride(offset_lag_max: int) -> int:
    """Every how many records of a batch an exact (source, target) offset pair is taken for the sync rule.

    MM2 sees every record and syncs once the lag reaches `offset_lag_max`; sampling every quarter of it keeps
    syncs at most 1.25 x `offset_lag_max` apart while moving only a few offsets per batch to the driver.
    """
    return max(1, offset_lag_max // 4)


def batch_offsets_columns(offsets: str, stride: int) -> list[str]:
    """SQL over a batch partition's sorted source offsets: record count, last offset, and every stride-th one."""
    return [
        f"size({offsets}) AS n",
        f"element_at({offsets}, -1) AS last",
        f"CASE WHEN size({offsets}) > {stride} "
        f"THEN transform(sequence({stride}, size({offsets}) - 1, {stride}), i -> element_at({offsets}, i)) "
        f"ELSE CAST(array() AS ARRAY<BIGINT>) END AS samples",
    ]


def landed_pairs(samples: Sequence[int], last: int, count: int, target_end: int, stride: int) -> list[tuple[int, int]]:
    """(source offset, target offset) of the sampled records and of the last one, in order.

    After the write the batch's `count` records of this partition are the last `count` records of the remote
    partition, in source order (kmirror is its only writer and writes without transactions; a retried task
    rewrites the whole range, so the last copy is complete), so the record at 1-based position i landed at
    `target_end - count + i - 1`.
    """
    start = target_end - count
    pairs = [(upstream, start + (j + 1) * stride - 1) for j, upstream in enumerate(samples)]
    pairs.append((last, target_end - 1))
    return pairs


class StatusFile:
    """`status.json` beside the spec: what the runner and `kmirror status` read. Written atomically."""

    def __init__(self, path: Path, **fixed: Any) -> None:
        self.path = path
        self._data: dict[str, Any] = {**fixed, "started_at": time.time()}
        self._lock = threading.RLock()  # re-entrant: the SIGTERM handler updates it on the main thread

    def update(self, **fields: Any) -> None:
        with self._lock:
            self._data.update(fields, updated_at=time.time())
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            tmp.write_text(json.dumps(self._data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            tmp.replace(self.path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kmirror-replication-job", description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, required=True, help="the job spec file the runner wrote")
    parser.add_argument("--digest", required=True, help="the flow's spec digest (checked against the file)")
    parser.add_argument("--checkpoint", type=Path, required=True, help="the Spark checkpoint folder of the flow")
    parser.add_argument("--status", type=Path, help="status file (default: status.json beside the spec)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    spec = JobSpec.read(args.spec)
    if spec.digest != args.digest:
        log.error("spec file %s has digest %s, the command line says %s", args.spec, spec.digest, args.digest)
        return 2
    job = ReplicationJob(spec, args.checkpoint, args.status or args.spec.with_name("status.json"))
    try:
        return job.run()
    except Exception as exc:
        job.status.update(state="failed", error=str(exc)[:2000], stopped_at=time.time())
        log.exception("the replication job of flow %s failed", spec.flow_name)
        return 1
