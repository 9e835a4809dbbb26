"""What both runners share: Spark settings every job gets, the jars it needs, the job's folder files, processes.

Must not: decide whether a job should run (the planner does), or know one runner's protocol (local.py,
standalone.py do).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from reconciler.errors import KmirrorError
from reconciler.jobcontract.job_report import read_report
from reconciler.jobcontract.layout import CheckpointRoot, JobFolder
from reconciler.resources.deployments import Deployment
from reconciler.resources.job_status import JobInfo, JobStatus
from reconciler.spec.models import SparkSpec
from reconciler.spec.secrets import SecretRef

#: Spark settings every job gets unless `spark.conf` says otherwise: a light driver for a one-machine job.
SPARK_DEFAULTS = {
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
}

#: This machine's name, as recorded with a local job (a job is only seen from the host it runs on).
HOST = socket.gethostname()


_LOG4J2_APPENDERS = {
    # spark-submit on this machine: the JVM's stderr, which the runner appends to driver.log
    "console": "appender.console.type = Console\nappender.console.name = console\n"
    "appender.console.target = SYSTEM_ERR\n",
    # a driver on a worker: straight into the job's driver.log on the shared filesystem
    "file": "appender.file.type = File\nappender.file.name = file\nappender.file.append = true\n"
    "appender.file.fileName = @LOG@\n",
}


def log4j2_properties(appender: str, log: Path | None = None) -> str:
    """The driver JVM's log configuration: WARN and up, to `appender` (`console`, or `file` writing `log`)."""
    return (
        f"rootLogger.level = warn\nrootLogger.appenderRef.{appender}.ref = {appender}\n"
        + _LOG4J2_APPENDERS[appender].replace("@LOG@", str(log))
        + f"appender.{appender}.layout.type = PatternLayout\n"
        f"appender.{appender}.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss,SSS}} %p %c{{1}}: %m%n%ex\n"
        '# "Current batch is falling behind" after every batch longer than the trigger interval: expected under load.\n'
        "logger.trigger.name = org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor\n"
        "logger.trigger.level = error\n"
    )


def forget_job(folder: JobFolder, previous: Deployment) -> None:
    """Delete a stopped job's checkpoint (a local path) and its folder's runner record: its flow is gone."""
    checkpoint = previous.checkpoint
    if checkpoint is not None and "://" not in checkpoint:
        shutil.rmtree(checkpoint.removeprefix("file:"), ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        folder.runner.unlink()


class JobRunnerError(KmirrorError):
    """A replication job could not be started or stopped."""


def spark_properties(spark: SparkSpec) -> dict[str, str]:
    """SPARK_DEFAULTS with `spark.conf` on top; settings holding references are left to the job (in memory)."""
    props = dict(SPARK_DEFAULTS)
    props.update({k: spark_value(v) for k, v in spark.conf.items() if not isinstance(v, SecretRef)})
    return props


def checkpoint_for(
    flow: str,
    root: CheckpointRoot,
    state_key: str,
    previous: Deployment | None,
) -> str:
    """Where the flow's job checkpoints: where its previous deployment did (recorded), else the keyed layout.

    A job deployed before checkpoints were keyed by state topic kept them in `<checkpoint_root>/<flow>`; one found
    there is used on, so upgrading kmirror does not restart a flow from `start_from`.
    """
    recorded = previous.checkpoint if previous is not None else None
    if recorded:
        return recorded
    if root.path is not None and (root.path / flow / "offsets").is_dir():
        return str(root.path / flow)
    return root.checkpoint(state_key, flow)


def checkpoint_missing(checkpoint: str, previous: Deployment | None) -> bool | None:
    """Whether a flow deployed before has lost its checkpoint: True/False for a local path, None if unknown."""
    if previous is None:
        return False
    if "://" in checkpoint and not checkpoint.startswith("file:"):
        return None  # hdfs:, s3a:, ...: the job checks it itself when it starts
    path = Path(checkpoint.removeprefix("file://").removeprefix("file:"))
    return not (path / "offsets").is_dir()


class ReportedJob(Protocol):
    """What both runners know of a job (`LocalJob`, `StandaloneJob`)."""

    @property
    def folder(self) -> Path: ...
    @property
    def running(self) -> bool: ...
    @property
    def digest(self) -> str | None: ...
    @property
    def state(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def checkpoint(self) -> str | None: ...


def collect_status(flows: Iterable[str], info: Callable[[str], JobInfo | None]) -> JobStatus:
    """The planner's view of a runner's jobs: each flow's `info`; not known at all when the runner cannot be asked."""
    jobs = {}
    try:
        for flow in flows:
            found = info(flow)
            if found is not None:
                jobs[flow] = found
    except JobRunnerError:
        return JobStatus(known=False)
    return JobStatus(jobs)


def job_info(
    flow: str, job: ReportedJob, previous: Deployment | None, kind: str, detail: str, host: str | None
) -> JobInfo:
    """The planner's view of a job: the runner's answer plus what the job's status record says of itself."""
    report = read_report(job.folder / "status.json")
    missing = checkpoint_missing(job.checkpoint, previous) if job.checkpoint and not job.running else False
    return JobInfo(
        flow,
        job.running,
        job.digest,
        kind,
        detail,
        state=job.state,
        restarts=int(report.get("restarts") or 0),
        last_error=job.error,
        data_loss_records=int(report.get("data_loss_records") or 0),
        checkpoint=job.checkpoint,
        checkpoint_missing=missing,
        host=host,
        mode=report.get("mode"),
        mode_reason=report.get("mode_reason"),
        mode_fallback=bool(report.get("mode_fallback")),
        fenced_writers=int(report.get("fenced_writers") or 0),
        superseded_by=report.get("superseded_by") or None,
    )


def spark_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n")

    write_private(path, "".join(f"{escape(k)}={escape(v)}\n" for k, v in sorted(props.items())))


def write_json(path: Path, value: Mapping[str, object]) -> None:
    """Write a JSON object (a deployment's record, a job's status) owner-only and atomically."""
    write_private(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def write_private(path: Path, text: str) -> None:
    """Write atomically with owner-only permissions (a job's files name its clusters and settings)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    tmp.replace(path)


def read_json(path: Path) -> dict[str, object]:
    """The JSON object in `path` (empty when there is none or it is not one): the caller validates what it reads."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def folder_of(previous: Deployment | None) -> JobFolder | None:
    folder = previous.folder if previous is not None else None
    return JobFolder(Path(folder)) if folder else None


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %z")


def manages_own_environment(spark: SparkSpec) -> bool:
    """Whether `spark.conf` gives the job's Python environment itself (`spark.archives` or `spark.pyspark.python`):
    then a cluster runner ships none of its own."""
    return spark.conf.get("spark.archives") is not None or bool(spark.conf.get("spark.pyspark.python"))
