"""A replication application: one Spark driver hosting the streaming queries of several flows
(`spark.application: NAME`), each started, restarted and stopped on its own.

Started by the local runner as `spark-submit ... reconciler/replication/application_entry.py --folder APP_FOLDER`.
The application's folder (`jobcontract.layout.ApplicationFolder`) holds a sub-folder per flow, written by the
runner: `spec.json` (the flow's effective spec) and `request.json` (`FlowRequest`: the digest to run, the
checkpoint, whether to resume from the offset-syncs); a `stop.request` there asks for that flow's query to stop.
The driver reads the folder every `POLL_SECONDS` and reconciles (`reconcile`): a flow whose request appeared is
started, one whose digest changed is stopped gracefully and started again with its new spec, one whose stop
request appeared (or whose request is gone) is stopped. A request for another application digest (`--digest`: the
flow's spec runs with other Spark settings or jars, and its own deploy brings it here) waits: the flow is started
once, with its new spec, not on its old one and again at its deploy. Each flow's query runs on a thread of its own
(`hosted.HostedFlow`: its checkpoint, its status.json, its metrics, its supervision), so a change to one flow
never pauses another. A flow whose thread ends by itself (e.g. its clusters unreachable at start) is started again
after the job's restart backoff, except an exactly-once flow superseded by a newer generation of it: that one stops
for good, as a job of its own does, until a deploy brings it a new spec (and generation).

The application's own `status.json` (state, pid, app id, the flows it runs) is the runner's sign of life.
SIGTERM (or SIGINT) stops every flow gracefully, at once, then the session; the process exits 0. With no flow
left to run, the application stops by itself (the runner starts it again for the next flow). A driver JVM that dies
(kill -9, the OOM killer) leaves this Python to another parent: it says so in its status (and in the status of each
flow whose query saw it first) and exits at once; nothing restarts it but the next `kmirror apply`.

Must not: decide which flows run in it (the runner writes the requests; the planner decides), or write a resolved
secret anywhere.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.jobcontract.application import ApplicationFolder, FlowRequest
from reconciler.jobcontract.spec import JobSpec
from reconciler.replication.hosted import HostedFlow
from reconciler.replication.query_start import spark_session
from reconciler.replication.settings import restart_delays
from reconciler.replication.supervision import StatusFile
from reconciler.spec.defaults import RESTART_BACKOFF_MAX_SETTING
from reconciler.spec.placement import Placement
from reconciler.spec.redaction import ScrubbingStream, scrubbing_log_filter
from reconciler.spec.redaction import learn as learn_secrets

log = logging.getLogger("kmirror.application")

POLL_SECONDS = 1.0
#: Task slots of an application whose file names no `spark.master`: each flow's real-time query holds
#: `spark.kmirror.realtimeTasks` (default 2) of them while it runs; idle local slots cost nothing.
APPLICATION_LOCAL_SLOTS = 64


@dataclass(frozen=True)
class Reconciliation:
    """What the driver does next: flows to stop (gracefully), and flows to start."""

    stop: tuple[str, ...]
    start: tuple[str, ...]


def reconcile(running: Mapping[str, str], stopping: set[str], wanted: Mapping[str, str]) -> Reconciliation:
    """From the digests of the flows running (`running`, those already stopping in `stopping`) and of the flows
    requested (`wanted`): stop a flow no longer wanted or wanted with another digest; start a wanted flow that does
    not run (a flow still stopping starts once its query ended: two queries never share a checkpoint). Pure."""
    stop = tuple(sorted(f for f, d in running.items() if f not in stopping and (f not in wanted or wanted[f] != d)))
    start = tuple(sorted(f for f in wanted if f not in running))
    return Reconciliation(stop, start)


class _Running:
    """A flow's query on its thread."""

    def __init__(self, flow: HostedFlow, digest: str, jvm_gone: Callable[[], str | None]) -> None:
        self.flow = flow
        self.digest = digest
        self.code: int | None = None
        self._jvm_gone = jvm_gone
        self.thread = threading.Thread(target=self._run, name=f"kmirror-flow-{flow.flow.name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.code = self.flow.run()
        except Exception as exc:
            gone = self._jvm_gone()  # every call into the JVM fails once it died: say that, not py4j's words
            self.flow.status.update(state="failed", error=gone or str(exc)[:2000], stopped_at=time.time())
            if gone:
                log.error("flow %s: %s", self.flow.flow.name, gone)
            else:
                log.exception("flow %s failed", self.flow.flow.name)
            self.code = 1


class ApplicationDriver:
    """The driver loop of one application; see the module docstring."""

    def __init__(self, folder: ApplicationFolder, digest: str | None = None) -> None:
        self.folder = folder
        self.digest = digest
        self._held: dict[str, str | None] = {}
        self.status = StatusFile(folder.status, application=folder.name)
        self._stopping = threading.Event()
        self._running: dict[str, _Running] = {}
        self._failures: dict[str, int] = {}
        self._retry_at: dict[str, float] = {}
        #: Flows that stopped for good (a newer generation of the flow writes its partitions), with the generation
        #: they ran: started again only when a deploy brings another (their next `kmirror apply`).
        self._superseded: dict[str, int] = {}
        self._spark: Any = None
        #: The driver JVM, which started this Python (spark-submit's PythonRunner): it is our parent while it lives.
        self._jvm = os.getppid()

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        self.status.update(state="starting", pid=os.getpid(), host=socket.gethostname(), flows=[])
        hosted_any = False
        while not self._stopping.is_set():
            gone = self.jvm_gone()
            if gone:  # killed (-9, the OOM killer): nothing runs any more; the runner's next apply starts a new one
                log.error("application %s: %s", self.folder.name, gone)
                self.status.update(state="failed", error=gone, flows=[], stopped_at=time.time())
                return 1
            wanted = self._wanted(self.folder.requests())
            self._step(wanted)
            hosted_any = hosted_any or bool(self._running)
            if hosted_any and not wanted and not self._running:
                log.info("application %s: no flow left to run; stopping", self.folder.name)
                break
            self._stopping.wait(POLL_SECONDS)
        for running in self._running.values():
            running.flow.stop()
        for running in self._running.values():
            running.thread.join()
        self.status.update(state="stopped", flows=[], stopped_at=time.time())
        if self._spark is not None:
            self._spark.stop()
        return 0

    def jvm_gone(self) -> str | None:
        """Why the driver cannot go on when its JVM died (this Python was handed to another parent); else None."""
        if os.getppid() == self._jvm:
            return None
        return f"the application's driver JVM (pid {self._jvm}) exited; `kmirror apply` starts the application again"

    def _wanted(self, requests: Mapping[str, FlowRequest]) -> dict[str, FlowRequest]:
        """The requests this driver runs: those for its Spark settings and jars (`FlowRequest.runs_in`). A flow
        asked of another driver waits for its own deploy (the runner rewrites its request with this driver's)."""
        wanted = {name: r for name, r in requests.items() if r.runs_in(self.digest)}
        for name, request in requests.items():
            if name not in wanted and self._held.get(name) != request.application_digest:
                log.info(
                    "application %s: flow %s waits for its deploy (its request is for application %s, this driver "
                    "runs %s)", self.folder.name, name, request.application_digest, self.digest,
                )  # fmt: skip
        self._held = {n: r.application_digest for n, r in requests.items() if n not in wanted}
        return wanted

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._stopping.set()
        self.status.update(state="stopping")

    def _step(self, wanted: Mapping[str, FlowRequest]) -> None:
        for name, running in list(self._running.items()):
            if not running.thread.is_alive():
                del self._running[name]
                if running.flow.superseded is not None:  # for good, as a job of its own exits: not retried
                    self._superseded[name] = running.flow.spec.generation
                    log.info(
                        "application %s: flow %s stopped for good (generation %d of the flow writes its "
                        "partitions); its next deploy starts it again", self.folder.name, name,
                        running.flow.superseded,
                    )  # fmt: skip
                elif not running.flow.stopping:  # it ended by itself: start it again after the backoff
                    self._failed(name)
        digests = {name: r.digest for name, r in self._running.items()}
        stopping = {name for name, r in self._running.items() if r.flow.stopping}
        todo = reconcile(digests, stopping, {n: r.digest for n, r in wanted.items()})
        for name in todo.stop:
            log.info("application %s: stopping flow %s", self.folder.name, name)
            self._running[name].flow.stop()
        for name in todo.start:
            if time.monotonic() < self._retry_at.get(name, 0.0) or self._held_superseded(wanted[name]):
                continue
            try:
                self._start(wanted[name])
            except Exception as exc:  # a spec the job cannot read: said in the flow's status, retried later
                log.error("application %s: flow %s not started: %s", self.folder.name, name, exc)
                StatusFile(wanted[name].folder.status, flow=name, digest=wanted[name].digest).update(
                    state="failed", error=str(exc)[:2000], stopped_at=time.time()
                )
                self._failed(name)
        self.status.update(
            state="running" if self._spark is not None else "starting",
            flows=sorted(self._running),
            **({"app_id": self._spark.sparkContext.applicationId} if self._spark is not None else {}),
        )

    def _held_superseded(self, request: FlowRequest) -> bool:
        """Whether the flow stopped for good and no deploy came since (its spec still has the generation it ran)."""
        ran = self._superseded.get(request.flow)
        if ran is None:
            return False
        try:
            if JobSpec.read(request.folder.spec).generation == ran:
                return True
        except Exception:  # unreadable: `_start` says why in the flow's status
            pass
        del self._superseded[request.flow]
        return False

    def _failed(self, name: str) -> None:
        failures = self._failures.get(name, 0)
        backoff = self._spark.conf.get(RESTART_BACKOFF_MAX_SETTING, None) if self._spark is not None else None
        delays = restart_delays(backoff)
        self._retry_at[name] = time.monotonic() + delays[min(failures, len(delays) - 1)]
        self._failures[name] = failures + 1

    def _start(self, request: FlowRequest) -> None:
        spec = JobSpec.read(request.folder.spec)
        if spec.digest != request.digest:
            raise ValueError(f"{request.folder.spec} has digest {spec.digest}, its request says {request.digest}")
        learn_secrets(spec.effective, base_dir=spec.base_dir)
        if self._spark is None:
            self._spark = self._session(spec)
        log.info("application %s: starting flow %s with %s", self.folder.name, request.flow, request.digest)
        flow = HostedFlow(
            spec, request.checkpoint, request.folder.status, self._spark, resume_from_syncs=request.resume_from_syncs
        )
        self._running[request.flow] = _Running(flow, request.digest, self.jvm_gone)

    def _session(self, spec: JobSpec) -> Any:
        """The application's Spark session, with the Spark settings of the first flow's spec (every flow of an
        application has the same: a change to them redeploys the whole application)."""
        master = None if spec.spark.master else f"local[{APPLICATION_LOCAL_SLOTS}]"
        placement = Placement("realtime", APPLICATION_LOCAL_SLOTS, "application", master=master)
        return spark_session(spec, placement, APPLICATION_LOCAL_SLOTS, f"kmirror-app-{self.folder.name}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kmirror-replication-application", description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True, help="the application's folder the runner writes")
    parser.add_argument(
        "--digest", help="the application's digest (Spark settings and jars): only flows requested for it run here"
    )
    args = parser.parse_args(argv)
    sys.stdout, sys.stderr = ScrubbingStream(sys.stdout), ScrubbingStream(sys.stderr)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(scrubbing_log_filter())
    logging.getLogger("py4j").setLevel(logging.WARNING)  # a line per callback of every flow's listener otherwise
    driver = ApplicationDriver(ApplicationFolder(args.folder), args.digest)
    try:
        code = driver.run()
    except Exception as exc:
        gone = driver.jvm_gone()
        driver.status.update(state="failed", error=gone or str(exc)[:2000], stopped_at=time.time())
        if not gone:
            log.exception("the replication application %s failed", args.folder.name)
        code = 1
    if driver.jvm_gone():  # no JVM to stop the session in: exit now, not through pyspark's and py4j's exit hooks
        logging.shutdown()
        os._exit(code)
    return code
