"""How the replication job starts its query: the clients (secrets resolved in memory only), the Spark session
sized for the placement, warmed clients and confirmed leaders before the first record, the progress listener, the
at-least-once query (Kafka source, projection, the sink with its interceptor) and the exactly-once one
(`exactly_once`: transactional lanes, fenced on start).

Must not: decide when to restart or stop (`ReplicationJob.run` does), or write a resolved secret anywhere.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from reconciler.jobcontract.spec import JobSpec
from reconciler.replication import exactly_once
from reconciler.replication.progress import OBSERVATION, observed_columns
from reconciler.replication.query import sink_options, sink_projection, source_options
from reconciler.replication.reporting import JobReporting
from reconciler.replication.settings import (
    CHECKPOINT_FILE_MANAGER,
    CONSUMER_CACHE,
    DEFAULT_MAX_OFFSETS_PER_TRIGGER,
    DEFAULT_REALTIME_INTERVAL,
    DEFAULT_TRIGGER_INTERVAL,
    GROUPED_SOURCE,
    LOCAL_CHECKPOINT_FILE_MANAGER,
    MAX_OFFSETS_PER_TRIGGER,
    SOURCE_CONSUMER_DEFAULTS,
    TRIGGER_INTERVAL,
    JobSettingError,
)
from reconciler.replication.supervision import (
    StopRequested,
    Superseded,
)
from reconciler.spec.client_config import java_client_properties, kafka_client_config
from reconciler.spec.fetch_sizing import throttled_fetch_sizes
from reconciler.spec.intervals import trigger_interval
from reconciler.spec.placement import (
    Placement,
    realtime_client_sizing,
)
from reconciler.spec.secrets import SecretRef

log = logging.getLogger("kmirror.job")


def _expr(sql: str) -> Any:
    from pyspark.sql import functions as F

    return F.expr(sql)


def spark_session(spec: JobSpec, placement: Placement | None, partitions: int, name: str) -> Any:
    """The Spark session of a job (or an application of several flows' queries) with `spec`'s Spark settings."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(name)
    # Kafka options carry credentials and TLS key material; Spark shows options in plans and the UI.
    builder = builder.config("spark.sql.redaction.options.regex", "(?i)url|password|secret|token|jaas|key|cert")
    # Settings holding references are resolved here rather than passed on spark-submit's command line.
    for key, value in spec.spark.conf.items():
        if isinstance(value, SecretRef):
            builder = builder.config(key, str(value.resolve(spec.base_dir)))
    # Sized by kmirror when the file leaves it open (reconciler.spec.placement): a slot per partition.
    if placement is not None and placement.master is not None:
        builder = builder.config("spark.master", placement.master)
    if placement is not None and placement.cores_max is not None:
        builder = builder.config("spark.cores.max", str(placement.cores_max))
    if placement is not None and placement.mode == "realtime" and CONSUMER_CACHE not in spec.spark.conf:
        sizing = realtime_client_sizing(partitions, placement.slots)
        builder = builder.config(CONSUMER_CACHE, str(sizing.consumer_cache))
    if CHECKPOINT_FILE_MANAGER not in spec.spark.conf:
        builder = builder.config(CHECKPOINT_FILE_MANAGER, LOCAL_CHECKPOINT_FILE_MANAGER)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


class QueryStart(JobReporting):
    """Starting the job's query (a part of `ReplicationJob`)."""

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

    def _in_application(self) -> bool:
        """Whether the query shares its driver with other flows' queries (`hosted.HostedFlow`): its clients are sized
        for that (`realtime_client_sizing`)."""
        return False

    def _interval(self) -> str:
        """`triggerInterval` as Spark's interval text: the micro-batch trigger, or real-time mode's checkpoint
        interval (each mode has its own default)."""
        default = DEFAULT_REALTIME_INTERVAL if self.mode == "realtime" else DEFAULT_TRIGGER_INTERVAL
        return trigger_interval(str(self._spark.conf.get(TRIGGER_INTERVAL, default)))

    # -- Spark ----------------------------------------------------------------------------------------------
    def _spark_session(self, partitions: int) -> Any:
        return spark_session(self.spec, self.placement, partitions, f"kmirror-{self.flow.name}")

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

        self._listener = Listener()
        spark.streams.addListener(self._listener)

    def _start_query(self, spark: Any) -> Any:
        flow = self.flow
        conf = spark.conf
        self._confirm_leaders_ahead(spark)
        consumer, producer = self._resolved(flow.replication.consumer), self._resolved(flow.replication.producer)
        sized: dict[str, str] = dict(SOURCE_CONSUMER_DEFAULTS)
        consumers = self.slots or 1  # micro-batch: a consumer per running task
        if self.mode == "realtime":  # a consumer per task, a batch per partition: sized by what each holds
            tasks = self.placement.tasks if self.placement is not None else None
            sizing = realtime_client_sizing(
                self.topics.replicated_partitions(), self.slots, tasks, in_application=self._in_application()
            )
            sized, producer = {**sized, **sizing.consumer}, {**sizing.producer, **producer}
            consumers = tasks or consumers
        throttle = self.spec.effective.throttle
        if throttle is not None:  # fetches of a fraction of a second of quota, so that the quota paces them
            sized.update(throttled_fetch_sizes(throttle, consumers, sized))
        consumer = {**sized, **consumer}
        # A throttled flow's clients take the ids its quotas name (`policy.client_ids`); others keep Kafka's own.
        client_ids = self.spec.effective.client_ids or {}
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
