"""Where a flow's job keeps its files and its checkpoint: keyed by the state and the flow, never by checkout.

Everything kmirror keeps per desired-state file is keyed by the file's state (`state_key`: its state topic and the
Kafka cluster id of the cluster that holds it, `<state topic>@<cluster id>`) and the flow's name, so two
environments never touch each other's jobs (not even two with the same state topic name on different clusters,
run from one host or sharing one checkpoint filesystem), and any checkout of the same file finds the same job. The
cluster id, not the written `bootstrap_servers`, so editing the broker list changes nothing:

- the checkpoint (Spark's read positions): `<checkpoint_root>/<state key>/<flow>/checkpoint`, where
  `spark.checkpoint_root` is a path or a URI (`file:`, `hdfs:`, `s3a:`, ...). A relative path is taken from the
  desired-state file's folder, which only the local runner accepts (its driver runs on this machine);
- the job's folder (`JobFolder`: spec, status, runner record, stop request, driver log): for the local runner on
  this host, under `$KMIRROR_HOME` (default `~/.local/state/kmirror`) `/jobs/<state key>/<flow>`; for the
  standalone runner beside the checkpoint, `<checkpoint_root>/<state key>/<flow>`, on the filesystem the
  workers and every machine that runs kmirror share; for the YARN runner beside the checkpoint on HDFS
  (`<checkpoint_root>/<state key>/<flow>`, a URI: `yarn_folder`).

What apply deployed (runner, the runner's id of the job, digest, checkpoint, folder) is recorded in the state
topic as well, and a recorded folder and checkpoint are used on: these paths are where a new deployment goes. Jobs
deployed before the key had the cluster id (`<state topic>/<flow>`) keep their recorded folders and checkpoints.

Must not: create, read or delete anything (the runners do); hold a resolved secret.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

#: Overrides where the local runner keeps its jobs' folders on this host.
HOME_ENV = "KMIRROR_HOME"
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def runtime_root() -> Path:
    """This host's kmirror folder: `$KMIRROR_HOME`, else `~/.local/state/kmirror`."""
    configured = os.environ.get(HOME_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".local" / "state" / "kmirror"


@dataclass(frozen=True)
class JobFolder:
    """The files one flow's job shares with its runner."""

    path: Path

    @property
    def spec(self) -> Path:
        return self.path / "spec.json"

    @property
    def status(self) -> Path:
        """Written by the job (`status.JobReport`)."""
        return self.path / "status.json"

    @property
    def runner(self) -> Path:
        """Written by the runner when it starts the job: the runner's id of it (pid, or submission id)."""
        return self.path / "runner.json"

    @property
    def stop(self) -> Path:
        """Created by the runner to ask the job to stop gracefully (the standalone runner)."""
        return self.path / "stop.request"

    @property
    def log(self) -> Path:
        return self.path / "driver.log"


def state_key(state_topic: str, cluster_id: str | None) -> str:
    """What the layout keys a state's jobs by: `<state topic>@<cluster id>`, or the topic alone when the cluster's
    id is unknown (a runner built without reading the state: the demo, benchmarks, tests)."""
    return f"{state_topic}@{cluster_id}" if cluster_id else state_topic


def local_job_folder(state_key: str, flow: str, root: Path | None = None) -> JobFolder:
    """The local runner's folder of `flow`'s job on this host (`state_key`: see `state_key`)."""
    return JobFolder((root or runtime_root()) / "jobs" / state_key / flow)


def local_state_keys(state_topic: str, root: Path | None = None) -> list[str]:
    """The state keys of `state_topic` that have job folders on this host (any cluster id, and the topic alone)."""
    jobs = (root or runtime_root()) / "jobs"
    if not jobs.is_dir():
        return []
    return sorted(p.name for p in jobs.iterdir() if p.is_dir() and p.name.partition("@")[0] == state_topic)


@dataclass(frozen=True)
class CheckpointRoot:
    """`spark.checkpoint_root`, read: its URI, and the local path when it is one (a path or `file:` URI)."""

    uri: str
    path: Path | None

    @classmethod
    def parse(cls, text: str, base_dir: Path) -> CheckpointRoot:
        match = _URI.match(text)
        if match is None or len(match.group(1)) == 1:  # a path (`C:` is a drive, not a scheme)
            path = Path(text).expanduser()
            path = path if path.is_absolute() else (base_dir / path)
            return cls(path.resolve().as_uri(), path.resolve())
        if match.group(1).lower() == "file":
            rest = text[len("file:") :]
            rest = rest[2:] if rest.startswith("//") else rest  # file:///x and file:/x
            return cls(f"file://{rest}" if rest.startswith("/") else text, Path(rest) if rest.startswith("/") else None)
        return cls(text.rstrip("/"), None)

    def checkpoint(self, state_key: str, flow: str) -> str:
        """The flow's Spark checkpoint location (a path for a local root, else the URI)."""
        if self.path is not None:
            return str(self.path / state_key / flow / "checkpoint")
        return f"{self.uri}/{state_key}/{flow}/checkpoint"

    def job_folder(self, state_key: str, flow: str) -> JobFolder | None:
        """The flow's job folder beside its checkpoint (shared storage), or None for a non-file root."""
        return None if self.path is None else JobFolder(self.path / state_key / flow)


def yarn_folder(root: CheckpointRoot, state_key: str, flow: str) -> str:
    """The YARN runner's folder of `flow`'s job: a URI beside its checkpoint (spec.json, status.json, runner.json,
    stop.request)."""
    return f"{root.uri}/{state_key}/{flow}"


def checkpoint_root_problem(text: str, deploy: str) -> str | None:
    """Why `spark.checkpoint_root` cannot serve `spark.deploy`, or None.

    The standalone runner's driver runs on a worker, and later applies run from other checkouts: a relative path
    would mean a different folder on each, so the root must be absolute (or a `file:` URI) on a filesystem the
    workers and the machines running kmirror share, or an `hdfs:` URI (the runner reads the job's side files
    through WebHDFS). The job's spec, status and log sit beside the checkpoint, so a root the CLI cannot read
    (`s3a:`, `gs:`) serves the local runner only, for now (whose side files stay on the host; the job reaches an
    `s3a:` checkpoint through the S3A jars `artifacts.jars.filesystem_jars` adds).
    """
    match = _URI.match(text)
    scheme = match.group(1).lower() if match is not None and len(match.group(1)) > 1 else None
    if deploy == "yarn" and scheme != "hdfs":
        return (
            f"checkpoint_root {text!r}: with deploy 'yarn' the driver runs in a YARN container and kmirror keeps each "
            "job's spec, status and stop request beside its checkpoint on HDFS (read through WebHDFS); give an "
            "hdfs:// URI (e.g. hdfs://namenode:8020/kmirror/checkpoints). s3a:, gs: and abfs: roots are not "
            "supported with deploy 'yarn' yet (s3a: works with deploy 'local'; see docs/checkpoint-storage.md)"
        )
    if deploy != "standalone":
        return None
    if scheme is None and not Path(text).expanduser().is_absolute():
        return (
            f"checkpoint_root {text!r} is relative, but with deploy 'standalone' the driver runs on a worker and "
            "later applies run from other checkouts; give an absolute path or a file: URI on a filesystem mounted at "
            "the same path on every worker and every machine that runs kmirror (e.g. file:///mnt/kmirror/checkpoints)"
        )
    if scheme is not None and scheme not in ("file", "hdfs"):
        return (
            f"checkpoint_root {text!r} uses {scheme}:, but with deploy 'standalone' kmirror keeps each job's spec, "
            "status and log beside its checkpoint and reads them as files; use a shared filesystem path or file: URI "
            "or an hdfs:// URI (s3a: roots work with deploy 'local'; see docs/checkpoint-storage.md)"
        )
    return None
