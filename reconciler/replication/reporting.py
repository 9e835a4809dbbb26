"""How the replication job counts and reports: the metrics endpoint, the lag refresh, the live counts the JVM
classes keep between progress events, the status file's record on every change, the progress listener's batches.

Must not: start or stop a query (`query_start`, `ReplicationJob`), or write a resolved secret anywhere.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from reconciler.jobcontract.spec import JobSpec
from reconciler.kafka_clients.admin import KafkaAdmin
from reconciler.replication.metrics import ReplicationMetrics, progress_positions, serve
from reconciler.replication.progress import BatchProgress, batch_from_progress
from reconciler.replication.settings import (
    METRICS_ADDRESS,
    METRICS_PORT,
)
from reconciler.replication.supervision import (
    StatusFile,
)
from reconciler.spec.models import FlowSpec
from reconciler.spec.placement import (
    Placement,
)

log = logging.getLogger("kmirror.job")


class JobState:
    """The attributes a replication job's parts share (set by `ReplicationJob.__init__` and `run`)."""

    spec: JobSpec
    flow: FlowSpec
    checkpoint: str
    resume_from_syncs: bool
    status: StatusFile
    metrics: ReplicationMetrics
    mode: str
    slots: int | None
    placement: Placement | None
    batches: int
    restarts: int
    records: int
    bytes: int
    topics: Any
    source_admin: KafkaAdmin
    _warned: set[str]
    _starting_offsets: str | None
    _first_start: datetime | None
    _stopping: threading.Event
    _progress_lock: threading.Lock
    _batches_at_restart: int
    _spark: Any
    _interceptor: Any
    _sink: Any
    _syncs: Any


class JobReporting(JobState):
    """The job's counting and reporting (a part of `ReplicationJob`)."""

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
