"""The file a standalone cluster's driver runs (through PythonRunner): the replication job plus two watchers.

`standalone_entry.py --kmirror-log LOG --kmirror-stop-file STOP [--kmirror-env ARCHIVE] <the job's arguments>`:

- with `--kmirror-env`, the job's packed Python environment (`artifacts/job_env.py`) is unpacked into the driver's
  folder on the worker (`./kmirror-env`, kept for the driver's relaunches) and put first on `sys.path` before
  anything of kmirror is imported: the worker needs no kmirror, only Java, Spark and the base Python. ARCHIVE is a
  path (shared storage) or a URI that Hadoop's FileSystem API reads (`hdfs:`, `s3a:`...), fetched through the
  driver JVM's gateway. This module itself imports only the standard library until then: the master's worker
  downloads it into the driver's folder (the submission's appResource) and runs it from there;
- appends this process's stdout and stderr to LOG (the flow's driver.log), so the job's log sits beside its
  spec and status rather than in the worker's work folder only;
- a daemon thread sends this process SIGTERM once STOP exists: the job's documented graceful stop (finish the
  batch in flight, stop the query, exit 0). The REST kill endpoint cannot do that: it destroys the driver JVM,
  and PythonRunner neither forwards the signal nor stops its Python child;
- a killed driver leaves no orphaned Python job behind: the kernel sends this process SIGKILL when its
  parent (the driver JVM's thread that started it, PythonRunner's, which waits for it) dies
  (PR_SET_PDEATHSIG, Linux), and the same watcher thread exits the process when its parent has changed (the
  fallback elsewhere; a thread cannot do it once the interpreter is shutting down, the kernel can).

With `--kmirror-folder URI` (a checkpoint root that is not a shared path, e.g. `hdfs://`), the job's side files sit
in URI instead, as on YARN (`yarn_entry.py`'s watcher): the spec is fetched from `--spec URI` into the driver's
folder, the job writes its status there, the watcher copies it to `URI/status.json` and turns `URI/stop.request`
into the SIGTERM; LOG and STOP are then left out and the driver's output stays in its folder on the worker.

With `--kmirror-application` the driver runs a replication application instead of one flow's job
(`reconciler.replication.application`: `--folder APP_FOLDER --digest D`, several flows' queries, the application's
folder on the shared path); LOG is then the application's driver.log and STOP its stop.request, which stops every
flow's query gracefully. With `--kmirror-folder URI` as well, the application's folder is on HDFS: the driver runs
it on a local copy (`kmirror-apps/<NAME>/`) that `app_mirror.FolderMirror` keeps in step every second, and
URI/stop.request stops it.

Must not: hold replication logic; everything else is `reconciler.replication.job.main`.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import signal
import site
import sys
import tarfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

POLL_SECONDS = 0.5
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
#: Where the driver unpacks the job's environment, in its folder on the worker (as YARN does, `#kmirror-env`).
ENV_DIR = "kmirror-env"


def die_with_parent() -> bool:
    """Ask the kernel for SIGKILL when the parent dies (Linux); whether it was set."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0)


def watch(stop_file: Path | None, parent: int) -> None:
    """Until the process ends: SIGTERM to itself once `stop_file` exists; exit when `parent` is gone."""
    signalled = False
    while True:
        if os.getppid() != parent:
            os._exit(70)  # the driver JVM died (killed): nothing to finish without it
        if not signalled and stop_file is not None and stop_file.exists():
            signalled = True
            os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(POLL_SECONDS)


def _is_local(location: str) -> bool:
    return location.startswith(("/", "file:"))


def _local_path(location: str) -> Path:
    if location.startswith("file:"):
        rest = location[len("file:") :]
        return Path(rest[2:] if rest.startswith("//") else rest)
    return Path(location)


def fetch(location: str, dest: Path) -> Path:
    """`location` as a local file: itself when it is a path, else copied to `dest` through Hadoop's FileSystem API
    in the driver's JVM (PythonRunner started its gateway; Spark's own pyspark is on PYTHONPATH)."""
    if _is_local(location):
        return _local_path(location)
    from pyspark import SparkContext

    SparkContext._ensure_initialized()
    jvm: Any = SparkContext._jvm
    source = jvm.org.apache.hadoop.fs.Path(location)
    fs = source.getFileSystem(jvm.org.apache.hadoop.conf.Configuration())
    fs.copyToLocalFile(False, source, jvm.org.apache.hadoop.fs.Path(dest.resolve().as_uri()), True)
    return dest


def use_environment(archive: str, folder: Path) -> Path:
    """Unpack the job's environment into `folder/kmirror-env` (once: a relaunched driver reuses it) and put its
    site-packages first on `sys.path`; the site-packages folder."""
    target = folder / ENV_DIR
    if not (target / "pyvenv.cfg").is_file():
        partial = folder / f".{ENV_DIR}.{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        local = fetch(archive, folder / f".{ENV_DIR}.{os.getpid()}.tar.gz")
        with tarfile.open(local) as tar:
            # bin/python links to the base interpreter (absolute): not needed here, this process already is it
            members = [m for m in tar.getmembers() if not (m.issym() or m.islnk())]
            if hasattr(tarfile, "data_filter"):
                tar.extractall(partial, members=members, filter="data")
            else:  # pragma: no cover - Python < 3.11.4
                tar.extractall(partial, members=members)
        if local.parent == folder:
            local.unlink()
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    packages = target / "lib" / version / "site-packages"
    if not packages.is_dir():
        raise SystemExit(f"kmirror: {archive} has no lib/{version}/site-packages: packed for another Python")
    before = list(sys.path)
    site.addsitedir(str(packages))  # processes its .pth files
    added = [p for p in sys.path if p not in before]
    sys.path[:] = added + before
    return packages


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kmirror-standalone-driver", add_help=False)
    parser.add_argument("--kmirror-log", type=Path)
    parser.add_argument("--kmirror-stop-file", type=Path)
    parser.add_argument("--kmirror-env")
    parser.add_argument("--kmirror-folder")
    parser.add_argument("--kmirror-application", action="store_true")
    args, job_args = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if args.kmirror_log is not None:
        fd = os.open(args.kmirror_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    parent = os.getppid()
    die_with_parent()
    threading.Thread(
        target=watch, args=(args.kmirror_stop_file, parent), name="kmirror-stop-watch", daemon=True
    ).start()
    if args.kmirror_env:
        use_environment(args.kmirror_env, Path.cwd())
    if args.kmirror_application:
        if args.kmirror_folder:
            return _run_application_with_remote_folder(args.kmirror_folder, job_args)
        from reconciler.replication.application import main as application_main

        return application_main(job_args)
    if args.kmirror_folder:
        return _run_with_remote_folder(args.kmirror_folder, job_args)
    from reconciler.replication.job import main as job_main

    return job_main(job_args)


def _run_with_remote_folder(folder: str, job_args: list[str]) -> int:
    """The job with its side files in `folder` (a URI), mirrored by yarn_entry's watcher."""
    from reconciler.replication.yarn_entry import SideFiles, run_job_with_side_files

    at = job_args.index("--spec") + 1
    job_args[at] = str(fetch(job_args[at], Path("spec.json").resolve()))
    return run_job_with_side_files(SideFiles(folder), job_args)


def _run_application_with_remote_folder(folder: str, app_args: list[str]) -> int:
    """The application with its folder on HDFS (`folder`, a URI): run on a local copy in the driver's folder, kept in
    step every second by `app_mirror.FolderMirror`; `folder`/stop.request stops it (SIGTERM, every flow gracefully)."""
    from reconciler.replication.app_mirror import FolderMirror
    from reconciler.replication.application import main as application_main
    from reconciler.replication.yarn_entry import POLL_SECONDS as MIRROR_SECONDS
    from reconciler.replication.yarn_entry import SideFiles

    files = SideFiles(folder)
    local = (Path("kmirror-apps") / folder.rstrip("/").rpartition("/")[2]).resolve()
    mirror = FolderMirror(files, local)
    mirror.pull()  # the requests are there before the driver first looks
    stopping = threading.Event()

    def keep_in_step() -> None:
        signalled = False
        while not stopping.wait(MIRROR_SECONDS):
            mirror.step()
            try:
                if not signalled and files.exists("stop.request"):
                    signalled = True
                    os.kill(os.getpid(), signal.SIGTERM)
            except Exception:  # the NameNode away for a moment: looked at again next time
                pass

    thread = threading.Thread(target=keep_in_step, name="kmirror-app-mirror", daemon=True)
    thread.start()
    at = app_args.index("--folder") + 1
    app_args[at] = str(local)
    try:
        return application_main(app_args)
    finally:
        stopping.set()
        thread.join(timeout=10)
        mirror.push()  # the last status: stopped, failed


if __name__ == "__main__":
    sys.exit(main())
