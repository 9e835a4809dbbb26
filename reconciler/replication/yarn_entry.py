"""The file a YARN application's driver runs (cluster mode, in the ApplicationMaster's container): the replication
job plus a watcher that keeps its side files on the checkpoint's filesystem.

`yarn_entry.py --kmirror-folder URI <the job's arguments>`, where URI is the job's folder beside its checkpoint
(`hdfs://.../<state topic>/<flow>`) and `--spec spec.json` names the spec YARN localized into the container from
that folder (spark-submit `--files`):

- the job writes its status to `status.json` in the container's working folder; a daemon thread copies it to
  `URI/status.json` whenever it changed (and once more when the job returned), through Hadoop's FileSystem API in
  the driver's JVM (Spark's py4j gateway), so it works for whatever filesystem the URI names;
- the same thread sends this process SIGTERM once `URI/stop.request` exists: the job's documented graceful stop
  (finish the batch in flight, stop the query, exit 0), after which the driver ends and YARN records the
  application FINISHED/SUCCEEDED (no new attempt);
- a killed driver (the AM container killed) leaves no orphaned Python job behind: PR_SET_PDEATHSIG, as on a
  standalone worker.

The job's output goes to the container's stdout/stderr (YARN's container logs: `yarn logs -applicationId ID`).

Must not: hold replication logic; everything else is `reconciler.replication.job.main`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reconciler.replication.standalone_entry import die_with_parent

POLL_SECONDS = 1.0
log = logging.getLogger("kmirror.yarn")


class SideFiles:
    """The job's folder on the checkpoint's filesystem, through Hadoop's FileSystem API in the driver's JVM."""

    def __init__(self, folder: str) -> None:
        from pyspark import SparkContext

        SparkContext._ensure_initialized()  # the driver JVM's gateway (PythonRunner started it); no context yet
        jvm: Any = SparkContext._jvm
        self._jvm = jvm
        self._gateway: Any = SparkContext._gateway
        self.folder = folder.rstrip("/")
        conf = jvm.org.apache.hadoop.conf.Configuration()
        self.fs = jvm.org.apache.hadoop.fs.Path(self.folder).getFileSystem(conf)

    def path(self, name: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(f"{self.folder}/{name}")

    def exists(self, name: str) -> bool:
        return bool(self.fs.exists(self.path(name)))

    def listing(self, name: str = "") -> dict[str, tuple[bool, int]]:
        """The entries of the folder `name` (this folder when empty): name -> (is a folder, modification time ms);
        empty when it does not exist."""
        path = self.path(name) if name else self._jvm.org.apache.hadoop.fs.Path(self.folder)
        if not self.fs.exists(path):
            return {}
        return {
            str(s.getPath().getName()): (bool(s.isDirectory()), int(s.getModificationTime()))
            for s in self.fs.listStatus(path)
        }

    def read(self, name: str) -> bytes | None:
        """The bytes of `name`, None when it does not exist."""
        path = self.path(name)
        if not self.fs.exists(path):
            return None
        stream = self.fs.open(path)
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def delete(self, name: str) -> None:
        self.fs.delete(self.path(name), False)

    def put(self, name: str, data: bytes) -> None:
        """Write `name` whole: a temporary file renamed over it (readers see the old or the new record)."""
        folder, _, base = name.rpartition("/")
        tmp = self.path(f"{folder}/.{base}.{os.getpid()}.tmp" if folder else f".{base}.{os.getpid()}.tmp")
        out = self.fs.create(tmp, True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()
        target = self.path(name)
        jvm = self._jvm
        options = self._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
        options[0] = jvm.org.apache.hadoop.fs.Options.Rename.OVERWRITE
        try:
            self.fs.rename(tmp, target, options)  # DistributedFileSystem: atomic, replaces the old record
        except Exception:
            self.fs.delete(target, False)
            self.fs.rename(tmp, target)


def watch(files: SideFiles, status: Path, stopping: threading.Event) -> None:
    """Until the process ends: mirror `status` to the folder when it changed; SIGTERM once stop.request exists."""
    signalled = False
    last: bytes | None = None
    while True:
        last = mirror(files, status, last)
        if not signalled:
            try:
                if files.exists("stop.request"):
                    signalled = True
                    log.info("stop.request found in %s: stopping gracefully", files.folder)
                    os.kill(os.getpid(), signal.SIGTERM)
            except Exception as exc:
                log.warning("could not look for %s/stop.request: %s", files.folder, exc)
        if stopping.wait(POLL_SECONDS):
            return


def mirror(files: SideFiles, status: Path, last: bytes | None) -> bytes | None:
    """Copy `status` to the folder when its bytes changed; the bytes now mirrored."""
    try:
        data = status.read_bytes()
        json.loads(data)  # the job writes it atomically; a torn read is skipped, never mirrored
    except (OSError, ValueError):
        return last
    if data == last:
        return last
    try:
        files.put("status.json", data)
    except Exception as exc:
        log.warning("could not write %s/status.json: %s", files.folder, exc)
        return last
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kmirror-yarn-driver", add_help=False)
    parser.add_argument("--kmirror-folder", required=True)
    args, job_args = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    die_with_parent()
    return run_job_with_side_files(SideFiles(args.kmirror_folder), job_args)


def run_job_with_side_files(files: SideFiles, job_args: list[str]) -> int:
    """The job, writing its status to `status.json` here, mirrored to `files` while it runs (`watch`) and once more
    when it ends (the final record: stopped, failed). The YARN and the standalone drivers' entries share it."""
    status = Path("status.json").resolve()
    stopping = threading.Event()
    watcher = threading.Thread(target=watch, args=(files, status, stopping), name="kmirror-side-files", daemon=True)
    watcher.start()
    from reconciler.replication.job import main as job_main

    try:
        return job_main([*job_args, "--status", str(status)])
    finally:
        stopping.set()
        watcher.join(timeout=10)
        mirror(files, status, None)


if __name__ == "__main__":
    sys.exit(main())
