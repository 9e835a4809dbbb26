"""The standalone runner's applications (`spark.application: NAME` with `spark.deploy: standalone`): several flows'
queries in one supervised driver on a Spark standalone cluster, instead of a driver per flow.

The application's folder (`jobcontract.application.ApplicationFolder`) sits beside its flows' own job folders:
`<checkpoint_root or job_folder_root>/<state key>/_apps/<NAME>/`, on the path the workers and every machine running
kmirror share, or on HDFS (then kmirror works on this host's copy, `RemoteCopy`, pulled and pushed through WebHDFS,
and the driver on a copy in its working folder that `replication/app_mirror.py` keeps in step). It holds a
sub-folder per flow (spec.json, request.json, status.json, stop.request, runner.json), the application's
runner.json (submission id, REST URL, the application's digest), status.json and driver.log. Its driver is submitted
through the master's REST server as a flow's job is (`StandaloneRunner.submission`: the shipped environment, entry
file and jars; a worker needs no kmirror), running `standalone_entry.py --kmirror-application`, which runs
`reconciler.replication.application` on that folder (or its copy), as the local runner's application does on this
host's folder: it reads the requests every second and starts, restarts and stops each flow's query alone.

Deploying a flow writes its spec and request, then submits the application's driver if the master runs none for
it; a driver that runs with other Spark settings or jars (`application_digest`) is stopped gracefully first (a
`stop.request` in the application's folder: the entry sends its Python SIGTERM, every flow's batch finishes, the
driver exits 0 and the master does not launch it again). Stopping a flow leaves a stop request in its sub-folder:
only its query stops; the last one's stop ends the application (FINISHED). Whether the application runs comes from
the master (`GET /v1/submissions/status/<id>`); a driver that dies is launched again by the master (supervised), and
the new driver starts every requested flow from its checkpoint.

A flow's deployment record (`StandaloneDeployment` with `application`) names the application, its driver's
submission id and the flow's sub-folder, in the state topic and in the sub-folder's `runner.json`, so any checkout
that reaches the master and the shared path sees the same application.

Must not: decide which flows run (the planner does), or stop another flow's query.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.jobcontract.application import (
    APPLICATIONS,
    ApplicationFolder,
    FlowRequest,
    application_folder,
    request_path,
)
from reconciler.jobcontract.job_report import read_report
from reconciler.jobcontract.layout import CheckpointRoot, JobFolder, local_job_folder, yarn_folder
from reconciler.jobcontract.spec import EffectiveSpec, JobSpec
from reconciler.resources.deployments import Deployment, StandaloneDeployment, deployment_of, mark_stopped
from reconciler.runners.common import (
    JobRunnerError,
    checkpoint_for,
    checkpoint_missing,
    forget_job,
    log4j2_properties,
    now,
    read_json,
    tail,
    write_json,
    write_private,
)
from reconciler.runners.hadoop import HadoopClient
from reconciler.runners.local_apps import application_digest, restamp, wait_query_stopped
from reconciler.runners.rest import DriverStatus, RestClient

if TYPE_CHECKING:
    from reconciler.runners.standalone import StandaloneRunner

STOP_FILE = "stop.request"


def application_of(record: Deployment | None) -> str | None:
    """The application a recorded standalone deployment runs in (None: a driver of its own, or none)."""
    return record.application if isinstance(record, StandaloneDeployment) else None


@dataclass(frozen=True)
class AppDriver:
    """An application's driver as its folder records it and the master reports it."""

    submission_id: str | None
    digest: str | None
    status: DriverStatus | None

    @property
    def running(self) -> bool:
        return self.status is not None and self.status.active


@dataclass(frozen=True)
class RemoteCopy:
    """This host's copy of an application's folder that lives on HDFS (`uri`), read and written through WebHDFS:
    the runner works on the copy (`local`), pulling what the driver wrote and pushing what it wrote itself."""

    hadoop: HadoopClient
    uri: str
    local: ApplicationFolder

    def pull(self, *, specs: bool = False) -> None:
        """The application's runner and status records and each flow's status, runner record, request and stop
        request (and spec, with `specs`), as they are on HDFS."""
        names = ["runner.json", "status.json"]
        for flow, is_dir in sorted(self.hadoop.listing(self.uri).items()):
            if is_dir and not flow.startswith((".", "_")):
                names += [f"{flow}/{n}" for n in ("status.json", "runner.json", "request.json", STOP_FILE)]
                names += [f"{flow}/spec.json"] if specs else []
        for name in names:
            data = self.hadoop.read(f"{self.uri}/{name}")
            path = self.local.path / name
            if data is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)

    def push(self, *names: str) -> None:
        """The local files `names` (relative to the application's folder) to HDFS; one that is gone is deleted."""
        for name in names:
            path = self.local.path / name
            if path.is_file():
                self.hadoop.write(f"{self.uri}/{name}", path.read_bytes())
            else:
                self.hadoop.delete(f"{self.uri}/{name}")


class StandaloneApplications:
    """Deploy, stop and report flows that run in applications on a standalone cluster; see the module docstring."""

    def __init__(self, runner: StandaloneRunner) -> None:
        self.runner = runner

    @property
    def jobs_dir(self) -> Path:
        """This state's folder of job folders: on the shared path, or this host's copies of those on HDFS."""
        folder = self.runner._folders().job_folder(self.runner.state_key, APPLICATIONS)
        if folder is None:
            return local_job_folder(self.runner.state_key, APPLICATIONS).path.parent
        return folder.path.parent

    def folder(self, application: str) -> ApplicationFolder:
        return application_folder(self.jobs_dir, application)

    def remote(self, app: ApplicationFolder) -> RemoteCopy | None:
        """The application's folder on HDFS, when the jobs' folders are there (not a shared path)."""
        root = self.runner._folders()
        if root.path is not None:
            return None
        uri = f"{yarn_folder(root, self.runner.state_key, APPLICATIONS)}/{app.name}"
        return RemoteCopy(self.runner.hadoop, uri, app)

    def _refresh(self, app: ApplicationFolder) -> None:
        remote = self.remote(app)
        if remote is not None:
            remote.pull()

    def driver(self, app: ApplicationFolder, *, refresh: bool = True) -> AppDriver:
        if refresh:
            self._refresh(app)
        record = read_json(app.runner)
        sid, url, digest = record.get("submission_id"), record.get("rest_url"), record.get("digest")
        if not isinstance(sid, str):
            return AppDriver(None, None, None)
        status = self._rest(url if isinstance(url, str) else None).status(sid)
        return AppDriver(sid, digest if isinstance(digest, str) else None, status)

    def _rest(self, url: str | None) -> RestClient:
        runner = self.runner
        return runner._client(url) if url and url.rstrip("/") != runner.rest.url else runner.rest

    # -- deploy -----------------------------------------------------------------------------------------------
    def deploy(
        self, flow: str, spec: EffectiveSpec, spec_digest: str, previous: Deployment | None
    ) -> StandaloneDeployment:
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
        remote = self.remote(app)
        if remote is not None:
            remote.pull(specs=True)
        driver = self.driver(app, refresh=False)
        if driver.running and driver.digest != app_digest:
            self._stop_application(app, driver, f"its Spark settings or jars changed (flow {flow} brings them)")
            driver = self.driver(app)
        if not driver.running:
            restamp(app, app_digest, flow)
            if remote is not None:
                remote.push(*(f"{name}/request.json" for name in app.requests() if name != flow))
        folder.path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            folder.stop.unlink()
        job_spec.write(folder.spec)
        resume = checkpoint_missing(checkpoint, previous) is not False
        FlowRequest(flow, folder, spec_digest, checkpoint, resume, app_digest).write()
        if remote is not None:  # the spec before its request, as the driver's mirror copies them
            remote.push(f"{flow}/{STOP_FILE}", f"{flow}/spec.json", f"{flow}/request.json")
        sid = driver.submission_id if driver.running else self._start_application(app, job_spec, app_digest, flow)
        assert sid is not None
        record = self._record(flow, app, sid, job_spec, checkpoint)
        write_json(folder.runner, record.model_dump(mode="json"))
        if remote is not None:
            remote.push(f"{flow}/runner.json")
        runner.deployments[flow] = record
        self._wait_running(app, flow, job_spec, app_digest)
        return self.written(flow) or record

    def _record(
        self, flow: str, app: ApplicationFolder, sid: str, job_spec: JobSpec, checkpoint: str
    ) -> StandaloneDeployment:
        written = read_json(app.runner)
        record = StandaloneDeployment(
            flow=flow,
            submission_id=sid,
            digest=job_spec.digest,
            rest_url=str(written.get("rest_url") or self.runner.rest.url),
            master=job_spec.spark.master,
            folder=f"{remote.uri}/{flow}" if (remote := self.remote(app)) else str(app.flow(flow).path),
            checkpoint=checkpoint,
            eos_flow=job_spec.eos_name,
            generation=job_spec.generation,
            started_at=time.time(),
            application=app.name,
        )
        environment = written.get("job_environment")
        if isinstance(environment, str):  # set only when shipped: a record's JSON holds the fields it was built with
            record = record.model_copy(update={"job_environment": environment})
        return record

    def _start_application(self, app: ApplicationFolder, job_spec: JobSpec, app_digest: str, flow: str) -> str:
        """Submit the application's driver (supervised); its submission id."""
        runner = self.runner
        spark = job_spec.spark
        app.path.mkdir(parents=True, exist_ok=True)
        for stale in (app.status, app.path / STOP_FILE):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        remote = self.remote(app)
        checkpoint = spark.checkpoint_root
        shipped = runner.ship(runner._folders(spark), spark, checkpoint)
        if remote is None:
            log4j: Path | None = app.path / "log4j2.properties"
            write_private(app.path / "log4j2.properties", log4j2_properties("file", app.log))
            where = ["--kmirror-log", str(app.log), "--kmirror-stop-file", str(app.path / STOP_FILE)]
            folder = str(app.path)
        else:  # the driver's output stays in its folder on the worker; its mirror keeps the folder in step
            log4j = None
            remote.push("status.json", STOP_FILE)
            where, folder = ["--kmirror-folder", remote.uri], remote.uri
        args = [*where, "--kmirror-application", "--folder", folder, "--digest", app_digest]
        request = runner.submission(f"kmirror-app-{app.name}", spark, args, checkpoint, shipped=shipped, log4j=log4j)
        rest = runner._client(spark.rest_url) if spark.rest_url else runner.rest
        with app.log.open("ab") as out:
            out.write(f"\n===== kmirror: submitting application {app.name} for flow {flow} at {now()} =====\n".encode())
        sid = rest.create(request)
        write_json(
            app.runner,
            {
                "runner": "standalone",
                "application": app.name,
                "submission_id": sid,
                "rest_url": rest.url,
                "digest": app_digest,
                "started_at": time.time(),
                **({"job_environment": str(shipped.archive)} if shipped else {}),
            },
        )
        if remote is not None:
            remote.push("runner.json")
        return sid

    def _wait_running(self, app: ApplicationFolder, flow: str, job_spec: JobSpec, app_digest: str) -> None:
        """Until the flow's query reports running with its digest, in the driver that runs now (the status a driver
        before wrote does not count). An application that ended meanwhile (its last flow had just stopped) is
        submitted again, once."""
        folder = app.flow(flow)
        deadline = time.monotonic() + self.runner.start_timeout
        restarted = False
        while time.monotonic() < deadline:
            report = read_report(folder.status)
            pid = read_report(app.status).get("pid")
            if (
                report.get("state") == "running"
                and report.get("digest") == job_spec.digest
                and isinstance(pid, int)
                and report.get("pid") == pid
            ):
                return
            driver = self.driver(app)
            if not driver.running:
                why = report.get("error") or read_report(app.status).get("error")
                why = why or (driver.status.message if driver.status else None) or "its driver ended"
                if restarted or report.get("state") == "failed":
                    raise JobRunnerError(
                        f"the replication application {app.name} (driver {driver.submission_id}) ended while "
                        f"starting flow {flow} ({why}). Last lines of {app.log}:\n{tail(app.log)}"
                    )
                restarted = True
                sid = self._start_application(app, job_spec, app_digest, flow)
                record = self.written(flow)
                if record is not None:
                    record = record.model_copy(update={"submission_id": sid})
                    write_json(folder.runner, record.model_dump(mode="json"))
                    self.runner.deployments[flow] = record
                    if (remote := self.remote(app)) is not None:
                        remote.push(f"{flow}/runner.json")
            time.sleep(0.5)
        raise JobRunnerError(
            f"flow {flow} did not report running in application {app.name} within "
            f"{self.runner.start_timeout:.0f}s; see {app.log} and the master's web UI (a driver that stays SUBMITTED "
            "waits for a worker with enough free cores and memory)."
        )

    # -- stop -------------------------------------------------------------------------------------------------
    def stop(self, flow: str, record: StandaloneDeployment) -> None:
        """Stop only the flow's query (gracefully: a stop request the application honours); the others run on."""
        app = self._folder_of(flow, record)
        folder = app.flow(flow)
        remote = self.remote(app)
        if remote is not None:
            remote.pull()
        if folder.path.is_dir():
            write_private(folder.stop, f"stop requested at {now()}\n")
            if remote is not None:
                remote.push(f"{flow}/{STOP_FILE}")
        wait_query_stopped(app, flow, lambda: self.driver(app).running, self.runner.stop_timeout, poll=0.5)
        written = read_json(folder.runner)
        if written:
            stopped = mark_stopped(deployment_of(written), time.time())
            write_json(folder.runner, stopped.model_dump(mode="json"))
            self.runner.deployments[flow] = stopped
            if remote is not None:
                remote.push(f"{flow}/runner.json")

    def _stop_application(self, app: ApplicationFolder, driver: AppDriver, why: str) -> None:
        """Stop the whole application gracefully (every flow's batch finishes); kill it after the timeout."""
        assert driver.submission_id is not None
        url = read_json(app.runner).get("rest_url")
        rest = self._rest(url if isinstance(url, str) else None)
        with contextlib.suppress(FileNotFoundError), app.log.open("ab") as out:
            out.write(f"===== kmirror: stopping application {app.name}: {why} at {now()} =====\n".encode())
        write_private(app.path / STOP_FILE, f"{driver.submission_id} {time.time()}\n")
        if (remote := self.remote(app)) is not None:
            remote.push(STOP_FILE)
        if not self.runner._wait_inactive(rest, driver.submission_id, self.runner.stop_timeout):
            rest.kill(driver.submission_id)
            if not self.runner._wait_inactive(rest, driver.submission_id, 30):
                raise JobRunnerError(
                    f"the driver {driver.submission_id} of application {app.name} did not stop after a kill request"
                )

    def forget(self, flow: str, record: StandaloneDeployment) -> None:
        """The flow left the file: its request, checkpoint and runner record go."""
        app = self._folder_of(flow, record)
        folder = app.flow(flow)
        with contextlib.suppress(FileNotFoundError):
            request_path(folder).unlink()
        forget_job(folder, record)
        remote = self.remote(app)
        if remote is not None:
            remote.push(f"{flow}/request.json", f"{flow}/runner.json")
            if record.checkpoint is not None and record.checkpoint.startswith("hdfs:"):
                self.runner.hadoop.delete(record.checkpoint, recursive=True)

    # -- status -----------------------------------------------------------------------------------------------
    def flows(self) -> set[str]:
        """Flows with a runner record in any application folder of this state (on the shared path)."""
        base = self.jobs_dir / APPLICATIONS
        return {p.parent.name for p in base.glob("*/*/runner.json")} if base.is_dir() else set()

    def written(self, flow: str) -> StandaloneDeployment | None:
        """The newest record of `flow` in this state's application folders."""
        base = self.jobs_dir / APPLICATIONS
        found: list[StandaloneDeployment] = []
        if base.is_dir():
            for path in base.glob(f"*/{flow}/runner.json"):
                data = read_json(path)
                record = deployment_of(data) if data else None
                if isinstance(record, StandaloneDeployment) and record.application is not None:
                    found.append(record)
        return max(found, key=lambda r: r.started_at or 0.0) if found else None

    def state(self, flow: str, record: StandaloneDeployment) -> tuple[JobFolder, ApplicationFolder, AppDriver, bool]:
        """The flow's sub-folder, its application's folder and driver, and whether its query runs (the application
        does and was not asked to stop it)."""
        app = self._folder_of(flow, record)
        folder = app.flow(flow)
        driver = self.driver(app)  # refreshed from HDFS first, when the folder is there
        state = read_report(folder.status).get("state")
        live = driver.running and FlowRequest.read(folder) is not None and state != "stopped"
        return folder, app, driver, live

    def _folder_of(self, flow: str, record: StandaloneDeployment) -> ApplicationFolder:
        if record.folder and "://" not in record.folder:
            return ApplicationFolder(Path(record.folder).parent)
        return self.folder(str(record.application))
