"""The file a standalone cluster's driver runs (through PythonRunner): the replication job plus two watchers.

`standalone_entry.py --kmirror-log LOG --kmirror-stop-file STOP <the job's arguments>`:

- appends this process's stdout and stderr to LOG (the flow's driver.log), so the job's log sits beside its
  spec and status rather than in the worker's work folder only;
- a daemon thread sends this process SIGTERM once STOP exists: the job's documented graceful stop (finish the
  batch in flight, stop the query, exit 0). The REST kill endpoint cannot do that: it destroys the driver JVM,
  and PythonRunner neither forwards the signal nor stops its Python child;
- a killed driver leaves no orphaned Python job behind: the kernel sends this process SIGKILL when its
  parent (the driver JVM's thread that started it, PythonRunner's, which waits for it) dies
  (PR_SET_PDEATHSIG, Linux), and the same watcher thread exits the process when its parent has changed (the
  fallback elsewhere; a thread cannot do it once the interpreter is shutting down, the kernel can).

Must not: hold replication logic; everything else is `reconciler.replication.job.main`.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

POLL_SECONDS = 0.5
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent() -> bool:
    """Ask the kernel for SIGKILL when the parent dies (Linux); whether it was set."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0)


def watch(stop_file: Path, parent: int) -> None:
    """Until the process ends: SIGTERM to itself once `stop_file` exists; exit when `parent` is gone."""
    signalled = False
    while True:
        if os.getppid() != parent:
            os._exit(70)  # the driver JVM died (killed): nothing to finish without it
        if not signalled and stop_file.exists():
            signalled = True
            os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(POLL_SECONDS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kmirror-standalone-driver", add_help=False)
    parser.add_argument("--kmirror-log", type=Path, required=True)
    parser.add_argument("--kmirror-stop-file", type=Path, required=True)
    args, job_args = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
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
    from reconciler.replication.job import main as job_main

    return job_main(job_args)


if __name__ == "__main__":
    sys.exit(main())
