"""Read a file kmirror was pointed at, never more than a limit: `read_capped`.

Every file a user (or a pull request) names may be `/dev/zero`, a FIFO, or a 2 GB log: reading it whole would
take the machine's memory before any check could refuse it. `read_capped(path, limit)` reads at most `limit + 1`
bytes and raises `FileTooLarge` when there is more, so the caller can refuse it with its own message.

Must not: decide the limit (each caller knows what a sane file of its kind is), or decode the bytes.
"""

from __future__ import annotations

import os
from pathlib import Path


class FileTooLarge(Exception):
    """The file holds more than the limit; nothing beyond `limit + 1` bytes was read."""

    def __init__(self, path: str | os.PathLike[str], limit: int, head: bytes = b"") -> None:
        super().__init__(f"{path} is larger than {limit} bytes")
        self.path = str(path)
        self.limit = limit
        self.head = head
        """The first `limit` bytes, for a message that says where the limit was passed."""


def read_capped(path: str | os.PathLike[str], limit: int) -> bytes:
    """The whole content of `path`, which must be at most `limit` bytes (else `FileTooLarge`). OSError as `open`."""
    with Path(path).open("rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(path, limit, data[:limit])
    return data
