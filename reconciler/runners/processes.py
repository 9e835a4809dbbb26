"""Whether a process on this machine runs: the one check the runners and the state lock share.

Must not: signal, wait for or reap a process (only signal 0 and /proc are used).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (an exited process its parent has not reaped yet)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X"):
            return False
    return True
