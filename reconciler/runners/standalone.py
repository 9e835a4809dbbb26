"""`StandaloneRunner` (`spark.deploy: standalone`): each flow's job as a driver on a Spark standalone cluster.

The runner talks to the master's REST submission server (`spark.rest_url`, e.g. http://master:6066; the master
needs `spark.master.rest.enabled=true`). spark-submit refuses `--deploy-mode cluster` for Python applications on
a standalone master, but the REST protocol takes any main class (`rest.py`): the master launches a driver on a
worker, which runs the Python job there, supervised (`spark.driver.supervise`): a driver that dies is launched
again by the master, with no apply. The driver outlives kmirror; whether it runs comes from the master
(`GET /v1/submissions/status/<id>`), never from files of the checkout.

Identity: `deploy` returns the deployment (submission id, REST URL, checkpoint, folder, digest), which the
executor records in the state topic; `status` asks the master about each recorded driver, so any checkout of the
same file on any machine that reaches the master sees the same job, and an apply from a second checkout finds
the driver running and starts no other.

Files: the job's folder sits beside its checkpoint, `<checkpoint_root>/<state topic>/<flow>/` (layout.py), on the
filesystem the workers and every machine that runs kmirror share: spec.json, log4j2.properties, driver.log (the
Python job's output and the driver JVM's warnings), status.json (written by the job), runner.json (the
deployment, written at submission: a driver submitted by an apply killed before it recorded it is still found),
and `stop.request`. An `hdfs://` checkpoint root shares no path: the folder is a URI beside the checkpoint, which
the runner reads and writes through WebHDFS (`hadoop.py`, the Hadoop configuration of `spark.hadoop_conf_dir` or
`$HADOOP_CONF_DIR`) and the driver through Hadoop's FileSystem API (`standalone_entry.py --kmirror-folder`, as on
YARN); this host keeps a copy of the last status read in `$KMIRROR_HOME/jobs/<state topic>@<cluster id>/<flow>`,
which is what `job(flow).folder` names, and the driver's output stays in its folder on the worker. An `s3a:`
checkpoint root holds the checkpoints only: the folders (and what the jobs carry, S3A's jars among them) go under
`spark.job_folder_root`, an `hdfs://` URI or a shared path, and a removed flow's S3 checkpoint is deleted through
`object_store.py`.

The job carries its own Python and jars, as on YARN: apply copies, once per kmirror version and install, the packed
environment (`artifacts.job_env`), the driver's entry file and the job's jars to `<checkpoint_root>/_kmirror/envs/
<key>/` and submits the entry there as the driver's appResource (the worker downloads it into the driver's folder),
the archive as `--kmirror-env` (the entry unpacks it before importing kmirror) and as `spark.archives` (executors),
and the jars as `spark.jars`. The driver runs the base interpreter kmirror's venv was made from
(`sys._base_executable`), executors `./kmirror-env/bin/python`, a link to the same: a worker needs Java, Spark and
that Python at the same path, and no kmirror. A `spark.conf` with `spark.archives` or `spark.pyspark.python`
manages the environment itself: kmirror then sends this install's entry, jars and `sys.executable` (which the
workers need at the same paths).

Stop is graceful: the REST kill endpoint only destroys the driver JVM, which neither signals nor stops the Python
job. So the driver runs `standalone_entry.py`, which watches `stop.request` and sends its own process SIGTERM
when it appears: the job finishes the batch in flight, stops its query and exits 0 (driver FINISHED, not
relaunched). After `stop_timeout` the runner falls back to the kill endpoint.

Applications (`spark.application`): a flow's query in one supervised driver shared with other flows, its folder a
sub-folder of the application's folder on the shared path (`standalone_apps.py`); `deploy`, `stop`, `forget` and
`job` hand such a flow to it.

Secrets: the request carries only PYSPARK_PYTHON/PYSPARK_DRIVER_PYTHON and Spark settings without references.
`${env:..}` values are never sent: the master keeps (and with a recovery mode, persists) the driver's
description. The driver resolves references from the worker's environment (set them in the worker's
`conf/spark-env.sh` or its service unit), `${file:..}` from its filesystem.

Must not: decide whether a job should run (the planner does), or touch another flow's folder or driver.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.artifacts import filesystem_jars, job_jars
from reconciler.artifacts.job_env import job_env_archive
from reconciler.jobcontract.job_report import read_report
from reconciler.jobcontract.layout import (
    OBJECT_STORE_SCHEMES,
    CheckpointRoot,
    JobFolder,
    local_job_folder,
    scheme_of,
    yarn_folder,
)
from reconciler.jobcontract.spec import EffectiveSpec, JobSpec
from reconciler.resources.deployments import Deployment, StandaloneDeployment, deployment_of, mark_stopped
from reconciler.resources.job_status import JobInfo, JobStatus
from reconciler.runners.common import (
    JobRunnerError,
    checkpoint_for,
    checkpoint_missing,
    collect_status,
    folder_of,
    forget_job,
    job_info,
    log4j2_properties,
    manages_own_environment,
    now,
    read_json,
    spark_properties,
    tail,
    write_json,
    write_private,
)
from reconciler.runners.hadoop import HadoopClient
from reconciler.runners.object_store import forget_checkpoint
from reconciler.runners.rest import DriverStatus, RestClient, create_request
from reconciler.runners.standalone_apps import StandaloneApplications, application_of
from reconciler.spec.defaults import DEFAULT_STATE_TOPIC
from reconciler.spec.models import SparkSpec
from reconciler.spec.secrets import SecretRef

ENTRY = Path(__file__).parents[1] / "replication" / "standalone_entry.py"
STOP_FILE = "stop.request"
#: Where executors unpack the job's environment (`spark.archives` ...#kmirror-env); the entry uses the same name.
_ENV_DIR = "kmirror-env"
#: PythonRunner's Python file: the worker's copy of the submission's appResource (DriverRunner substitutes it).
_USER_JAR = "{{USER_JAR}}"


@dataclass(frozen=True)
class ShippedJob:
    """What a job carries to a worker, on the checkpoint root (paths, or URIs on HDFS): its environment, entry file
    and jars."""

    archive: Path | str
    entry: Path | str
    jars: tuple[Path | str, ...]
    python: str  # the driver's interpreter: the base Python the archive was packed from


def _uri(location: Path | str) -> str:
    return location if isinstance(location, str) else location.resolve().as_uri()


@dataclass(frozen=True)
class StandaloneJob:
    """What the runner knows about one flow's driver: from the master and the job's folder."""

    flow: str
    folder: Path
    submission_id: str | None
    digest: str | None
    running: bool
    state: str | None
    app_id: str | None
    error: str | None
    driver: DriverStatus | None
    checkpoint: str | None = None
    remote_folder: str | None = None  # the side files' folder on HDFS, when they are there
    #: The application whose driver runs the flow's query (its log is the application's); None: its own driver.
    application: str | None = None
    log_path: Path | None = None

    @property
    def log(self) -> Path:
        return self.log_path or self.folder / "driver.log"

    @property
    def log_location(self) -> str:
        """Where the driver's output is: the shared folder's driver.log, or (side files on HDFS) the driver's own
        folder on its worker, which this host does not have."""
        if self.remote_folder is None:
            return str(self.log)
        worker = self.driver.worker if self.driver is not None and self.driver.worker else None
        return worker_log_hint(self.submission_id or "?", worker)

    @property
    def host(self) -> str:
        """Where the driver (and its metrics endpoint) runs."""
        host = self.driver.host if self.driver is not None else None
        return host or "127.0.0.1"


def worker_log_hint(sid: str, worker: str | None) -> str:
    """Where a driver whose side files are on HDFS writes its output: Spark's standalone worker keeps a driver's
    stdout and stderr in the driver's folder under its work directory (`SPARK_WORKER_DIR`, default
    `$SPARK_HOME/work`), and its web UI shows them."""
    where = f"worker {worker}" if worker else "its worker"
    return (
        f"the driver's stdout and stderr on {where}, in $SPARK_WORKER_DIR/{sid}/ (default $SPARK_HOME/work/{sid}/; "
        f"also the worker's web UI, driver {sid}: logPage/?driverId={sid}&logType=stderr)"
    )


class StandaloneRunner:
    """Runs each flow's job as a driver on a Spark standalone cluster; see the module docstring."""

    kind = "standalone"

    def __init__(
        self,
        base_dir: Path,
        spark: SparkSpec,
        *,
        state_topic: str = DEFAULT_STATE_TOPIC,
        state_key: str | None = None,
        deployments: Mapping[str, Deployment] | None = None,
        stop_timeout: float = 150.0,
        start_timeout: float = 240.0,
        python: str = sys.executable,
        rest_timeout: float = 10.0,
    ) -> None:
        if spark.rest_url is None:
            raise JobRunnerError("spark.deploy 'standalone' needs spark.rest_url (e.g. http://master:6066)")
        self.base_dir = base_dir.resolve()
        self.spark = spark
        self.state_topic = state_topic
        #: What this state's folders and checkpoints are keyed by (`jobcontract.layout.state_key`).
        self.state_key = state_key or state_topic
        self.deployments: dict[str, Deployment] = dict(deployments or {})
        self.stop_timeout = stop_timeout
        self.start_timeout = start_timeout
        self.python = python
        self.rest_timeout = rest_timeout
        key = spark.rest_jws_secret_key
        # Resolved here, kept in memory: the master's JWSFilter key (see rest.py), never written or logged.
        self._signing_key = (
            None if key is None else key.resolve(self.base_dir) if isinstance(key, SecretRef) else str(key)
        )
        self.rest = self._client(spark.rest_url)
        self._hadoop: HadoopClient | None = None
        self.apps = StandaloneApplications(self)

    @property
    def hadoop(self) -> HadoopClient:
        """WebHDFS of the Hadoop configuration (`spark.hadoop_conf_dir`, else `$HADOOP_CONF_DIR`): an hdfs:// root."""
        if self._hadoop is None:
            conf_dir = self._conf_dir()
            if conf_dir is None:
                raise JobRunnerError(
                    f"the jobs' folders of spark.checkpoint_root {self.spark.checkpoint_root!r} are on HDFS: kmirror "
                    "reads their files through WebHDFS and needs the Hadoop client configuration; set "
                    "spark.hadoop_conf_dir or "
                    "$HADOOP_CONF_DIR to the folder with core-site.xml and hdfs-site.xml"
                )
            self._hadoop = HadoopClient.from_conf_dir(conf_dir, yarn=False)
        return self._hadoop

    def _conf_dir(self) -> Path | None:
        configured = self.spark.hadoop_conf_dir or os.environ.get("HADOOP_CONF_DIR")
        if not configured:
            return None
        path = Path(configured).expanduser()
        return (path if path.is_absolute() else self.base_dir / path).resolve()

    def _folders(self, spark: SparkSpec | None = None) -> CheckpointRoot:
        """Where the jobs' folders (and what the jobs carry) live: beside the checkpoints, or, for a checkpoint root
        on object storage (s3a:), under `spark.job_folder_root` (an hdfs: URI or a shared path): only the
        checkpoint goes to the object store, kmirror reads the side files with no S3 credentials."""
        spark = spark or self.spark
        if scheme_of(spark.checkpoint_root) in OBJECT_STORE_SCHEMES and spark.job_folder_root:
            return CheckpointRoot.parse(spark.job_folder_root, self.base_dir)
        return CheckpointRoot.parse(spark.checkpoint_root, self.base_dir)

    def remote_folder(self, flow: str, previous: Deployment | None = None) -> str | None:
        """The flow's folder as a URI when its side files are on HDFS (not a shared path), else None."""
        found = previous if previous is not None else self._previous(flow)
        recorded = found.folder if found is not None else None
        if recorded:
            return recorded if "://" in recorded else None
        root = self._folders()
        return None if root.path is not None else yarn_folder(root, self.state_key, flow)

    def folder(self, flow: str, previous: Deployment | None = None) -> JobFolder:
        """The flow's folder: where its deployment put it, else beside the keyed checkpoint; for a folder on HDFS,
        this host's copy of its status (as the YARN runner keeps)."""
        previous = previous if previous is not None else self._previous(flow)
        if self.remote_folder(flow, previous) is not None:
            return local_job_folder(self.state_key, flow)
        recorded = folder_of(previous)
        if recorded is not None:
            return recorded
        folder = self._folders().job_folder(self.state_key, flow)
        if folder is None:
            raise JobRunnerError(
                f"spark.checkpoint_root {self.spark.checkpoint_root!r} is not a shared filesystem path; deploy "
                "'standalone' keeps each job's files beside its checkpoint"
            )
        return folder

    # -- the executor's protocol ----------------------------------------------------------------------------
    def deploy(self, flow: str, spec: EffectiveSpec, spec_digest: str) -> StandaloneDeployment:
        """Submit the flow's job with `spec`, stopping a running one first (it resumes from its checkpoint).

        Returns the deployment once the job reports its query running; raises `JobRunnerError` (with the master's
        message or the log's tail) if the driver ends first or does not come up within `start_timeout`.
        """
        previous = self._previous(flow)
        if spec.spark.application is not None:  # a query in an application's driver (standalone_apps.py)
            if application_of(previous) != spec.spark.application:
                self.stop(flow)  # its own driver, or its query in another application: it moves, on its checkpoint
            return self.apps.deploy(flow, spec, spec_digest, previous)
        job_spec = JobSpec.for_deploy(flow, spec, spec_digest, self.base_dir, self.state_topic, previous)
        spark = job_spec.spark
        self.stop(flow)
        if isinstance(previous, StandaloneDeployment) and previous.application is not None:  # moving out of an
            # application: the flow's own driver gets this state's keyed folder, not the application's sub-folder
            self.deployments.pop(flow, None)
            previous = previous.model_copy(update={"folder": None, "application": None})
        checkpoint = checkpoint_for(
            flow, CheckpointRoot.parse(spark.checkpoint_root, self.base_dir), self.state_key, previous
        )
        root = self._folders(spark)  # where the job's folder and what it carries go: beside the checkpoints, or not
        if root.path is None:
            return self._deploy_remote(flow, job_spec, spark, root, checkpoint, previous)
        folder = self.folder(flow, previous) if previous is not None else root.job_folder(self.state_key, flow)
        if folder is None:
            raise JobRunnerError(f"spark.checkpoint_root {spark.checkpoint_root!r} is not a shared filesystem path")
        folder.path.mkdir(parents=True, exist_ok=True)
        job_spec.write(folder.spec)
        write_private(folder.path / "log4j2.properties", log4j2_properties("file", folder.log))
        if "://" not in checkpoint:
            Path(checkpoint).parent.mkdir(parents=True, exist_ok=True)
        for stale in (folder.status, folder.stop):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        rest = self._client(spark.rest_url) if spark.rest_url else self.rest
        resume = checkpoint_missing(checkpoint, previous) is not False
        shipped = self.ship(root, spark, checkpoint)
        request = self.request(flow, spark, folder, spec_digest, checkpoint, resume_from_syncs=resume, shipped=shipped)
        with folder.log.open("ab") as out:
            banner = f"\n===== kmirror: submitting flow {flow} with {spec_digest} to {rest.url} at {now()} =====\n"
            out.write(banner.encode())
        sid = rest.create(request)
        record = _submitted(flow, sid, rest, job_spec, str(folder.path), checkpoint, shipped)
        write_json(folder.runner, record.model_dump(mode="json"))
        self.deployments[flow] = record
        self._wait_started(flow, folder, rest, sid)
        return record

    def stop(self, flow: str) -> None:
        """Stop the flow's driver gracefully (finish the batch in flight); kill it after `stop_timeout`."""
        previous = self._previous(flow)
        sid = previous.submission_id if isinstance(previous, StandaloneDeployment) else None
        if previous is None or sid is None:
            return
        if isinstance(previous, StandaloneDeployment) and previous.application is not None:
            self.apps.stop(flow, previous)  # only its query: the application's other flows run on
            return
        folder = self.folder(flow, previous)
        remote = self.remote_folder(flow, previous)
        rest = self._rest_of(previous)
        driver = rest.status(sid)
        if not driver.active:
            return
        if driver.state == "RUNNING":
            request = f"{sid} {time.time()}\n"
            if remote is not None:
                self.hadoop.write(f"{remote}/{STOP_FILE}", request.encode())
            else:
                write_private(folder.stop, request)
            stopped = self._wait_inactive(rest, sid, self.stop_timeout)
        else:
            stopped = False  # queued or relaunching: no Python job to ask
        if not stopped:
            rest.kill(sid)
            if not self._wait_inactive(rest, sid, 30):
                raise JobRunnerError(f"the driver {sid} of flow {flow} did not stop after a kill request to {rest.url}")
        if remote is not None:
            self.deployments[flow] = mark_stopped(previous, time.time())
            return
        written = read_json(folder.runner)
        if written:
            write_json(folder.runner, mark_stopped(deployment_of(written), time.time()).model_dump(mode="json"))

    def forget(self, flow: str) -> None:
        """Delete the stopped job's checkpoint and its folder's runner record: the flow is gone from the file."""
        previous = self._previous(flow)
        remote = self.remote_folder(flow, previous) if previous is not None else None
        if isinstance(previous, StandaloneDeployment) and previous.application is not None:
            self.apps.forget(flow, previous)
        elif previous is not None and remote is not None:
            checkpoint = previous.checkpoint
            if checkpoint is not None and checkpoint.startswith("hdfs:"):
                self.hadoop.delete(checkpoint, recursive=True)
            self.hadoop.delete(f"{remote}/runner.json")
            with contextlib.suppress(FileNotFoundError):
                self.folder(flow, previous).runner.unlink()
        elif previous is not None:
            forget_job(self.folder(flow, previous), previous)
        if previous is not None:  # on S3: deleted with the job's settings (references resolve here)
            forget_checkpoint(previous.checkpoint, self.spark, self.base_dir, self._conf_dir())
        self.deployments.pop(flow, None)

    # -- the planner's input --------------------------------------------------------------------------------
    def status(self) -> JobStatus:
        """Every driver this state topic's applies deployed, as the master reports it."""
        return collect_status(self._flows(), self.info)

    def info(self, flow: str) -> JobInfo | None:
        previous = self._previous(flow)
        job = self.job(flow, strict=True)
        if job is None:
            return None
        host = job.driver.host if job.driver is not None else None
        return job_info(flow, job, previous, self.kind, _detail(job), host)

    def job(self, flow: str, *, strict: bool = False) -> StandaloneJob | None:
        """The flow's `StandaloneJob`, None if never deployed.

        An unreachable REST server raises `JobRunnerError` when `strict`, else gives a job that is not running
        whose state says so.
        """
        previous = self._previous(flow)
        sid = previous.submission_id if isinstance(previous, StandaloneDeployment) else None
        if previous is None or sid is None:
            return None
        if isinstance(previous, StandaloneDeployment) and previous.application is not None:
            return self._app_job(flow, previous, strict=strict)
        folder = self.folder(flow, previous)
        remote = self.remote_folder(flow, previous)
        if remote is not None:
            try:
                self._copy_status(remote, folder)
            except JobRunnerError as exc:
                if strict:
                    raise
                unknown = "unknown (NameNode unreachable)"
                return StandaloneJob(
                    flow, folder.path, sid, previous.digest, False, unknown, None, str(exc), None, None, remote
                )
        status = read_report(folder.status)
        digest = status.get("digest") or previous.digest
        checkpoint = previous.checkpoint
        try:
            driver = self._rest_of(previous).status(sid)
        except JobRunnerError as exc:
            if strict:
                raise
            unknown = "unknown (REST server unreachable)"
            return StandaloneJob(
                flow, folder.path, sid, digest, False, unknown, None, str(exc), None, checkpoint, remote
            )
        running = driver.active
        state: str | None = status.get("state")
        if not running and state in (None, "starting", "running", "stopping", "restarting"):
            state = (driver.state or "gone").lower() if driver.found else "gone"
        error = status.get("error") or (None if running else driver.message)
        return StandaloneJob(
            flow, folder.path, sid, digest, running, state, status.get("app_id"), error, driver, checkpoint, remote
        )

    def _app_job(self, flow: str, record: StandaloneDeployment, *, strict: bool) -> StandaloneJob:
        """A flow whose query runs in an application (`standalone_apps.py`): its sub-folder, the application's
        driver as the master reports it."""
        try:
            folder, app, driver, running = self.apps.state(flow, record)
        except JobRunnerError as exc:
            if strict:
                raise
            folder = JobFolder(Path(str(record.folder)))
            status = read_report(folder.status)
            unknown = "unknown (REST server unreachable)"
            return StandaloneJob(
                flow, folder.path, record.submission_id, status.get("digest") or record.digest, False, unknown,
                None, str(exc), None, record.checkpoint, application=record.application,
            )  # fmt: skip
        status = read_report(folder.status)
        state: str | None = status.get("state")
        if not running and state in (None, "starting", "running", "stopping", "restarting"):
            found = driver.status
            state = (found.state or "gone").lower() if found is not None and found.found else "gone"
        error = status.get("error") or (None if running or driver.status is None else driver.status.message)
        return StandaloneJob(
            flow,
            folder.path,
            driver.submission_id or record.submission_id,
            status.get("digest") or record.digest,
            running,
            state,
            status.get("app_id"),
            error,
            driver.status,
            record.checkpoint,
            record.folder if record.folder and "://" in record.folder else None,  # on HDFS: its log is on the worker
            application=record.application,
            log_path=app.log,
        )

    # -- plumbing -------------------------------------------------------------------------------------------
    def request(
        self,
        flow: str,
        spark: SparkSpec,
        folder: JobFolder,
        digest: str,
        checkpoint: str,
        *,
        resume_from_syncs: bool = False,
        shipped: ShippedJob | None = None,
        remote: str | None = None,
    ) -> dict[str, Any]:
        """The CreateSubmissionRequest of the flow's driver (no resolved secret in it). With `shipped`, the driver
        runs the shipped entry and environment (see the module docstring); without, this install's."""
        if remote is None:
            args = [
                "--kmirror-log", str(folder.log),
                "--kmirror-stop-file", str(folder.stop),
                "--spec", str(folder.spec),
            ]  # fmt: skip
        else:
            args = ["--kmirror-folder", remote, "--spec", f"{remote}/spec.json"]
        args += ["--digest", digest, "--checkpoint", checkpoint]
        if resume_from_syncs:
            args.append("--resume-from-syncs")
        # a folder on HDFS: the driver JVM's log stays in its folder on the worker
        log4j = folder.path / "log4j2.properties" if remote is None else None
        return self.submission(f"kmirror-{flow}", spark, args, checkpoint, shipped=shipped, log4j=log4j)

    def submission(
        self,
        app_name: str,
        spark: SparkSpec,
        args: list[str],
        checkpoint: str,
        *,
        shipped: ShippedJob | None,
        log4j: Path | None,
    ) -> dict[str, Any]:
        """The CreateSubmissionRequest of a driver running `standalone_entry.py args`: a flow's job (`request`) or an
        application's (`standalone_apps.py`); its jars are the job's and `checkpoint`'s filesystem's."""
        import pyspark

        props = spark_properties(spark)
        if log4j is not None:
            option = f"-Dlog4j2.configurationFile=file:{log4j}"
            props["spark.driver.extraJavaOptions"] = " ".join(
                p for p in (props.get("spark.driver.extraJavaOptions", ""), option) if p
            )
        jars = [_uri(p) for p in (shipped.jars if shipped else [*job_jars(), *filesystem_jars(checkpoint)])]
        props["spark.jars"] = ",".join([*jars, *filter(None, props.get("spark.jars", "").split(","))])
        if shipped is not None:
            props["spark.archives"] = f"{_uri(shipped.archive)}#{_ENV_DIR}"
            executor_python, driver_python = f"./{_ENV_DIR}/bin/python", shipped.python
            props["spark.pyspark.python"], props["spark.pyspark.driver.python"] = executor_python, driver_python
            args = [*args, "--kmirror-env", str(shipped.archive)]
        else:
            props.setdefault("spark.pyspark.python", self.python)
            props.setdefault("spark.pyspark.driver.python", self.python)
            executor_python = driver_python = self.python
        return create_request(
            app_name=app_name,
            entry=_uri(shipped.entry) if shipped else ENTRY,
            python_file=_USER_JAR if shipped else None,
            app_args=args,
            master=str(spark.master),
            spark_properties=props,
            environment={"PYSPARK_PYTHON": executor_python, "PYSPARK_DRIVER_PYTHON": driver_python},
            spark_version=pyspark.__version__,
        )

    def ship(self, root: CheckpointRoot, spark: SparkSpec, checkpoint: str = "") -> ShippedJob | None:
        """Copy the job's environment, entry file and jars to `<root>/_kmirror/envs/<key>/` (once per key: kmirror's
        version, source and installed packages); None when `spark.conf` manages the environment itself."""
        if manages_own_environment(spark):
            return None
        archive, _built = job_env_archive()
        python = str(Path(sys._base_executable))  # type: ignore[attr-defined]
        if root.path is None:
            base = f"{root.uri}/_kmirror/envs/{archive.parent.name}"
            return ShippedJob(
                archive=self.hadoop.upload_once(archive, f"{base}/{archive.name}"),
                entry=self.hadoop.upload_once(ENTRY, f"{base}/{ENTRY.name}"),
                jars=tuple(self.hadoop.upload_once(jar, f"{base}/jars/{jar.name}") for jar in _jars(checkpoint)),
                python=python,
            )
        shared = root.path / "_kmirror" / "envs" / archive.parent.name
        jars = tuple(_copy_once(jar, shared / "jars" / jar.name) for jar in _jars(checkpoint))
        return ShippedJob(
            archive=_copy_once(archive, shared / archive.name),
            entry=_copy_once(ENTRY, shared / ENTRY.name),
            jars=jars,
            python=python,
        )

    def _copy_status(self, remote: str, folder: JobFolder) -> None:
        """This host's copy of the job's status.json on HDFS (removed when there is none)."""
        data = self.hadoop.read(f"{remote}/status.json")
        if data:
            folder.path.mkdir(parents=True, exist_ok=True)
            folder.status.write_bytes(data)
        else:
            with contextlib.suppress(FileNotFoundError):
                folder.status.unlink()

    def _deploy_remote(
        self,
        flow: str,
        job_spec: JobSpec,
        spark: SparkSpec,
        root: CheckpointRoot,
        checkpoint: str,
        previous: Deployment | None,
    ) -> StandaloneDeployment:
        """`deploy` with the job's folder on HDFS: its side files written and read through WebHDFS."""
        remote = self.remote_folder(flow, previous) or yarn_folder(root, self.state_key, flow)
        local = self.folder(flow, StandaloneDeployment(folder=remote))
        local.path.mkdir(parents=True, exist_ok=True)
        job_spec.write(local.spec)
        self.hadoop.mkdirs(remote)
        for stale in ("status.json", STOP_FILE):
            self.hadoop.delete(f"{remote}/{stale}")
        with contextlib.suppress(FileNotFoundError):
            local.status.unlink()
        self.hadoop.write(f"{remote}/spec.json", local.spec.read_bytes())
        rest = self._client(spark.rest_url) if spark.rest_url else self.rest
        shipped = self.ship(root, spark, checkpoint)
        resume = previous is not None  # the job checks its checkpoint itself; without offsets, the syncs
        request = self.request(
            flow, spark, local, job_spec.digest, checkpoint, resume_from_syncs=resume, shipped=shipped, remote=remote
        )
        sid = rest.create(request)
        record = _submitted(flow, sid, rest, job_spec, remote, checkpoint, shipped)
        written = record.model_dump(mode="json")
        self.hadoop.write(f"{remote}/runner.json", json.dumps(written, indent=2, sort_keys=True).encode())
        write_json(local.runner, written)
        self.deployments[flow] = record
        self._wait_started(flow, local, rest, sid, remote)
        return record

    def _previous(self, flow: str) -> Deployment | None:
        """The flow's last deployment: as the state topic recorded it, else as its shared folder has it (a driver
        submitted by an apply that was killed before it could record it)."""
        recorded = self.deployments.get(flow)
        if recorded is not None:
            return recorded
        root = self._folders()
        folder = root.job_folder(self.state_key, flow)
        if folder is not None:
            written = read_json(folder.runner)
            found = [r for r in (deployment_of(written) if written else None, self.apps.written(flow)) if r]
            return max(found, key=lambda r: r.started_at or 0.0) if found else None
        try:
            data = self.hadoop.read(f"{yarn_folder(root, self.state_key, flow)}/runner.json")
            found = json.loads(data) if data else {}
        except (JobRunnerError, ValueError):
            return None
        return deployment_of(found) if isinstance(found, dict) and found.get("runner") == self.kind else None

    def _flows(self) -> list[str]:
        flows = set(self.deployments)
        folder = self._folders().job_folder(self.state_key, "x")
        if folder is not None and folder.path.parent.is_dir():
            flows |= {p.name for p in folder.path.parent.iterdir() if (p / "runner.json").is_file()}
            flows |= self.apps.flows()
        return sorted(flows)

    def _rest_of(self, record: Deployment) -> RestClient:
        """The REST server the driver was submitted to (the spec's rest_url may have moved since)."""
        url = record.rest_url if isinstance(record, StandaloneDeployment) else None
        if url and url.rstrip("/") != self.rest.url:
            return self._client(url)
        return self.rest

    def _client(self, url: str) -> RestClient:
        return RestClient(url, self.rest_timeout, signing_key=self._signing_key)

    def _wait_inactive(self, rest: RestClient, sid: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not rest.status(sid).active:
                return True
            time.sleep(0.5)
        return False

    def _wait_started(
        self, flow: str, folder: JobFolder, rest: RestClient, sid: str, remote: str | None = None
    ) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if remote is not None:
                self._copy_status(remote, folder)
            status = read_report(folder.status)
            if status.get("state") == "running":
                return
            driver = rest.status(sid)
            failed = status.get("state") == "failed"
            if failed or not driver.active:
                if driver.active:  # supervised: the master would launch it again and again; it cannot start
                    rest.kill(sid)
                why = status.get("error") or driver.message or f"driver {driver.state or 'gone'}"
                log = (
                    f"Last lines of {folder.log}:\n{tail(folder.log)}"
                    if remote is None
                    else f"Its log: {worker_log_hint(sid, driver.worker)}"
                )
                raise JobRunnerError(
                    f"the replication job of flow {flow} (driver {sid}) ended while starting ({why}). {log}"
                )
            time.sleep(0.5)
        log = str(folder.log) if remote is None else worker_log_hint(sid, None)
        raise JobRunnerError(
            f"the replication job of flow {flow} did not report running within {self.start_timeout:.0f}s; "
            f"driver {sid} is left as it is (see the master's web UI and {log}). A driver that "
            "stays SUBMITTED is waiting for a worker with enough free cores and memory."
        )


def _submitted(
    flow: str, sid: str, rest: RestClient, job_spec: JobSpec, folder: str, checkpoint: str, shipped: ShippedJob | None
) -> StandaloneDeployment:
    """The deployment record of a driver the master accepted as `sid`, its side files in `folder`."""
    record = StandaloneDeployment(
        flow=flow,
        submission_id=sid,
        digest=job_spec.digest,
        rest_url=rest.url,
        master=job_spec.spark.master,
        folder=folder,
        checkpoint=checkpoint,
        eos_flow=job_spec.eos_name,
        generation=job_spec.generation,
        started_at=time.time(),
    )
    if shipped:  # set only when shipped: a record's JSON holds the fields it was built with
        record = record.model_copy(update={"job_environment": str(shipped.archive)})
    return record


def _jars(checkpoint: str) -> list[Path]:
    """The job's jars: the Kafka connector, kmirror's, and the checkpoint filesystem's (S3A for s3a:)."""
    return [*job_jars(), *filesystem_jars(checkpoint)]


def _copy_once(source: Path, target: Path) -> Path:
    """`target`, copied from `source` unless a file of the same size is there (the key names the content)."""
    if target.is_file() and target.stat().st_size == source.stat().st_size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{time.monotonic_ns()}.tmp")
    shutil.copyfile(source, partial)
    partial.replace(target)
    return target


def _detail(job: StandaloneJob) -> str:
    if job.running and job.driver is not None:
        where = f" on {job.driver.worker}" if job.driver.worker else ""
        app = f", app {job.app_id}" if job.app_id else ""
        return f"driver {job.submission_id} {job.driver.state}{where}, job {job.state or 'starting'}{app}"
    reason = f": {job.error}" if job.error else ""
    return f"driver {job.submission_id} {job.state or 'gone'}{reason}; log: {job.log_location}"
