"""How the job is supervised and reports: a query failure's one-line summary, the newer generation that
superseded an exactly-once job, the stop request a batch honours, and the job's status file (`status.json`).

Must not: restart or stop a query itself (`ReplicationJob` does), or write a resolved secret to the status file.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from reconciler.jobcontract.job_report import JobReport
from reconciler.spec.redaction import scrub

_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$", re.MULTILINE)


class Superseded(Exception):
    """A newer deployment (generation) of this exactly-once flow writes its partitions: this job stops for good
    rather than fence the newer one's writers (jvm/TransactionalLane.java)."""

    def __init__(self, newer: int) -> None:
        super().__init__(
            f"superseded by generation {newer} of the flow (a newer deployment writes its partitions): this job "
            "stops for good instead of fencing it"
        )
        self.newer = newer


_SUPERSEDED = re.compile(r"superseded by generation (\d+)")


def superseded_by(error: str | None) -> int | None:
    """The newer generation a query failure says superseded this job (None: another failure)."""
    found = _SUPERSEDED.search(error or "")
    return int(found.group(1)) if found else None


class StopRequested(Exception):
    """Raised by a batch that starts after SIGTERM: it writes nothing and is re-run on the next start."""


def last_batch_id(query: Any) -> int:
    """The id of the query's last finished batch (-1 before the first), from the JVM's StreamingQuery."""
    last = query._jsq.lastProgress()
    return -1 if last is None else int(last.batchId())


def failure_summary(text: str) -> str:
    """One line naming what failed: the innermost `SomeError: message` of a Spark/py4j/Python error text."""
    lines = [m for m in _ERROR_LINE.finditer(text) if not m.group(1).startswith(("py4j.", "org.apache.spark"))]
    if lines:
        return f"{lines[-1].group(1)}: {lines[-1].group(2)}"[:500]
    first = text.strip().splitlines()
    return (first[0] if first else "unknown failure")[:500]


class StatusFile:
    """`status.json` in the job's folder (`jobcontract.status.JobReport`): what the runner and `kmirror status`
    read. Written atomically, owner-only."""

    def __init__(self, path: Path, **fixed: Any) -> None:
        self.path = path
        self._data: JobReport = {**fixed, "started_at": time.time()}  # type: ignore[typeddict-item]
        self._lock = threading.RLock()  # re-entrant: the SIGTERM handler updates it on the main thread

    def update(self, **fields: Any) -> None:
        with self._lock:
            self._data.update({**fields, "updated_at": time.time()})  # type: ignore[typeddict-item]
            tmp = self.path.with_name(f".{self.path.name}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(scrub(json.dumps(self._data, indent=2, sort_keys=True)) + "\n")
            tmp.replace(self.path)
