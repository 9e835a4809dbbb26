"""A one-line progress display on stderr for operations that take seconds (reading clusters, planning).

Shown only when stderr is a terminal, so pipes, files, CI logs and `--format json` output stay clean; the line
is erased when the operation ends, whatever the outcome. Core code knows nothing about it.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

_FRAMES = "|/-\\"


@contextmanager
def status(message: str, stream: TextIO | None = None, interval: float = 0.1) -> Iterator[None]:
    """Show `message` with a spinner and the elapsed seconds while the block runs."""
    out = stream if stream is not None else sys.stderr
    if not _interactive(out):
        yield
        return
    done = threading.Event()
    started = time.monotonic()

    def spin() -> None:
        frame = 0
        while not done.wait(interval):
            out.write(f"\r{_FRAMES[frame % len(_FRAMES)]} {message} ({time.monotonic() - started:.0f}s)\x1b[K")
            out.flush()
            frame += 1

    thread = threading.Thread(target=spin, name="kmirror-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        out.write("\r\x1b[K")
        out.flush()


def _interactive(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or not a real stream
        return False
