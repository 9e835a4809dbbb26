"""`YarnRunner` (`spark.deploy: yarn`): each flow's job as a cluster-mode Spark application on a YARN
ResourceManager, its driver in the ApplicationMaster's container, supervised by YARN's attempts
(`yarn.resourcemanager.am.max-attempts`, or `spark.yarn.maxAppAttempts`) and by the job's own query restarts.

Submission: `spark-submit --master yarn --deploy-mode cluster` from the driver home on this machine, with the Hadoop
client configuration of `spark.hadoop_conf_dir` (else `$HADOOP_CONF_DIR`) and
`spark.yarn.submit.waitAppCompletion=false`: it returns once YARN accepted the application, whose id
(`application_<cluster>_<n>`) is the deployment's identity, recorded in the state topic. Any checkout of the same
file on any machine that reaches the ResourceManager sees the same job.

Files: the job's folder sits beside its checkpoint on HDFS, `<checkpoint_root>/<state topic>@<cluster id>/<flow>/`
(a URI: `jobcontract.layout.yarn_folder`; with an `s3a:` checkpoint root, only the checkpoint is on S3 and the
folder is under `spark.job_folder_root`, default `<fs.defaultFS>/user/<user>/kmirror`, on the cluster's HDFS:
kmirror reads it with no S3 client or credentials; S3A's pinned jars go with `--jars`): spec.json (written by the
runner; YARN localizes it into the driver's container, `--files`, so every attempt reads the same spec), status.json
(the job's report, mirrored there by `replication/yarn_entry.py` through Hadoop's FileSystem API), runner.json (the
deployment, written at submission) and `stop.request`. The runner reads and writes them through WebHDFS
(`hadoop.py`). A local copy of the last status read, with the spark-submit output (`submit.log`), sits in this
host's job folder (`$KMIRROR_HOME/jobs/<state topic>@<cluster id>/<flow>`), which is what `job(flow).folder` names
for `kmirror status`.

Status: the ResourceManager's REST API (`/ws/v1/cluster/apps/<id>`: state, final status, diagnostics; its
attempts), plus the job's status.json. Stop is graceful: the runner writes `stop.request`, the driver's watcher
sends the job SIGTERM, the job finishes the batch in flight and exits 0 (FINISHED/SUCCEEDED, no new attempt);
after `stop_timeout` (or when the application has no driver yet) the runner kills it through the RM.

The job's Python: the packed environment (`artifacts.job_env`, built once per kmirror version and install), uploaded
once to `<checkpoint_root>/_kmirror/envs/` and shipped as `spark.archives`; its `bin/python` (a link to the same
base interpreter, which the nodes need at the same path) runs the driver and the executors, so no node needs
kmirror. A `spark.conf` with `spark.archives` or `spark.pyspark.python` manages the environment itself. Spark's own
jars are taken from this machine's driver home (`spark.yarn.jars=local:...`, nothing uploaded), which the
NodeManagers need at the same path unless `spark.conf` sets `spark.yarn.archive`.

Secrets: nothing resolved is put in the submission (YARN keeps an application's launch context and shows its
environment). The driver resolves `${env:..}` from its container's environment and `${file:..}` from the container's
filesystem. S3 credentials come from the cluster (the instance profile, core-site.xml, or a credential provider on
HDFS named in `spark.conf`; references for them are refused at load), and a removed flow's S3 checkpoint is deleted
with the same settings (`object_store.py`). Kerberos: the runner passes no keytab or principal; spark-submit on this
machine uses the ticket cache of the user running kmirror to obtain delegation tokens (HDFS, YARN) for the
application, and WebHDFS and the RM REST API are reached with simple authentication only.

Must not: decide whether a job should run (the planner does), or touch another flow's folder or application.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from reconciler.artifacts import filesystem_jars, job_jars
from reconciler.artifacts.driver_home import driver_home, spark_env
from reconciler.artifacts.job_env import job_env_archive
from reconciler.jobcontract.job_report import JobReport, read_report
from reconciler.jobcontract.layout import (
    OBJECT_STORE_SCHEMES,
    CheckpointRoot,
    JobFolder,
    local_job_folder,
    scheme_of,
    yarn_folder,
)
from reconciler.jobcontract.spec import EffectiveSpec, JobSpec
from reconciler.resources.deployments import Deployment, YarnDeployment, deployment_of, mark_stopped
from reconciler.resources.job_status import JobInfo, JobStatus
from reconciler.runners.common import (
    JobRunnerError,
    checkpoint_for,
    collect_status,
    job_info,
    log4j2_properties,
    manages_own_environment,
    now,
    spark_properties,
    tail,
    write_json,
    write_private,
    write_properties,
)
from reconciler.runners.hadoop import ACTIVE_STATES, HadoopClient, YarnApp
from reconciler.runners.object_store import forget_checkpoint
from reconciler.spec.defaults import DEFAULT_STATE_TOPIC
from reconciler.spec.models import SparkSpec

ENTRY = Path(__file__).parents[1] / "replication" / "yarn_entry.py"
_APP_ID = re.compile(r"\b(application_\d+_\d+)\b")
#: The driver's JVM log configuration, shipped with the application (`--files`), read from the container's folder.
_LOG4J = "kmirror-log4j2.properties"
#: Where YARN unpacks the job's environment in each container (`spark.archives` ...#kmirror-env).
_ENV_DIR = "kmirror-env"


@dataclass(frozen=True)
class YarnJob:
    """What the runner knows about one flow's application: from the ResourceManager and the job's status.json."""

    flow: str
    folder: Path  # this host's copy of the job's status (see the module docstring)
    remote_folder: str
    app_id: str | None
    digest: str | None
    running: bool
    state: str | None
    error: str | None
    app: YarnApp | None
    attempts: int
    checkpoint: str | None = None

    @property
    def host(self) -> str:
        """Where the driver (and its metrics endpoint) runs: the ApplicationMaster's host."""
        report = read_report(self.folder / "status.json")
        host = report.get("host") or (self.app or {}).get("amHostHttpAddress", "").split(":")[0]
        return str(host or "127.0.0.1")

    @property
    def yarn_state(self) -> str | None:
        return None if self.app is None else str(self.app.get("state"))


class YarnRunner:
    """Runs each flow's job as a cluster-mode application on YARN; see the module docstring."""

    kind = "yarn"

    def __init__(
        self,
        base_dir: Path,
        spark: SparkSpec,
        *,
        state_topic: str = DEFAULT_STATE_TOPIC,
        state_key: str | None = None,
        deployments: Mapping[str, Deployment] | None = None,
        stop_timeout: float = 150.0,
        start_timeout: float = 300.0,
        python: str = sys.executable,
        root: Path | None = None,
    ) -> None:
        self.base_dir = base_dir.resolve()
        self.spark = spark
        self.state_topic = state_topic
        #: What this state's folders and checkpoints are keyed by (`jobcontract.layout.state_key`).
        self.state_key = state_key or state_topic
        self.deployments: dict[str, Deployment] = dict(deployments or {})
        self.stop_timeout = stop_timeout
        self.start_timeout = start_timeout
        self.python = python
        self.root = root
        self.conf_dir = self._conf_dir(spark)
        self.hadoop = HadoopClient.from_conf_dir(self.conf_dir)

    def _conf_dir(self, spark: SparkSpec) -> Path:
        configured = spark.hadoop_conf_dir or os.environ.get("HADOOP_CONF_DIR")
        if not configured:
            raise JobRunnerError(
                "spark.deploy 'yarn' needs the Hadoop client configuration: set spark.hadoop_conf_dir or "
                "$HADOOP_CONF_DIR to the folder with core-site.xml and yarn-site.xml"
            )
        path = Path(configured).expanduser()
        return (path if path.is_absolute() else self.base_dir / path).resolve()

    @property
    def folders(self) -> str | None:
        """Where the jobs' folders go when not beside their checkpoints: for an object-store checkpoint root (s3a:),
        `spark.job_folder_root`, else `<fs.defaultFS>/user/<user>/kmirror` on the cluster's HDFS. Only the
        checkpoint goes to the object store: kmirror reads the side files through WebHDFS, with no S3 credentials."""
        if scheme_of(self.spark.checkpoint_root) not in OBJECT_STORE_SCHEMES:
            return None
        return self.spark.job_folder_root or self.hadoop.home_folder("kmirror")

    def local_folder(self, flow: str) -> JobFolder:
        return local_job_folder(self.state_key, flow, self.root)

    def folder(self, flow: str, previous: Deployment | None = None) -> str:
        """The flow's folder (a URI): where its deployment put it, else beside the keyed checkpoint."""
        found = previous if previous is not None else self._previous(flow)
        if found is not None and found.folder:
            return found.folder
        root = CheckpointRoot.parse(self.spark.checkpoint_root, self.base_dir)
        return yarn_folder(root, self.state_key, flow, self.folders)

    # -- the executor's protocol ----------------------------------------------------------------------------
    def deploy(self, flow: str, spec: EffectiveSpec, spec_digest: str) -> YarnDeployment:
        """Submit the flow's application with `spec`, stopping a running one first (it resumes from its checkpoint).

        Returns the deployment once the job reports its query running; raises `JobRunnerError` (with YARN's
        diagnostics or spark-submit's output) if the application ends first or does not come up in time.
        """
        previous = self._previous(flow)
        job_spec = JobSpec.for_deploy(flow, spec, spec_digest, self.base_dir, self.state_topic, previous)
        spark = job_spec.spark
        self.stop(flow)
        root = CheckpointRoot.parse(spark.checkpoint_root, self.base_dir)
        checkpoint = checkpoint_for(flow, root, self.state_key, previous)
        remote = (
            self.folder(flow, previous)
            if previous is not None
            else yarn_folder(root, self.state_key, flow, self.folders)
        )
        local = self.local_folder(flow)
        local.path.mkdir(parents=True, exist_ok=True)
        job_spec.write(local.spec)
        write_private(local.path / _LOG4J, log4j2_properties("console"))
        self.hadoop.mkdirs(remote)
        for stale in ("status.json", "stop.request"):
            self.hadoop.delete(f"{remote}/{stale}")
        with contextlib.suppress(FileNotFoundError):
            local.status.unlink()
        self.hadoop.write(f"{remote}/spec.json", local.spec.read_bytes())
        props = self.properties(flow, spark)
        env_uri = self._job_environment(root, props)
        write_properties(local.path / "spark.properties", props)
        home = driver_home()
        cmd = [
            str(home / "bin" / "spark-submit"),
            "--master", "yarn",
            "--deploy-mode", "cluster",
            "--name", f"kmirror-{flow}",
            "--properties-file", str(local.path / "spark.properties"),
            "--jars", ",".join(str(p) for p in [*job_jars(), *filesystem_jars(checkpoint)]),
            "--files", f"{remote}/spec.json,{local.path / _LOG4J}",
            str(ENTRY),
            "--kmirror-folder", remote,
            "--spec", "spec.json",
            "--digest", spec_digest,
            "--checkpoint", checkpoint,
        ]  # fmt: skip
        if previous is not None:
            cmd.append("--resume-from-syncs")  # the job checks its checkpoint itself; without offsets, the syncs
        env = {
            **spark_env(home, self.python),
            "HADOOP_CONF_DIR": str(self.conf_dir),
            # pyspark comes with the interpreter the job runs (spark.pyspark.python), not as a zip uploaded per app
            "PYSPARK_ARCHIVES_PATH": _pyspark_archives(),
        }
        env.pop("YARN_CONF_DIR", None)
        submit_log = local.path / "submit.log"
        with submit_log.open("ab") as out:
            os.chmod(submit_log, 0o600)
            out.write(f"\n===== kmirror: submitting flow {flow} with {spec_digest} at {now()} =====\n".encode())
            out.flush()
            started = time.time()
            try:
                result = subprocess.run(
                    cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=local.path, env=env,
                    timeout=self.start_timeout, check=False,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                raise JobRunnerError(
                    f"spark-submit of flow {flow} did not return within {self.start_timeout:.0f}s; see {submit_log}"
                ) from None
        text = submit_log.read_text(errors="replace").rsplit("===== kmirror: submitting", 1)[-1]
        found = _APP_ID.findall(text)
        if result.returncode != 0 or not found:
            raise JobRunnerError(
                f"spark-submit of flow {flow} to YARN failed (exit code {result.returncode}). Last lines of "
                f"{submit_log}:\n{tail(submit_log)}"
            )
        app_id = found[-1]
        record = YarnDeployment(
            flow=flow,
            application_id=app_id,
            resource_manager=self.hadoop.resource_manager,
            hadoop_conf_dir=str(self.conf_dir),
            digest=spec_digest,
            folder=remote,
            checkpoint=checkpoint,
            eos_flow=job_spec.eos_name,
            generation=job_spec.generation,
            started_at=started,
        )
        if env_uri:
            record = record.model_copy(update={"job_environment": env_uri})
        written = record.model_dump(mode="json")
        self.hadoop.write(f"{remote}/runner.json", json.dumps(written, indent=2, sort_keys=True).encode())
        write_json(local.runner, written)
        self.deployments[flow] = record
        self._wait_started(flow, app_id, remote)
        return record

    def stop(self, flow: str) -> None:
        """Stop the flow's application gracefully (finish the batch in flight); kill it after `stop_timeout`."""
        previous = self._previous(flow)
        app_id = previous.application_id if isinstance(previous, YarnDeployment) else None
        if previous is None or app_id is None:
            return
        app = self.hadoop.application(app_id)
        if app is None or app.get("state") not in ACTIVE_STATES:
            return
        remote = self.folder(flow, previous)
        stopped = False
        if app.get("state") == "RUNNING" and read_report_remote(self.hadoop, remote).get("state") is not None:
            self.hadoop.write(f"{remote}/stop.request", f"{app_id} {time.time()}\n".encode())
            stopped = self._wait_inactive(app_id, self.stop_timeout)
        if not stopped:
            self.hadoop.kill(app_id)
            if not self._wait_inactive(app_id, 60):
                raise JobRunnerError(
                    f"the application {app_id} of flow {flow} did not stop after a kill request to "
                    f"{self.hadoop.resource_manager}"
                )
        self.deployments[flow] = mark_stopped(previous, time.time())

    def forget(self, flow: str) -> None:
        """Delete the stopped job's checkpoint and its runner record: the flow is gone from the file."""
        previous = self._previous(flow)
        if previous is not None:
            checkpoint = previous.checkpoint
            if checkpoint is not None and checkpoint.startswith("hdfs:"):
                self.hadoop.delete(checkpoint, recursive=True)
            forget_checkpoint(checkpoint, self.spark, self.base_dir, self.conf_dir)  # s3a:, through Hadoop's S3A
            self.hadoop.delete(f"{self.folder(flow, previous)}/runner.json")
        with contextlib.suppress(FileNotFoundError):
            self.local_folder(flow).runner.unlink()
        self.deployments.pop(flow, None)

    # -- the planner's input --------------------------------------------------------------------------------
    def status(self) -> JobStatus:
        """Every application this state topic's applies deployed, as the ResourceManager reports it."""
        return collect_status(sorted(self.deployments), self.info)

    def info(self, flow: str) -> JobInfo | None:
        previous = self._previous(flow)
        job = self.job(flow, strict=True)
        if job is None:
            return None
        return job_info(flow, job, previous, self.kind, _detail(job), job.host if job.running else None)

    def job(self, flow: str, *, strict: bool = False) -> YarnJob | None:
        """The flow's `YarnJob`, None if never deployed. An unreachable RM or NameNode raises `JobRunnerError` when
        `strict`, else gives a job that is not running whose state says so."""
        previous = self._previous(flow)
        app_id = previous.application_id if isinstance(previous, YarnDeployment) else None
        if previous is None or app_id is None:
            return None
        remote = self.folder(flow, previous)
        local = self.local_folder(flow)
        checkpoint = previous.checkpoint
        try:
            app = self.hadoop.application(app_id)
            report = read_report_remote(self.hadoop, remote)
        except JobRunnerError as exc:
            if strict:
                raise
            unknown = "unknown (ResourceManager or NameNode unreachable)"
            return YarnJob(
                flow, local.path, remote, app_id, previous.digest, False, unknown, str(exc), None, 0, checkpoint
            )
        if report:
            write_json(local.status, report)
        else:
            with contextlib.suppress(FileNotFoundError):
                local.status.unlink()
        yarn_state = None if app is None else str(app.get("state"))
        running = yarn_state in ACTIVE_STATES
        state: str | None = report.get("state")
        if not running and state in (None, "starting", "running", "stopping", "restarting"):
            final = str((app or {}).get("finalStatus") or "").lower()
            state = f"{(yarn_state or 'gone').lower()}" + (f" ({final})" if final and final != "undefined" else "")
        diagnostics = str((app or {}).get("diagnostics") or "").strip() or None
        error = report.get("error") or (None if running else diagnostics)
        attempts = len(self.hadoop.attempts(app_id)) if app is not None else 0
        digest = report.get("digest") or previous.digest
        return YarnJob(flow, local.path, remote, app_id, digest, running, state, error, app, attempts, checkpoint)

    # -- plumbing -------------------------------------------------------------------------------------------
    def properties(self, flow: str, spark: SparkSpec) -> dict[str, str]:
        """The application's Spark settings (no resolved secret in them)."""
        props = spark_properties(spark)
        props.setdefault("spark.pyspark.python", self.python)
        props.setdefault("spark.pyspark.driver.python", self.python)
        if "spark.yarn.archive" not in props:
            # Spark's jars from this machine's driver home, at the same path on the NodeManagers: nothing uploaded
            props.setdefault("spark.yarn.jars", f"local:{driver_home() / 'jars'}/*")
        props["spark.yarn.submit.waitAppCompletion"] = "false"
        props.setdefault("spark.yarn.tags", f"kmirror,kmirror-{self.state_topic}-{flow}"[:100])
        log4j = f"-Dlog4j2.configurationFile={_LOG4J}"
        props["spark.driver.extraJavaOptions"] = " ".join(
            p for p in (props.get("spark.driver.extraJavaOptions", ""), log4j) if p
        )
        return props

    def _job_environment(self, root: CheckpointRoot, props: dict[str, str]) -> str | None:
        """Ship the job's Python environment with the application: the packed archive (`artifacts.job_env`, built
        once per kmirror version and install), uploaded once beside the checkpoints, as `spark.archives`; its
        interpreter runs the driver and the executors. Left alone when `spark.conf` manages the environment itself
        (`spark.archives` or `spark.pyspark.python`). The archive's HDFS URI, or None."""
        if manages_own_environment(self.spark):
            return None
        archive, _built = job_env_archive()
        base = self.folders or root.uri
        uri = self.hadoop.upload_once(archive, f"{base}/_kmirror/envs/{archive.parent.name}/{archive.name}")
        props["spark.archives"] = f"{uri}#{_ENV_DIR}"
        props["spark.pyspark.python"] = props["spark.pyspark.driver.python"] = f"./{_ENV_DIR}/bin/python"
        return uri

    def _previous(self, flow: str) -> Deployment | None:
        """The flow's last deployment: as the state topic recorded it, else as its folder on HDFS has it (an
        application submitted by an apply that was killed before it could record it)."""
        recorded = self.deployments.get(flow)
        if recorded is not None:
            return recorded
        root = CheckpointRoot.parse(self.spark.checkpoint_root, self.base_dir)
        try:
            data = self.hadoop.read(f"{yarn_folder(root, self.state_key, flow, self.folders)}/runner.json")
        except JobRunnerError:
            return None
        try:
            found = json.loads(data) if data else {}
        except ValueError:
            return None
        return deployment_of(found) if isinstance(found, dict) and found.get("runner") == self.kind else None

    def _wait_inactive(self, app_id: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            app = self.hadoop.application(app_id)
            if app is None or app.get("state") not in ACTIVE_STATES:
                return True
            time.sleep(1.0)
        return False

    def _wait_started(self, flow: str, app_id: str, remote: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            report = read_report_remote(self.hadoop, remote)
            if report.get("state") == "running":
                return
            app = self.hadoop.application(app_id)
            if app is not None and app.get("state") not in ACTIVE_STATES:
                why = report.get("error") or app.get("diagnostics") or app.get("finalStatus")
                raise JobRunnerError(
                    f"the application {app_id} of flow {flow} ended while starting ({app.get('state')}: {why}); "
                    f"its log: yarn logs -applicationId {app_id}"
                )
            time.sleep(1.0)
        raise JobRunnerError(
            f"the application {app_id} of flow {flow} did not report running within {self.start_timeout:.0f}s; it "
            f"is left running. Its log: yarn logs -applicationId {app_id}"
        )

    def flows(self) -> list[str]:
        return sorted(self.deployments)


def read_report_remote(hadoop: HadoopClient, folder: str) -> JobReport:
    """The job's status.json in its folder on HDFS; empty when there is none (yet) or it cannot be parsed."""
    data = hadoop.read(f"{folder}/status.json")
    if not data:
        return {}
    try:
        report = json.loads(data)
    except ValueError:
        return {}
    return cast(JobReport, report) if isinstance(report, dict) else {}  # as `read_report` reads the local one


def _pyspark_archives() -> str:
    """PYSPARK_ARCHIVES_PATH: pyspark's own zips at `local:` paths, so spark-submit uploads none per application
    (Spark requires the setting, or a pyspark.zip in SPARK_HOME); a node without them uses the packed environment's
    pyspark (the same version)."""
    import pyspark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = sorted(lib.glob("*.zip")) or [Path(pyspark.__file__).parent.parent]
    return ",".join(f"local:{z}" for z in zips)


def _detail(job: YarnJob) -> str:
    attempts = f", attempt {job.attempts}" if job.attempts > 1 else ""
    if job.running:
        return f"YARN {job.app_id} {job.yarn_state}{attempts}, {job.state or 'starting'}"
    reason = f": {job.error}" if job.error else ""
    return f"YARN {job.app_id} {job.state or 'gone'}{attempts}{reason}; log: yarn logs -applicationId {job.app_id}"
