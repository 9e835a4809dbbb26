"""`LocalRunner` (`spark.deploy: local`, the embedded default): each flow's job as a detached
`spark-submit --master local[N]` on this machine, from the driver home (`reconciler.artifacts.driver_home`:
pyspark's jars without MLlib; the driver imports the installed pyspark).

The job's folder is this host's (`jobcontract.layout.local_job_folder`: `$KMIRROR_HOME/jobs/<state key>/<flow>/`, the
state key being `<state topic>@<state cluster id>`), never the checkout's, so any checkout of the same desired-state
file on this host sees the same job, and no other environment's:

    spec.json           the flow's effective spec (secrets as references) that the job reads
    spark.properties    Spark settings (driver memory, UI off, ...; no resolved secret)
    log4j2.properties   the driver's JVM log configuration (WARN and up)
    driver.log          the job's stdout and stderr, appended across starts
    runner.json         written by the runner: host, pid of the spark-submit process (also its process group),
                        digest, checkpoint
    status.json         written by the job (`jobcontract.status.JobReport`)

`deploy` returns the same record (the executor keeps it in the state topic). A job runs when the recorded pid on
this host is alive, is not a zombie and its command line names this flow's spec file. A job recorded on another
host cannot be seen from here: its status is unknown, and the planner plans nothing for it (a CI runner with
`deploy: local` starts a job that lives only as long as that machine; the planner warns).

`deploy` stops a running job of the flow gracefully (SIGTERM to the job's Python driver, which finishes the
batch in flight; after `stop_timeout` the whole process group is killed) and starts a new one on the same
checkpoint, so it resumes where the old one stopped. A flow deployed before whose checkpoint is gone is started
with `--resume-from-syncs`: it reads on from the offset-syncs (what the target proves copied), not from
`start_from`. The job inherits kmirror's environment, from which it resolves `${env:..}` references itself;
nothing secret is written to these files or put on a command line.

Must not: decide whether a job should run (the planner does), or touch another flow's folder or process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reconciler.artifacts import filesystem_jars, job_jars
from reconciler.jobcontract.job_report import read_report
from reconciler.jobcontract.layout import CheckpointRoot, JobFolder, local_job_folder
from reconciler.jobcontract.spec import EffectiveSpec, JobSpec
from reconciler.resources.deployments import (
    Deployment,
    LocalDeployment,
    StandaloneDeployment,
    deployment_of,
    mark_stopped,
)
from reconciler.resources.job_status import JobInfo, JobStatus
from reconciler.runners.common import (
    HOST,
    JobRunnerError,
    checkpoint_for,
    checkpoint_missing,
    forget_job,
    job_info,
    now,
    read_json,
    tail,
    write_json,
)
from reconciler.runners.local_apps import LocalApplications, application_of
from reconciler.runners.local_submit import submit
from reconciler.runners.object_store import forget_checkpoint
from reconciler.runners.processes import alive
from reconciler.spec.defaults import DEFAULT_STATE_TOPIC
from reconciler.spec.models import SparkSpec

ENTRY = Path(__file__).parents[1] / "replication" / "entry.py"


@dataclass(frozen=True)
class LocalJob:
    """What the runner knows about one flow's job, from its folder on this host."""

    flow: str
    folder: Path
    pid: int | None
    digest: str | None
    running: bool
    state: str | None
    app_id: str | None
    error: str | None
    checkpoint: str | None = None
    #: The application whose driver runs the flow's query (its log is the application's); None: its own job.
    application: str | None = None
    log_path: Path | None = None

    @property
    def log(self) -> Path:
        return self.log_path or self.folder / "driver.log"

    @property
    def host(self) -> str:
        """Where the driver (and its metrics endpoint) runs: this machine."""
        return "127.0.0.1"


class LocalRunner:
    """Runs each flow's job as a detached local spark-submit; see the module docstring."""

    kind = "local"

    def __init__(
        self,
        base_dir: Path,
        spark: SparkSpec | None = None,
        *,
        state_topic: str = DEFAULT_STATE_TOPIC,
        state_key: str | None = None,
        deployments: Mapping[str, Deployment] | None = None,
        root: Path | None = None,
        stop_timeout: float = 150.0,
        start_timeout: float = 180.0,
        python: str = sys.executable,
    ) -> None:
        self.base_dir = base_dir.resolve()
        self.spark = spark or SparkSpec()
        self.state_topic = state_topic
        #: What this state's folders and checkpoints are keyed by (`jobcontract.layout.state_key`).
        self.state_key = state_key or state_topic
        #: What the state topic says apply deployed, per flow (the `deployment` of each `job/<flow>` record).
        self.deployments: dict[str, Deployment] = dict(deployments or {})
        self.root = root
        self.stop_timeout = stop_timeout
        self.start_timeout = start_timeout
        self.python = python
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self.apps = LocalApplications(self)

    def folder(self, flow: str) -> JobFolder:
        """The flow's job folder on this host: where its recorded deployment put it (jobs deployed before folders
        were keyed by the state's cluster keep theirs), else this state's keyed one."""
        recorded = self.deployments.get(flow)
        if isinstance(recorded, LocalDeployment) and recorded.folder:
            return JobFolder(Path(recorded.folder))
        return local_job_folder(self.state_key, flow, self.root)

    @property
    def jobs_dir(self) -> Path:
        """This state's folder of job folders on this host (`$KMIRROR_HOME/jobs/<state key>`)."""
        return local_job_folder(self.state_key, "x", self.root).path.parent

    # -- the executor's protocol ----------------------------------------------------------------------------
    def deploy(self, flow: str, spec: EffectiveSpec, spec_digest: str) -> LocalDeployment:
        """Start the flow's job with `spec`, stopping a running one first (it resumes from its checkpoint).

        Returns the deployment record once the job reports its query running; raises `JobRunnerError` with the
        log's tail if it exits first or does not come up within `start_timeout`.
        """
        previous = self._previous(flow)
        if spec.spark.application is not None:  # a query in an application's driver (local_apps.py)
            if application_of(previous) != spec.spark.application:
                self.stop(flow)  # its own job, or its query in another application: it moves, on its checkpoint
            return self.apps.deploy(flow, spec, spec_digest, previous)
        if application_of(previous) is not None:  # moving out of an application: its query stops there first, and
            self.stop(flow)  # the flow's own job gets this state's keyed folder, not the application's sub-folder
            self.deployments.pop(flow, None)
        job_spec = JobSpec.for_deploy(flow, spec, spec_digest, self.base_dir, self.state_topic, previous)
        spark = job_spec.spark
        folder = self.folder(flow)
        self.stop(flow)
        folder.path.mkdir(parents=True, exist_ok=True)
        job_spec.write(folder.spec)
        root = CheckpointRoot.parse(spark.checkpoint_root, self.base_dir)
        checkpoint = checkpoint_for(flow, root, self.state_key, previous)
        if "://" not in checkpoint:
            Path(checkpoint).parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            folder.status.unlink()
        entry = [str(ENTRY), "--spec", str(folder.spec), "--digest", spec_digest, "--checkpoint", checkpoint]
        if checkpoint_missing(checkpoint, previous) is not False:
            entry.append("--resume-from-syncs")
        proc = submit(
            folder.path,
            spark,
            f"kmirror-{flow}",
            [*job_jars(), *filesystem_jars(checkpoint)],
            entry,
            f"starting flow {flow} with {spec_digest} at {now()}",
            self.python,
        )
        self._children[proc.pid] = proc
        record = LocalDeployment(
            flow=flow,
            host=HOST,
            pid=proc.pid,
            digest=spec_digest,
            folder=str(folder.path),
            checkpoint=checkpoint,
            eos_flow=job_spec.eos_name,
            generation=job_spec.generation,
            started_at=time.time(),
        )
        write_json(folder.runner, record.model_dump(mode="json"))
        self.deployments[flow] = record
        self._wait_started(flow, proc)
        return record

    def stop(self, flow: str) -> None:
        """Stop the flow's job gracefully (finish the batch in flight); kill it after `stop_timeout`."""
        previous = self._previous(flow)
        if isinstance(previous, LocalDeployment) and previous.application is not None:
            self.apps.stop(flow, previous)  # only its query: the application's other flows run on
            return
        job = self.job(flow)
        if job is None or job.pid is None or not job.running:
            return
        driver = read_report(job.folder / "status.json").get("pid")
        target = driver if isinstance(driver, int) and alive(driver) else job.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGTERM)
        if not self._wait_exit(job.pid, self.stop_timeout):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job.pid, signal.SIGKILL)
            self._wait_exit(job.pid, 15)
        folder = self.folder(flow)
        written = self._written(flow)
        if written is not None:
            write_json(folder.runner, mark_stopped(written, time.time()).model_dump(mode="json"))

    def forget(self, flow: str) -> None:
        """Delete the stopped job's checkpoint and its folder's runner record: the flow is gone from the file."""
        previous = self._previous(flow)
        if isinstance(previous, LocalDeployment) and previous.application is not None and previous.folder:
            self.apps.forget(flow, previous)
            forget_job(JobFolder(Path(previous.folder)), previous)
        elif previous is not None:
            forget_job(self.folder(flow), previous)
        if previous is not None:  # on S3: deleted with the job's settings (its references resolve here, as its own)
            conf_dir = os.environ.get("HADOOP_CONF_DIR")
            forget_checkpoint(previous.checkpoint, self.spark, self.base_dir, Path(conf_dir) if conf_dir else None)
        self.deployments.pop(flow, None)

    # -- the planner's input --------------------------------------------------------------------------------
    def status(self) -> JobStatus:
        """Every job this state topic's applies deployed (recorded), and any found in this host's folders."""
        flows = set(self.deployments)
        if self.jobs_dir.is_dir():
            flows |= {p.name for p in self.jobs_dir.iterdir() if (p / "runner.json").is_file()}
            flows |= self.apps.flows()
        jobs = {}
        for flow in sorted(flows):
            info = self.info(flow)
            if info is not None:
                jobs[flow] = info
        return JobStatus(jobs)

    def info(self, flow: str) -> JobInfo | None:
        previous = self._previous(flow)
        host = previous.host if isinstance(previous, LocalDeployment) else None
        if host and host != HOST and not self.folder(flow).runner.is_file():
            return JobInfo(
                flow,
                None,
                _str(previous.digest if previous is not None else None),
                self.kind,
                f"deploy: local on host {host}; its process can only be seen there",
                host=host,
            )
        job = self.job(flow)
        return None if job is None else job_info(flow, job, previous, self.kind, _detail(job), HOST)

    def job(self, flow: str) -> LocalJob | None:
        previous = self._previous(flow)
        if isinstance(previous, LocalDeployment) and previous.application is not None and previous.folder:
            return self._app_job(flow, previous)
        folder = self.folder(flow)
        record = self._written(flow) or previous
        if record is None or isinstance(record, StandaloneDeployment):
            return None
        status = read_report(folder.status)
        local = record if isinstance(record, LocalDeployment) else None
        pid = local.pid if local is not None else None
        host = local.host if local is not None and local.host is not None else HOST
        running = pid is not None and host == HOST and self._is_our_job(pid, folder.spec)
        digest = status.get("digest") or record.digest
        checkpoint = _str(record.checkpoint)
        return LocalJob(
            flow,
            folder.path,
            pid,
            digest,
            running,
            status.get("state"),
            status.get("app_id"),
            status.get("error"),
            checkpoint,
        )

    def _app_job(self, flow: str, record: LocalDeployment) -> LocalJob:
        """A flow whose query runs in an application (`local_apps.py`): its sub-folder, the application's process."""
        folder = JobFolder(Path(str(record.folder)))
        status = read_report(folder.status)
        running, log = self.apps.running(flow, record)
        return LocalJob(
            flow,
            folder.path,
            record.pid,
            status.get("digest") or record.digest,
            running,
            status.get("state"),
            status.get("app_id"),
            status.get("error"),
            _str(record.checkpoint),
            application=record.application,
            log_path=log,
        )

    # -- plumbing -------------------------------------------------------------------------------------------
    def _previous(self, flow: str) -> Deployment | None:
        """The flow's last deployment: as the state topic recorded it, else as this host's folders have it (its
        own job's folder or an application's sub-folder, the newer)."""
        recorded = self.deployments.get(flow)
        if recorded is not None:
            return recorded
        written = [r for r in (self._written(flow), self.apps.written(flow)) if r is not None]
        return max(written, key=lambda r: r.started_at or 0.0) if written else None

    def _written(self, flow: str) -> Deployment | None:
        """The deployment this host's folder of the flow records (`runner.json`), if any."""
        found = read_json(self.folder(flow).runner)
        return deployment_of(found) if found else None

    def _is_our_job(self, pid: int, spec_file: Path) -> bool:
        child = self._children.get(pid)
        if child is not None:
            # Started by this runner and not reaped: its pid cannot have been reused, so whether it has exited is
            # the whole answer. Its command line is not: spark-submit execs spark-class, which execs java, and a
            # read of /proc/<pid>/cmdline during an exec can come back empty; an application's driver seen "not
            # running" just after its start was started a second time (two drivers on one checkpoint).
            return child.poll() is None
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        if stat.rpartition(")")[2].split()[0] in ("Z", "X"):
            return False
        return str(spec_file).encode() in cmdline

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            child = self._children.get(pid)
            if child is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=0.2)
                if child.poll() is not None:
                    self._children.pop(pid, None)
                    return True
            elif not alive(pid):
                return True
            else:
                time.sleep(0.2)
        return False

    def _wait_started(self, flow: str, proc: subprocess.Popen[bytes]) -> None:
        folder = self.folder(flow)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            state = read_report(folder.status).get("state")
            if state == "running":
                return
            if proc.poll() is not None:
                status = read_report(folder.status)
                why = status.get("error") or f"exit code {proc.returncode}"
                raise JobRunnerError(
                    f"the replication job of flow {flow} exited while starting ({why}). "
                    f"Last lines of {folder.log}:\n{tail(folder.log)}"
                )
            time.sleep(0.25)
        raise JobRunnerError(
            f"the replication job of flow {flow} did not report running within {self.start_timeout:.0f}s; "
            f"it is left running (pid {proc.pid}). See {folder.log}."
        )


def _detail(job: LocalJob) -> str:
    if job.running:
        return f"pid {job.pid}, {job.state or 'starting'}" + (f", app {job.app_id}" if job.app_id else "")
    if job.state == "stopped":
        return f"stopped; log: {job.log}"
    reason = f": {job.error}" if job.error else ""
    return f"exited{reason}: see {job.log}"


def _str(value: str | None) -> str | None:
    return value if isinstance(value, str) and value else None
