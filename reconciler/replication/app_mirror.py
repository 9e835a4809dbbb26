"""A local copy of a replication application's folder that lives on HDFS (`spark.application` on a standalone
cluster whose jobs' folders are not a shared path): the application's driver (`application.py`) keeps reading and
writing a local folder, and this mirror carries the files between the two every second, through Hadoop's
FileSystem API in the driver's JVM (`yarn_entry.SideFiles`).

In (HDFS -> local), per flow sub-folder: `spec.json` then `request.json` when their modification time changed (a
request is taken only when its bytes parse: a runner's overwrite seen half-written is read again next second, never
taken as "no request", which would stop the flow), and `stop.request` (present or not, as there). Out (local ->
HDFS): the application's `status.json` and each flow's `status.json` when their bytes changed, each written whole
(a temporary file renamed over it).

Must not: decide anything about the flows (the runner writes requests, the application acts on them), or delete
anything on HDFS.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Protocol

log = logging.getLogger("kmirror.application")

#: The files the runner writes in a flow's sub-folder, in the order they are copied in (a spec before its request).
INBOUND = ("spec.json", "request.json")
STOP = "stop.request"
STATUS = "status.json"


class RemoteFolder(Protocol):
    """What the mirror needs of the folder on HDFS (`yarn_entry.SideFiles`)."""

    def listing(self, name: str = "") -> dict[str, tuple[bool, int]]: ...

    def read(self, name: str) -> bytes | None: ...

    def put(self, name: str, data: bytes) -> None: ...


class FolderMirror:
    """Keeps `local` (the application's folder in the driver's working folder) in step with `remote`."""

    def __init__(self, remote: RemoteFolder, local: Path) -> None:
        self.remote = remote
        self.local = local
        self._seen: dict[str, int] = {}  # remote file -> modification time copied in
        self._sent: dict[str, bytes] = {}  # local status file -> bytes copied out

    def pull(self) -> None:
        """Requests, specs and stop requests in."""
        for flow, (is_dir, _) in sorted(self.remote.listing().items()):
            if not is_dir or flow.startswith((".", "_")):
                continue
            entries = self.remote.listing(flow)
            folder = self.local / flow
            for name in INBOUND:
                if name not in entries or entries[name][0]:
                    continue
                key, mtime = f"{flow}/{name}", entries[name][1]
                if self._seen.get(key) == mtime:
                    continue
                data = self.remote.read(key)
                if data is None or not _parses(data):
                    continue  # gone meanwhile, or seen half-written: read again next time
                _write_atomic(folder / name, data)
                self._seen[key] = mtime
            stop = folder / STOP
            if STOP in entries and not stop.exists():
                _write_atomic(stop, b"stop requested on HDFS\n")
            elif STOP not in entries and stop.exists() and folder.is_dir():
                stop.unlink(missing_ok=True)

    def push(self) -> None:
        """Status files out: the application's and each flow's, when their bytes changed."""
        paths = [self.local / STATUS, *sorted(self.local.glob(f"*/{STATUS}"))]
        for path in paths:
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if not _parses(data):
                continue
            key = path.relative_to(self.local).as_posix()
            if self._sent.get(key) == data:
                continue
            try:
                self.remote.put(key, data)
            except Exception as exc:  # the NameNode away for a moment: sent again next time
                log.warning("could not write %s on HDFS: %s", key, exc)
                continue
            self._sent[key] = data

    def step(self) -> None:
        try:
            self.pull()
        except Exception as exc:
            log.warning("could not read the application's folder on HDFS: %s", exc)
        self.push()


def _parses(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    tmp.replace(path)
