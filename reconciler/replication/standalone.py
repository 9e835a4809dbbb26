"""`StandaloneRunner` (`spark.deploy: standalone`): each flow's job as a driver on a Spark standalone cluster.

The runner talks to the master's REST submission server (`spark.rest_url`, e.g. http://master:6066; the master
needs `spark.master.rest.enabled=true`). spark-submit refuses `--deploy-mode cluster` for Python applications on
a standalone master, but the REST protocol takes any main class: a `CreateSubmissionRequest` with
`mainClass = org.apache.spark.deploy.PythonRunner` and `appArgs = [entry.py, "", job args...]` makes the master
launch a driver on a worker, which runs the Python job there. The driver outlives kmirror; its state comes
from `GET /v1/submissions/status/<id>` (SUBMITTED, RUNNING, RELAUNCHING, UNKNOWN: active; FINISHED, KILLED,
FAILED, ERROR: over).

The flow's folder is the same as LocalRunner's, `<base>/.kmirror/jobs/<flow>/`: spec.json, log4j2.properties,
driver.log (the Python job's output and the driver JVM's warnings), status.json (written by the job),
runner.json (here: the submission id, the digest, the REST URL), and `stop.request` (see below). The driver reads
its spec and writes its status and log there, and the checkpoint lives under `spark.checkpoint_root`: the
workers must see these paths (the same machine, or a shared filesystem mounted at the same path) and have
kmirror, its Python (`sys.executable` here, sent as `spark.pyspark.python`) and the jars (`job_jars()`,
sent as `spark.jars` with file: URIs) at the same paths as this machine.

Stop is graceful: the REST kill endpoint only destroys the driver JVM, which neither signals nor stops the Python
job (measured: the Python process is orphaned and runs on). So the driver runs `standalone_entry.py`, which
watches `stop.request` in the flow's folder and sends its own process SIGTERM when it appears: the job finishes
the batch in flight, stops its query and exits 0 (driver FINISHED). After `stop_timeout` the runner falls back
to the kill endpoint (the wrapper exits as soon as its JVM is gone, so no Python process is left behind).

Secrets: the request carries only PYSPARK_PYTHON/PYSPARK_DRIVER_PYTHON and Spark settings without references.
`${env:..}` values are never sent: the REST server has no authentication by default and the master keeps (and
with a recovery mode, persists) the driver's description. The driver resolves references from the worker's
environment (set them in the worker's `conf/spark-env.sh` or its service unit), `${file:..}` from its filesystem.

Must not: decide whether a job should run (the planner does), or touch another flow's folder or driver.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.plan.inputs import JobInfo, JobStatus
from reconciler.replication.jobspec import JobSpec
from reconciler.replication.runners import (
    JOBS_FOLDER,
    SPARK_DEFAULTS,
    JobRunnerError,
    LocalJob,
    LocalRunner,
    _read_json,
    _spark_value,
    _tail,
    _write_json,
    job_jars,
)
from reconciler.spec.models import SparkSpec
from reconciler.spec.secrets import SecretRef

ENTRY = Path(__file__).with_name("standalone_entry.py")
PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"
STOP_FILE = "stop.request"
#: Driver states in which the driver is (or will again be) running on a worker.
ACTIVE_STATES = frozenset({"SUBMITTED", "RUNNING", "RELAUNCHING", "UNKNOWN"})

#: The driver's JVM log: WARN and up, appended to the flow's driver.log beside the Python job's output.
_LOG4J2_FILE = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.append = true
appender.file.fileName = @LOG@
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %p %c{1}: %m%n%ex
# "Current batch is falling behind" after every batch longer than the trigger interval: expected under load.
logger.trigger.name = org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor
logger.trigger.level = error
"""


@dataclass(frozen=True)
class DriverStatus:
    """One driver as the master's REST server reports it."""

    submission_id: str
    found: bool
    state: str | None = None
    worker: str | None = None  # host:port
    message: str | None = None

    @property
    def active(self) -> bool:
        return self.found and self.state in ACTIVE_STATES

    @property
    def host(self) -> str | None:
        return self.worker.rpartition(":")[0] if self.worker else None


@dataclass(frozen=True)
class StandaloneJob:
    """What the runner knows about one flow's driver: from its folder and the REST server."""

    flow: str
    folder: Path
    submission_id: str | None
    digest: str | None
    running: bool
    state: str | None
    app_id: str | None
    error: str | None
    driver: DriverStatus | None

    @property
    def log(self) -> Path:
        return self.folder / "driver.log"

    @property
    def host(self) -> str:
        """Where the driver (and its metrics endpoint) runs."""
        host = self.driver.host if self.driver is not None else None
        return host or "127.0.0.1"


# -- the REST protocol (pure parts) ---------------------------------------------------------------------------


def create_request(
    *,
    app_name: str,
    entry: Path,
    app_args: Sequence[str],
    master: str,
    spark_properties: Mapping[str, str],
    environment: Mapping[str, str],
    spark_version: str,
) -> dict[str, Any]:
    """The body of `POST /v1/submissions/create` running `entry` (a Python file) as a cluster-mode driver."""
    props = {
        **spark_properties,
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.submit.deployMode": "cluster",
    }
    props.setdefault("spark.driver.supervise", "false")
    return {
        "action": "CreateSubmissionRequest",
        "appResource": entry.as_uri(),
        "mainClass": PYTHON_RUNNER,
        # PythonRunner's arguments: the Python file, its comma-separated py-files (none), then the app's own.
        "appArgs": [str(entry), "", *app_args],
        "clientSparkVersion": spark_version,
        "environmentVariables": dict(environment),
        "sparkProperties": props,
    }


def parse_status(submission_id: str, payload: Mapping[str, Any]) -> DriverStatus:
    """A `SubmissionStatusResponse`: success false means the master knows no such driver."""
    if payload.get("action") != "SubmissionStatusResponse" or not payload.get("success"):
        return DriverStatus(submission_id, False, message=_text(payload.get("message")))
    return DriverStatus(
        submission_id,
        True,
        _text(payload.get("driverState")),
        _text(payload.get("workerHostPort")),
        _text(payload.get("message")),
    )


def parse_created(payload: Mapping[str, Any]) -> str:
    """The submission id of a `CreateSubmissionResponse`; `JobRunnerError` with the master's message if refused."""
    sid = payload.get("submissionId")
    if payload.get("action") != "CreateSubmissionResponse" or not payload.get("success") or not isinstance(sid, str):
        why = _text(payload.get("message")) or json.dumps(dict(payload))[:500]
        raise JobRunnerError(f"the Spark master refused the driver: {why}")
    return sid


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class RestClient:
    """The master's REST submission server: create, status, kill. Connection errors are `JobRunnerError`."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def create(self, request: Mapping[str, Any]) -> str:
        return parse_created(self._call("POST", "/v1/submissions/create", request))

    def status(self, submission_id: str) -> DriverStatus:
        return parse_status(submission_id, self._call("GET", f"/v1/submissions/status/{submission_id}"))

    def kill(self, submission_id: str) -> bool:
        return bool(self._call("POST", f"/v1/submissions/kill/{submission_id}").get("success"))

    def _call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json;charset=UTF-8"}
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()  # the server's error responses are JSON too
        except (OSError, ValueError) as exc:
            raise JobRunnerError(
                f"cannot reach the Spark REST submission server {self.url} ({exc}); is the master running with "
                "spark.master.rest.enabled=true, and is spark.rest_url its REST port (6066 by default)?"
            ) from exc
        try:
            payload = json.loads(raw)
        except ValueError:
            raise JobRunnerError(f"{self.url}{path} answered something that is not JSON: {raw[:200]!r}") from None
        return payload if isinstance(payload, dict) else {}


# -- the runner -------------------------------------------------------------------------------------------------


class StandaloneRunner:
    """Runs each flow's job as a driver on a Spark standalone cluster; see the module docstring."""

    kind = "standalone"

    def __init__(
        self,
        base_dir: Path,
        spark: SparkSpec,
        *,
        stop_timeout: float = 60.0,
        start_timeout: float = 240.0,
        python: str = sys.executable,
        rest_timeout: float = 10.0,
    ) -> None:
        if spark.rest_url is None:
            raise JobRunnerError("spark.deploy 'standalone' needs spark.rest_url (e.g. http://master:6066)")
        self.base_dir = base_dir.resolve()
        self.spark = spark
        self.stop_timeout = stop_timeout
        self.start_timeout = start_timeout
        self.python = python
        self.jobs_dir = self.base_dir / JOBS_FOLDER
        self.rest = RestClient(spark.rest_url, rest_timeout)

    # -- the executor's protocol ----------------------------------------------------------------------------
    def deploy(self, flow: str, spec: Mapping[str, Any], spec_digest: str) -> None:
        """Submit the flow's job with `spec`, stopping a running one first (it resumes from its checkpoint).

        Returns once the job reports its query running; raises `JobRunnerError` (with the master's message or
        the log's tail) if the driver ends first or does not come up within `start_timeout`.
        """
        job_spec = JobSpec(flow, spec, spec_digest, self.base_dir)
        spark = job_spec.spark
        folder = self.jobs_dir / flow
        self.stop(flow)
        folder.mkdir(parents=True, exist_ok=True)
        spec_file = folder / "spec.json"
        job_spec.write(spec_file)
        log = folder / "driver.log"
        (folder / "log4j2.properties").write_text(_LOG4J2_FILE.replace("@LOG@", str(log)))
        checkpoint = job_spec.checkpoint_dir()
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        for stale in ("status.json", STOP_FILE):
            with contextlib.suppress(FileNotFoundError):
                (folder / stale).unlink()
        rest = RestClient(spark.rest_url, self.rest.timeout) if spark.rest_url else self.rest
        request = self.request(flow, spark, folder, spec_digest, checkpoint)
        with log.open("ab") as out:
            out.write(
                f"\n===== kmirror: submitting flow {flow} with {spec_digest} to {rest.url} at {_now()} =====\n".encode()
            )
        sid = rest.create(request)
        record = {
            "flow": flow,
            "submission_id": sid,
            "digest": spec_digest,
            "rest_url": rest.url,
            "master": spark.master,
            "started_at": time.time(),
        }
        _write_json(folder / "runner.json", record)
        self._wait_started(flow, rest, sid)

    def stop(self, flow: str) -> None:
        """Stop the flow's driver gracefully (finish the batch in flight); kill it after `stop_timeout`."""
        folder = self.jobs_dir / flow
        record = _read_json(folder / "runner.json")
        sid = record.get("submission_id")
        if not isinstance(sid, str):
            if isinstance(record.get("pid"), int):  # the flow ran under deploy: local before
                LocalRunner(self.base_dir, stop_timeout=self.stop_timeout).stop(flow)
            return
        rest = self._rest_of(record)
        driver = rest.status(sid)
        if not driver.active:
            return
        if driver.state == "RUNNING":
            (folder / STOP_FILE).write_text(f"{sid} {time.time()}\n")
            stopped = self._wait_inactive(rest, sid, self.stop_timeout)
        else:
            stopped = False  # queued or relaunching: no Python job to ask
        if not stopped:
            rest.kill(sid)
            if not self._wait_inactive(rest, sid, 30):
                raise JobRunnerError(f"the driver {sid} of flow {flow} did not stop after a kill request to {rest.url}")
        _write_json(folder / "runner.json", {**record, "stopped_at": time.time()})

    # -- the planner's input --------------------------------------------------------------------------------
    def status(self) -> JobStatus:
        jobs = {}
        try:
            for flow in self._flows():
                job = self.job(flow, strict=True)
                if isinstance(job, StandaloneJob):
                    jobs[flow] = JobInfo(flow, job.running, job.digest, self.kind, _detail(job))
                elif job is not None:  # a job left from deploy: local
                    jobs[flow] = JobInfo(flow, job.running, job.digest, "local", f"deploy: local, pid {job.pid}")
        except JobRunnerError:
            return JobStatus(known=False)
        return JobStatus(jobs)

    def job(self, flow: str, *, strict: bool = False) -> StandaloneJob | LocalJob | None:
        """The flow's `StandaloneJob` (a `LocalJob` if it last ran under deploy: local), None if never deployed.

        An unreachable REST server raises `JobRunnerError` when `strict`, else gives a job that is not running
        whose state says so.
        """
        folder = self.jobs_dir / flow
        record = _read_json(folder / "runner.json")
        sid = record.get("submission_id")
        if not isinstance(sid, str):
            return LocalRunner(self.base_dir).job(flow) if isinstance(record.get("pid"), int) else None
        status = _read_json(folder / "status.json")
        digest = status.get("digest") or record.get("digest")
        try:
            driver = self._rest_of(record).status(sid)
        except JobRunnerError as exc:
            if strict:
                raise
            unknown = "unknown (REST server unreachable)"
            return StandaloneJob(flow, folder, sid, digest, False, unknown, None, str(exc), None)
        running = driver.active
        state = status.get("state")
        if not running and state in (None, "starting", "running", "stopping"):
            state = (driver.state or "gone").lower() if driver.found else "gone"
        error = status.get("error") or (None if running else driver.message)
        return StandaloneJob(flow, folder, sid, digest, running, state, status.get("app_id"), error, driver)

    # -- plumbing -------------------------------------------------------------------------------------------
    def request(self, flow: str, spark: SparkSpec, folder: Path, digest: str, checkpoint: Path) -> dict[str, Any]:
        """The CreateSubmissionRequest of the flow's driver (no resolved secret in it)."""
        import pyspark

        props = dict(SPARK_DEFAULTS)
        props.update({k: _spark_value(v) for k, v in spark.conf.items() if not isinstance(v, SecretRef)})
        log4j = f"-Dlog4j2.configurationFile=file:{folder / 'log4j2.properties'}"
        props["spark.driver.extraJavaOptions"] = " ".join(
            p for p in (props.get("spark.driver.extraJavaOptions", ""), log4j) if p
        )
        jars = [p.resolve().as_uri() for p in job_jars()]
        props["spark.jars"] = ",".join([*jars, *filter(None, props.get("spark.jars", "").split(","))])
        props.setdefault("spark.pyspark.python", self.python)
        props.setdefault("spark.pyspark.driver.python", self.python)
        args = [
            "--kmirror-log", str(folder / "driver.log"),
            "--kmirror-stop-file", str(folder / STOP_FILE),
            "--spec", str(folder / "spec.json"),
            "--digest", digest,
            "--checkpoint", str(checkpoint),
        ]  # fmt: skip
        return create_request(
            app_name=f"kmirror-{flow}",
            entry=ENTRY,
            app_args=args,
            master=spark.master,
            spark_properties=props,
            environment={"PYSPARK_PYTHON": self.python, "PYSPARK_DRIVER_PYTHON": self.python},
            spark_version=pyspark.__version__,
        )

    def _flows(self) -> list[str]:
        if not self.jobs_dir.is_dir():
            return []
        return sorted(p.name for p in self.jobs_dir.iterdir() if (p / "runner.json").is_file())

    def _rest_of(self, record: Mapping[str, Any]) -> RestClient:
        """The REST server the driver was submitted to (the spec's rest_url may have moved since)."""
        url = record.get("rest_url")
        if isinstance(url, str) and url.rstrip("/") != self.rest.url:
            return RestClient(url, self.rest.timeout)
        return self.rest

    def _wait_inactive(self, rest: RestClient, sid: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not rest.status(sid).active:
                return True
            time.sleep(0.5)
        return False

    def _wait_started(self, flow: str, rest: RestClient, sid: str) -> None:
        folder = self.jobs_dir / flow
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            status = _read_json(folder / "status.json")
            if status.get("state") == "running":
                return
            driver = rest.status(sid)
            if not driver.active:
                why = status.get("error") or driver.message or f"driver {driver.state or 'gone'}"
                raise JobRunnerError(
                    f"the replication job of flow {flow} (driver {sid}) ended while starting ({why}). "
                    f"Last lines of {folder / 'driver.log'}:\n{_tail(folder / 'driver.log')}"
                )
            time.sleep(0.5)
        raise JobRunnerError(
            f"the replication job of flow {flow} did not report running within {self.start_timeout:.0f}s; "
            f"driver {sid} is left as it is (see the master's web UI and {folder / 'driver.log'}). A driver that "
            "stays SUBMITTED is waiting for a worker with enough free cores and memory."
        )


def _detail(job: StandaloneJob) -> str:
    if job.running and job.driver is not None:
        where = f" on {job.driver.worker}" if job.driver.worker else ""
        app = f", app {job.app_id}" if job.app_id else ""
        return f"driver {job.submission_id} {job.driver.state}{where}, job {job.state or 'starting'}{app}"
    reason = f": {job.error}" if job.error else ""
    return f"driver {job.submission_id} {job.state or 'gone'}{reason}; log: {job.log}"


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %z")
