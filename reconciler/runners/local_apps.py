"""The local runner's applications (`spark.application: NAME`): several flows' queries in one detached
`spark-submit` on this machine (`reconciler/replication/application.py`), instead of one per flow.

The application's folder (`jobcontract.application.ApplicationFolder`, `<jobs dir>/_apps/<NAME>/`) holds a
sub-folder per flow. Deploying a flow writes its spec and its request (digest, checkpoint) there, then starts the
application if it does not run; a running one sees the request within a second and starts the flow's query, or
restarts it gracefully when its digest changed, while its other flows' queries run on untouched. Stopping a flow
leaves a stop request in its sub-folder: only its query stops (the last one's stop ends the application). Each
flow keeps the checkpoint its own job would have (`checkpoint_for`), so a flow moving into or out of an
application resumes where it was.

An application's own digest covers its Spark settings and jars (`application_digest`): a deploy that brings other
ones stops the whole application gracefully (every flow's running batch finishes) and starts it again with them;
its flows resume from their checkpoints. Each flow's request names the application digest its spec runs with, and
the driver (started with `--digest`) runs only those: a flow whose new spec comes with a later deploy of the same
apply waits for it, so one apply starts each flow's query once.

A flow's deployment record (`LocalDeployment` with `application`) names the application, its pid and the flow's
sub-folder, in the state topic and in the sub-folder's `runner.json`, so any checkout on this host finds it.

Must not: decide which flows run (the planner does), or stop another flow's query.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.artifacts import filesystem_jars, job_jars
from reconciler.jobcontract.application import ApplicationFolder, FlowRequest, application_folder, request_path
from reconciler.jobcontract.job_report import LIVE_STATES, read_report
from reconciler.jobcontract.layout import CheckpointRoot
from reconciler.jobcontract.spec import EffectiveSpec, JobSpec
from reconciler.resources.deployments import Deployment, LocalDeployment, deployment_of, mark_stopped
from reconciler.runners.common import (
    HOST,
    JobRunnerError,
    checkpoint_for,
    checkpoint_missing,
    now,
    read_json,
    tail,
    write_json,
    write_private,
)
from reconciler.runners.local_submit import submit
from reconciler.runners.processes import alive
from reconciler.spec.digest import digest_of

if TYPE_CHECKING:
    from reconciler.runners.local import LocalRunner

ENTRY = Path(__file__).parents[1] / "replication" / "application_entry.py"


def application_jars(spec: EffectiveSpec) -> list[Path]:
    """The jars of an application: the job's, and what its checkpoint root's filesystem needs (S3A for `s3a://`)."""
    return [*job_jars(), *filesystem_jars(spec.spark.checkpoint_root)]


def application_digest(spec: EffectiveSpec) -> str:
    """What the whole application runs with: the Spark settings (the application's name aside) and the jars."""
    spark = spec.spark.model_dump(mode="json")
    spark.pop("application", None)
    return digest_of({"spark": spark, "jars": sorted(p.name for p in application_jars(spec))})


def application_of(record: Deployment | None) -> str | None:
    """The application a recorded deployment runs in (None: a job of its own, or none)."""
    return record.application if isinstance(record, LocalDeployment) else None


def wait_query_stopped(
    app: ApplicationFolder, flow: str, running: Callable[[], bool], timeout: float, poll: float
) -> None:
    """Wait while the application runs (`running`) until `flow`'s query has stopped: its status no longer live and
    the application no longer lists it; `JobRunnerError` after `timeout` seconds."""
    folder = app.flow(flow)
    deadline = time.monotonic() + timeout
    while running():
        hosted = read_json(app.status).get("flows")
        state = read_report(folder.status).get("state")
        if state not in LIVE_STATES and not (isinstance(hosted, list) and flow in hosted):
            return
        if time.monotonic() >= deadline:
            raise JobRunnerError(
                f"flow {flow}'s query in application {app.name} did not stop within {timeout:.0f}s; see {app.log}"
            )
        time.sleep(poll)


def restamp(app: ApplicationFolder, app_digest: str, flow: str) -> None:
    """Before the application starts with `app_digest` (for `flow`'s deploy): the other flows whose spec runs with
    the same Spark settings and jars (e.g. only the jars changed) are asked of the new driver; the others (their
    settings differ: their own deploy in this apply brings the new spec) wait for it, so the new driver starts each
    flow once, with its new spec, instead of starting it on the old one and restarting it at its deploy."""
    for name, request in app.requests().items():
        if name == flow or request.application_digest in (None, app_digest):
            continue
        try:
            runs_here = application_digest(JobSpec.read(request.folder.spec).effective) == app_digest
        except Exception:  # a spec this version cannot read: its own deploy rewrites it
            runs_here = False
        if runs_here:
            dataclasses.replace(request, application_digest=app_digest).write()


@dataclass(frozen=True)
class AppProcess:
    """An application's driver process as its folder records it."""

    pid: int | None
    digest: str | None
    running: bool


class LocalApplications:
    """Deploy, stop and report flows that run in applications; see the module docstring."""

    def __init__(self, runner: LocalRunner) -> None:
        self.runner = runner

    def folder(self, application: str) -> ApplicationFolder:
        return application_folder(self.runner.jobs_dir, application)

    def process(self, app: ApplicationFolder) -> AppProcess:
        record = read_json(app.runner)
        pid = record.get("pid")
        digest = record.get("digest")
        ours = isinstance(pid, int) and record.get("host") == HOST and self.runner._is_our_job(pid, app.path)
        return AppProcess(
            pid if isinstance(pid, int) else None, digest if isinstance(digest, str) else None, bool(ours)
        )

    # -- deploy -----------------------------------------------------------------------------------------------
    def deploy(self, flow: str, spec: EffectiveSpec, spec_digest: str, previous: Deployment | None) -> LocalDeployment:
        application = spec.spark.application
        assert application is not None
        runner = self.runner
        app = self.folder(application)
        folder = app.flow(flow)
        job_spec = JobSpec.for_deploy(flow, spec, spec_digest, runner.base_dir, runner.state_topic, previous)
        root = CheckpointRoot.parse(job_spec.spark.checkpoint_root, runner.base_dir)
        checkpoint = checkpoint_for(flow, root, runner.state_key, previous)
        if "://" not in checkpoint:
            Path(checkpoint).parent.mkdir(parents=True, exist_ok=True)
        app_digest = application_digest(spec)
        process = self.process(app)
        if process.running and process.digest != app_digest:
            self._stop_application(app, process, f"its Spark settings or jars changed (flow {flow} brings them)")
            process = self.process(app)
        if not process.running:
            self._restamp(app, app_digest, flow)
        folder.path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            folder.stop.unlink()
        job_spec.write(folder.spec)
        resume = checkpoint_missing(checkpoint, previous) is not False
        FlowRequest(flow, folder, spec_digest, checkpoint, resume, app_digest).write()
        pid = process.pid if process.running else self._start_application(app, spec, app_digest, flow)
        record = LocalDeployment(
            flow=flow,
            host=HOST,
            pid=pid,
            digest=spec_digest,
            folder=str(folder.path),
            checkpoint=checkpoint,
            eos_flow=job_spec.eos_name,
            generation=job_spec.generation,
            started_at=time.time(),
            application=application,
        )
        write_json(folder.runner, record.model_dump(mode="json"))
        runner.deployments[flow] = record
        self._wait_running(app, flow, spec, spec_digest, app_digest)
        return record

    def _restamp(self, app: ApplicationFolder, app_digest: str, flow: str) -> None:
        restamp(app, app_digest, flow)  # shared with the standalone runner's applications

    def _start_application(self, app: ApplicationFolder, spec: EffectiveSpec, app_digest: str, flow: str) -> int:
        runner = self.runner
        app.path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            app.status.unlink()
        proc = submit(
            app.path,
            spec.spark,
            f"kmirror-app-{app.name}",
            application_jars(spec),
            [str(ENTRY), "--folder", str(app.path), "--digest", app_digest],
            f"starting application {app.name} for flow {flow} at {now()}",
            runner.python,
        )
        runner._children[proc.pid] = proc
        write_json(
            app.runner,
            {"runner": "local", "application": app.name, "host": HOST, "pid": proc.pid, "digest": app_digest,
             "started_at": time.time()},
        )  # fmt: skip
        return proc.pid

    def _wait_running(
        self, app: ApplicationFolder, flow: str, spec: EffectiveSpec, spec_digest: str, app_digest: str
    ) -> None:
        """Until the flow's query reports running with `spec_digest`, in the driver that runs now (a status the driver
        before wrote does not count: after that one died, e.g. killed -9, its flows' status files still say running).
        An application that ended meanwhile (its last flow had just stopped) is started again, once."""
        folder = app.flow(flow)
        deadline = time.monotonic() + self.runner.start_timeout
        restarted = False
        while time.monotonic() < deadline:
            report = read_report(folder.status)
            driver = read_report(app.status).get("pid")
            if (
                report.get("state") == "running"
                and report.get("digest") == spec_digest
                and isinstance(driver, int)
                and report.get("pid") == driver
            ):
                return
            if not self.process(app).running:
                if restarted:
                    why = report.get("error") or read_report(app.status).get("error") or "it exited"
                    raise JobRunnerError(
                        f"the replication application {app.name} exited while starting flow {flow} ({why}). "
                        f"Last lines of {app.log}:\n{tail(app.log)}"
                    )
                restarted = True
                pid = self._start_application(app, spec, app_digest, flow)
                record = deployment_of(read_json(folder.runner))
                if isinstance(record, LocalDeployment):
                    record = record.model_copy(update={"pid": pid})
                    write_json(folder.runner, record.model_dump(mode="json"))
                    self.runner.deployments[flow] = record
            time.sleep(0.25)
        raise JobRunnerError(
            f"flow {flow} did not report running in application {app.name} within "
            f"{self.runner.start_timeout:.0f}s; see {app.log}."
        )

    # -- stop -------------------------------------------------------------------------------------------------
    def stop(self, flow: str, record: LocalDeployment) -> None:
        """Stop only the flow's query (gracefully: a stop request the application honours); the others run on."""
        application = record.application
        assert application is not None
        app = ApplicationFolder(Path(record.folder).parent) if record.folder else self.folder(application)
        folder = app.flow(flow)
        if folder.path.is_dir():
            write_private(folder.stop, f"stop requested at {now()}\n")
        wait_query_stopped(app, flow, lambda: self.process(app).running, self.runner.stop_timeout, poll=0.25)
        written = read_json(folder.runner)
        if written:
            write_json(folder.runner, mark_stopped(deployment_of(written), time.time()).model_dump(mode="json"))

    def _stop_application(self, app: ApplicationFolder, process: AppProcess, why: str) -> None:
        """Stop the whole application gracefully (every flow's running batch finishes); kill it after the timeout."""
        assert process.pid is not None
        driver = read_report(app.status).get("pid")
        target = driver if isinstance(driver, int) and alive(driver) else process.pid
        with contextlib.suppress(FileNotFoundError), app.log.open("ab") as out:
            out.write(f"===== kmirror: stopping application {app.name}: {why} at {now()} =====\n".encode())
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGTERM)
        if not self.runner._wait_exit(process.pid, self.runner.stop_timeout):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            self.runner._wait_exit(process.pid, 15)

    def forget(self, flow: str, record: LocalDeployment) -> None:
        """The flow left the file: its request goes (its checkpoint and runner record go with `forget_job`)."""
        if record.folder:
            with contextlib.suppress(FileNotFoundError):
                request_path(ApplicationFolder(Path(record.folder).parent).flow(flow)).unlink()

    # -- status -----------------------------------------------------------------------------------------------
    def flows(self) -> set[str]:
        """Flows with a runner record in any application folder of this state topic on this host."""
        base = self.runner.jobs_dir / "_apps"
        if not base.is_dir():
            return set()
        return {p.parent.name for p in base.glob("*/*/runner.json")}

    def written(self, flow: str) -> LocalDeployment | None:
        """The newest record of `flow` in this host's application folders."""
        base = self.runner.jobs_dir / "_apps"
        found: list[LocalDeployment] = []
        if base.is_dir():
            for path in base.glob(f"*/{flow}/runner.json"):
                data = read_json(path)
                record = deployment_of(data) if data else None
                if isinstance(record, LocalDeployment):
                    found.append(record)
        return max(found, key=lambda r: r.started_at or 0.0) if found else None

    def running(self, flow: str, record: LocalDeployment) -> tuple[bool, Path]:
        """Whether the flow's query runs (its application does and was not asked to stop it), and its log."""
        app = ApplicationFolder(Path(record.folder).parent) if record.folder else self.folder(str(record.application))
        folder = app.flow(flow)
        live = self.process(app).running and FlowRequest.read(folder) is not None
        state = read_report(folder.status).get("state")
        return live and state != "stopped", app.log
