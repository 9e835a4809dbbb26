"""Job runners: start, stop and report the replication job of each flow. The executor and planner talk to these.

`runner_for` picks the runner of `spark.deploy`: `LocalRunner` here, or `StandaloneRunner` (`standalone.py`, a
driver on a Spark standalone cluster, with the same folder per flow).

`LocalRunner` (`spark.deploy: local`, the embedded default) runs each flow's job as a detached
`spark-submit --master local[N]` on this machine. Everything about one flow's job sits in one folder,
`<base>/.kmirror/jobs/<flow>/`:

    spec.json           the flow's effective spec (secrets as references) that the job reads
    spark.properties    Spark settings (driver memory, UI off, ...; no resolved secret)
    log4j2.properties   the driver's JVM log configuration (WARN and up)
    driver.log          the job's stdout and stderr, appended across starts
    runner.json         written by the runner: pid of the spark-submit process (also its process group), digest
    status.json         written by the job: its Python pid, Spark application id, state, progress, last error

A job runs when the recorded pid is alive, is not a zombie and its command line names this flow's spec file.
`deploy` stops a running job of the flow gracefully (SIGTERM to the job's Python driver, which finishes the
batch in flight; after `stop_timeout` the whole process group is killed) and starts a new one on the same
checkpoint, so it resumes where the old one stopped. The job inherits kmirror's environment, from which it
resolves `${env:..}` references itself; nothing secret is written to these files or put on a command line.

Must not: decide whether a job should run (the planner does), or touch another flow's folder or process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.errors import KmirrorError
from reconciler.plan.inputs import JobInfo, JobStatus
from reconciler.replication.jobspec import JobSpec
from reconciler.spec.models import DesiredState, SparkSpec
from reconciler.spec.secrets import SecretRef

if TYPE_CHECKING:
    from reconciler.replication.standalone import StandaloneRunner

JOBS_FOLDER = Path(".kmirror") / "jobs"
ENTRY = Path(__file__).with_name("entry.py")

#: Spark settings every job gets unless `spark.conf` says otherwise: a light driver for a one-machine job.
SPARK_DEFAULTS = {
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
}

_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %p %c{1}: %m%n%ex
# "Current batch is falling behind" after every batch longer than the trigger interval: expected under load.
logger.trigger.name = org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor
logger.trigger.level = error
"""


class JobRunnerError(KmirrorError):
    """A replication job could not be started or stopped."""


@dataclass(frozen=True)
class LocalJob:
    """What the runner knows about one flow's job, from its folder."""

    flow: str
    folder: Path
    pid: int | None
    digest: str | None
    running: bool
    state: str | None
    app_id: str | None
    error: str | None

    @property
    def log(self) -> Path:
        return self.folder / "driver.log"

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
        stop_timeout: float = 60.0,
        start_timeout: float = 180.0,
        python: str = sys.executable,
    ) -> None:
        self.base_dir = base_dir.resolve()
        self.spark = spark or SparkSpec()
        self.stop_timeout = stop_timeout
        self.start_timeout = start_timeout
        self.python = python
        self.jobs_dir = self.base_dir / JOBS_FOLDER
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    # -- the executor's protocol ----------------------------------------------------------------------------
    def deploy(self, flow: str, spec: Mapping[str, Any], spec_digest: str) -> None:
        """Start the flow's job with `spec`, stopping a running one first (it resumes from its checkpoint).

        Returns once the job reports its query running; raises `JobRunnerError` with the log's tail if it
        exits first or does not come up within `start_timeout`.
        """
        job_spec = JobSpec(flow, spec, spec_digest, self.base_dir)
        spark = job_spec.spark
        folder = self.jobs_dir / flow
        self.stop(flow)
        folder.mkdir(parents=True, exist_ok=True)
        spec_file = folder / "spec.json"
        job_spec.write(spec_file)
        (folder / "log4j2.properties").write_text(_LOG4J2)
        _write_properties(folder / "spark.properties", self._spark_properties(spark, folder))
        checkpoint = job_spec.checkpoint_dir()
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            (folder / "status.json").unlink()
        cmd = [
            str(spark_submit()),
            "--master", spark.master,
            "--name", f"kmirror-{flow}",
            "--properties-file", str(folder / "spark.properties"),
            "--jars", ",".join(str(p) for p in job_jars()),
            str(ENTRY),
            "--spec", str(spec_file),
            "--digest", spec_digest,
            "--checkpoint", str(checkpoint),
        ]  # fmt: skip
        env = {**os.environ, "PYSPARK_PYTHON": self.python, "PYSPARK_DRIVER_PYTHON": self.python}
        with (folder / "driver.log").open("ab") as out:
            out.write(f"\n===== kmirror: starting flow {flow} with {spec_digest} at {_now()} =====\n".encode())
            out.flush()
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=folder, env=env,
            )  # fmt: skip
        self._children[proc.pid] = proc
        record = {"flow": flow, "pid": proc.pid, "digest": spec_digest, "started_at": time.time(), "command": cmd}
        _write_json(folder / "runner.json", record)
        self._wait_started(flow, proc)

    def stop(self, flow: str) -> None:
        """Stop the flow's job gracefully (finish the batch in flight); kill it after `stop_timeout`."""
        record = _read_json(self.jobs_dir / flow / "runner.json")
        if isinstance(record.get("submission_id"), str) and isinstance(record.get("rest_url"), str):
            self._stop_standalone(flow, record["rest_url"])  # the flow ran under deploy: standalone before
            return
        job = self.job(flow)
        if job is None or job.pid is None or not job.running:
            return
        driver = _read_json(job.folder / "status.json").get("pid")
        target = driver if isinstance(driver, int) and _alive(driver) else job.pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGTERM)
        if not self._wait_exit(job.pid, self.stop_timeout):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job.pid, signal.SIGKILL)
            self._wait_exit(job.pid, 15)
        record = _read_json(job.folder / "runner.json")
        _write_json(job.folder / "runner.json", {**record, "stopped_at": time.time()})

    def _stop_standalone(self, flow: str, rest_url: str) -> None:
        from reconciler.replication.standalone import StandaloneRunner

        spark = SparkSpec(deploy="standalone", master="spark://unused:7077", rest_url=rest_url)
        StandaloneRunner(self.base_dir, spark, stop_timeout=self.stop_timeout).stop(flow)

    # -- the planner's input --------------------------------------------------------------------------------
    def status(self) -> JobStatus:
        jobs = {}
        if self.jobs_dir.is_dir():
            for folder in sorted(p for p in self.jobs_dir.iterdir() if (p / "runner.json").is_file()):
                job = self.job(folder.name)
                if job is not None:
                    jobs[job.flow] = JobInfo(job.flow, job.running, job.digest, self.kind, _detail(job))
        return JobStatus(jobs)

    def job(self, flow: str) -> LocalJob | None:
        folder = self.jobs_dir / flow
        record = _read_json(folder / "runner.json")
        if not record:
            return None
        status = _read_json(folder / "status.json")
        pid = record.get("pid")
        pid = pid if isinstance(pid, int) else None
        running = pid is not None and self._is_our_job(pid, folder / "spec.json")
        digest = status.get("digest") or record.get("digest")
        state, app_id, error = status.get("state"), status.get("app_id"), status.get("error")
        return LocalJob(flow, folder, pid, digest, running, state, app_id, error)

    # -- plumbing -------------------------------------------------------------------------------------------
    def _spark_properties(self, spark: SparkSpec, folder: Path) -> dict[str, str]:
        props = dict(SPARK_DEFAULTS)
        props["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{folder / 'log4j2.properties'}"
        # Settings with references are resolved by the job in memory, never written here.
        props.update({k: _spark_value(v) for k, v in spark.conf.items() if not isinstance(v, SecretRef)})
        return props

    def _is_our_job(self, pid: int, spec_file: Path) -> bool:
        child = self._children.get(pid)
        if child is not None and child.poll() is not None:
            return False  # reaped: it exited
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
            elif not _alive(pid):
                return True
            else:
                time.sleep(0.2)
        return False

    def _wait_started(self, flow: str, proc: subprocess.Popen[bytes]) -> None:
        folder = self.jobs_dir / flow
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            state = _read_json(folder / "status.json").get("state")
            if state == "running":
                return
            if proc.poll() is not None:
                status = _read_json(folder / "status.json")
                why = status.get("error") or f"exit code {proc.returncode}"
                raise JobRunnerError(
                    f"the replication job of flow {flow} exited while starting ({why}). "
                    f"Last lines of {folder / 'driver.log'}:\n{_tail(folder / 'driver.log')}"
                )
            time.sleep(0.25)
        raise JobRunnerError(
            f"the replication job of flow {flow} did not report running within {self.start_timeout:.0f}s; "
            f"it is left running (pid {proc.pid}). See {folder / 'driver.log'}."
        )


def runner_for(desired: DesiredState) -> LocalRunner | StandaloneRunner:
    """The runner `spark.deploy` asks for, rooted at the desired-state file's folder (or the working folder)."""
    base = desired.base_dir or Path.cwd()
    if desired.spark.deploy == "local":
        return LocalRunner(base, desired.spark)
    if desired.spark.deploy == "standalone":
        from reconciler.replication.standalone import StandaloneRunner

        return StandaloneRunner(base, desired.spark)
    raise JobRunnerError(f"spark.deploy '{desired.spark.deploy}' runs no job, so it has no job runner")


def spark_submit() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-submit"


def job_jars() -> list[Path]:
    """The jars a job needs besides pyspark's: the Kafka connector and kmirror's timestamp interceptor."""
    from reconciler.devenv.jars import spark_kafka_jars
    from reconciler.replication.interceptor import interceptor_jar

    return [*spark_kafka_jars(), interceptor_jar()]


def _detail(job: LocalJob) -> str:
    if job.running:
        return f"pid {job.pid}, {job.state or 'starting'}" + (f", app {job.app_id}" if job.app_id else "")
    if job.state == "stopped":
        return f"stopped; log: {job.log}"
    reason = f": {job.error}" if job.error else ""
    return f"exited{reason}: see {job.log}"


def _spark_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _write_properties(path: Path, props: Mapping[str, str]) -> None:
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n")

    path.write_text("".join(f"{escape(k)}={escape(v)}\n" for k, v in sorted(props.items())))


def _write_json(path: Path, value: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X"):
            return False
    return True


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %z")
