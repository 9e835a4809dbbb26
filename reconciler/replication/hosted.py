"""One flow's query inside a replication application (`spark.application: NAME`): the flow's `ReplicationJob`, run on
a thread of the application's driver, on the application's Spark session.

Everything per flow stays the flow's: its checkpoint (the path its own job would use, so a flow moving into or out of
an application resumes where it was), its status file (`status.json` in the flow's sub-folder), its metrics
endpoint (a free port of its own, written to its status.json: a fixed `spark.kmirror.metricsPort` cannot serve
several flows; -1 still turns the endpoints off),
its heartbeats, checkpoints and remote-topic keeper, the supervision of its query (a failed query is restarted
alone, `ReplicationJob.run`'s policy; a flow superseded by a newer generation stops for good, `superseded`). What
differs from a job of its own:

- the Spark session is the application's and outlives the query: the flow's end stops its query, its listener and
  its metrics endpoint, never the session;
- the stop request comes from the application (`stop()`), not from a signal;
- its real-time tasks are `spark.kmirror.realtimeTasks` (default 2) whatever the application's slots: every flow's
  query holds its tasks for as long as it runs, so one flow must not take every slot;
- its tasks fetch at most 8 MB per request, 1 MB per partition (`placement.APPLICATION_FETCH_BUDGET`), not a job's
  64 MB and 8 MB: each task's response costs the shared JVM its size in heap and again in a cached direct buffer;
- counts come from Spark's progress (the observed aggregate), not from the interceptors' JVM-wide counters, which
  sum every flow of the JVM (`ReplicationInterceptor.recordsAcknowledged`): in real-time mode a flow's records
  and bytes in `status.json` move at each checkpoint interval.

Must not: stop the Spark session, install signal handlers, or touch another flow's folder.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

from reconciler.jobcontract.spec import JobSpec
from reconciler.replication.job import ReplicationJob
from reconciler.replication.metrics import serve_closable
from reconciler.replication.settings import METRICS_ADDRESS, METRICS_PORT
from reconciler.spec.placement import Placement, choose_placement

log = logging.getLogger("kmirror.job")


class HostedFlow(ReplicationJob):
    """A flow's query on an application's Spark session; `run()` on a thread, `stop()` from the application."""

    def __init__(
        self,
        spec: JobSpec,
        checkpoint: str,
        status_path: Path,
        spark: Any,
        *,
        resume_from_syncs: bool = False,
        metrics_port: int = 0,
    ) -> None:
        super().__init__(spec, checkpoint, status_path, resume_from_syncs=resume_from_syncs)
        self._shared = spark
        self._metrics_port = metrics_port
        self._server: Any = None
        self._listener: Any = None
        #: The newer generation of the flow that superseded this run (it stopped for good); None: it was not.
        self.superseded: int | None = None

    def run(self) -> int:
        try:
            return super().run()
        finally:  # also when it failed before its query ran: its listener and endpoint go with it
            self._end_session(self._shared)

    def stop(self) -> None:
        """Ask the query to stop gracefully (the running batch finishes; real-time mode stops at its interval)."""
        self._on_signal(0, None)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def _stop_superseded(self, spark: Any, newer: int) -> int:
        self.superseded = newer  # the application starts it again only with its next deploy
        return super()._stop_superseded(spark, newer)

    # -- what differs from a job of its own --------------------------------------------------------------------
    def _spark_session(self, partitions: int) -> Any:
        return self._shared

    def _in_application(self) -> bool:
        return True  # smaller fetches: every flow's tasks share the driver JVM (placement.APPLICATION_FETCH_BUDGET)

    def _install_signals(self) -> None:
        pass  # the application's driver owns the signals and stops each flow

    def _end_session(self, spark: Any) -> None:
        listener, self._listener = self._listener, None
        server, self._server = self._server, None
        if listener is not None:
            with contextlib.suppress(Exception):
                spark.streams.removeListener(listener)
        if server is not None:
            with contextlib.suppress(Exception):
                server.shutdown()
                server.server_close()

    def _place(self, partitions: int, slots_now: int | None = None) -> Placement:
        spark = self.spec.spark
        # As if kmirror sized the slots: `realtimeTasks` (default 2) per flow, not one task per application slot.
        placement = choose_placement(
            deploy=spark.deploy, master=None, conf=dict(spark.conf), partitions=partitions, slots_now=slots_now
        )
        return Placement(placement.mode, placement.slots, placement.reason, tasks=placement.tasks)

    def _serve_metrics(self, spark: Any) -> None:
        if int(spark.conf.get(METRICS_PORT, "0")) < 0:
            return
        self._server = serve_closable(self.metrics, self._metrics_port, str(spark.conf.get(METRICS_ADDRESS, "0.0.0.0")))
        port = int(self._server.server_port)
        self.status.update(metrics_port=port)
        log.info("flow %s: metrics on http://0.0.0.0:%d/metrics", self.flow.name, port)

    def _on_progress(self, progress: Any) -> None:
        if progress.get("name") != f"kmirror-{self.flow.name}":
            return  # another flow's query: every listener of the session hears every query
        super()._on_progress(progress)

    # Counts from Spark's progress: the interceptors' JVM-wide counters hold every flow's records.
    def _acknowledged_metrics(self) -> bool:
        return False

    def _acknowledged(self) -> tuple[int, int] | None:
        return None

    def _offset_syncs_sent(self) -> int | None:
        return None

    def _unpaired(self) -> int | None:
        return None

    def _fenced_writers(self) -> int | None:
        return None
