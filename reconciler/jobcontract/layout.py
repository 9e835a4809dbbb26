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
  (`<checkpoint_root>/<state key>/<flow>`, a URI: `yarn_folder`). A checkpoint root on object storage (`s3a:`)
  holds the checkpoints only: the cluster runners' folders go under `spark.job_folder_root` (YARN's default: the
  cluster's HDFS, `<fs.defaultFS>/user/<user>/kmirror`).

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


#: Checkpoint roots on object storage: the job reaches them through the jars `artifacts.jars.filesystem_jars` adds,
#: but kmirror keeps no job folder there (it reads those files without the store's credentials): a cluster runner's
#: folders go to `spark.job_folder_root` (or, on YARN, the cluster's HDFS) and only the checkpoint goes to the store.
OBJECT_STORE_SCHEMES = frozenset({"s3a"})


def scheme_of(text: str) -> str | None:
    """The URI scheme of a path or URI, lower case; None for a path (`C:` is a drive, not a scheme)."""
    match = _URI.match(text)
    return match.group(1).lower() if match is not None and len(match.group(1)) > 1 else None


def yarn_folder(root: CheckpointRoot, state_key: str, flow: str, folders: str | None = None) -> str:
    """A cluster runner's folder of `flow`'s job as a URI (spec.json, status.json, runner.json, stop.request): under
    `folders` (the job folders' root: `spark.job_folder_root`, or YARN's default for an object-store checkpoint
    root) when given, else beside its checkpoint."""
    return f"{(folders or root.uri).rstrip('/')}/{state_key}/{flow}"


def checkpoint_root_problem(text: str, deploy: str, job_folder_root: str | None = None) -> str | None:
    """Why `spark.checkpoint_root` (with `spark.job_folder_root`) cannot serve `spark.deploy`, or None.

    The standalone runner's driver runs on a worker, and later applies run from other checkouts: a relative path
    would mean a different folder on each, so the root must be absolute (or a `file:` URI) on a filesystem the
    workers and the machines running kmirror share, or an `hdfs:` URI (the runner reads the job's side files
    through WebHDFS). The job's spec, status and stop request sit beside the checkpoint unless the root is on object
    storage (`s3a:`), whose side files go to `job_folder_root` instead (YARN: the cluster's HDFS by default); a
    local job's side files stay on the host. `gs:` and `abfs:` roots are not shipped for cluster runners.
    """
    scheme = scheme_of(text)
    folders = scheme_of(job_folder_root) if job_folder_root else None
    if job_folder_root is not None and deploy not in ("yarn", "standalone"):
        return (
            f"job_folder_root {job_folder_root!r} serves deploy 'yarn' and 'standalone' only; with deploy {deploy!r} "
            "each job's folder is on the host that runs it ($KMIRROR_HOME/jobs): leave job_folder_root out"
        )
    if job_folder_root is not None and scheme not in OBJECT_STORE_SCHEMES:
        return (
            f"job_folder_root {job_folder_root!r} is for a checkpoint_root on object storage (s3a:); with "
            f"checkpoint_root {text!r} each job's folder sits beside its checkpoint: leave job_folder_root out"
        )
    if deploy == "yarn":
        if scheme not in ("hdfs", *OBJECT_STORE_SCHEMES):
            return (
                f"checkpoint_root {text!r}: with deploy 'yarn' the driver runs in a YARN container and kmirror keeps "
                "each job's spec, status and stop request on HDFS (read through WebHDFS); give an hdfs:// URI (e.g. "
                "hdfs://namenode:8020/kmirror/checkpoints) or an s3a:// URI (e.g. s3a://bucket/kmirror/checkpoints). "
                "gs: and abfs: roots are not supported with deploy 'yarn' yet (see docs/checkpoint-storage.md)"
            )
        if job_folder_root is not None and folders != "hdfs":
            return (
                f"job_folder_root {job_folder_root!r}: with deploy 'yarn' kmirror reads the jobs' folders through "
                "WebHDFS; give an hdfs:// URI (e.g. hdfs://namenode:8020/user/kmirror/jobs), or leave it out for "
                "<fs.defaultFS>/user/<user>/kmirror"
            )
        return None
    if deploy != "standalone":
        return None
    if scheme is None and not Path(text).expanduser().is_absolute():
        return (
            f"checkpoint_root {text!r} is relative, but with deploy 'standalone' the driver runs on a worker and "
            "later applies run from other checkouts; give an absolute path or a file: URI on a filesystem mounted at "
            "the same path on every worker and every machine that runs kmirror (e.g. file:///mnt/kmirror/checkpoints)"
        )
    if scheme in OBJECT_STORE_SCHEMES:
        if job_folder_root is None:
            return (
                f"checkpoint_root {text!r} is on object storage, where kmirror keeps no job files: with deploy "
                "'standalone' set job_folder_root to where each job's spec, status and stop request go instead: an "
                "hdfs:// URI or an absolute path every worker and every machine running kmirror shares (e.g. "
                "job_folder_root: hdfs://namenode:8020/kmirror/jobs)"
            )
    elif scheme is not None and scheme not in ("file", "hdfs"):
        return (
            f"checkpoint_root {text!r} uses {scheme}:, but with deploy 'standalone' kmirror keeps each job's spec, "
            "status and log beside its checkpoint and reads them as files; use a shared filesystem path or file: URI, "
            "an hdfs:// URI, or an s3a:// URI with job_folder_root (see docs/checkpoint-storage.md)"
        )
    if job_folder_root is not None and folders not in (None, "file", "hdfs"):
        return (
            f"job_folder_root {job_folder_root!r}: with deploy 'standalone' give an hdfs:// URI or an absolute path "
            "(or file: URI) every worker and every machine running kmirror shares"
        )
    if job_folder_root is not None and folders is None and not Path(job_folder_root).expanduser().is_absolute():
        return (
            f"job_folder_root {job_folder_root!r} is relative; give an absolute path shared by the workers, or hdfs://"
        )
    return None
