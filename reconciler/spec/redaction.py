"""The one scrubber: every secret value this process has resolved, removed from any text before it leaves.

`SecretRef.resolve()` hands each value it produces to `remember()`; `learn(state)` resolves every reference of a
loaded desired state up front (failures are ignored here: they are reported where the value is used), so that
even a message written before the first client is built cannot carry a secret. `scrub(text)` replaces every known
value, and the forms it takes on the way (JAAS-escaped, JSON-escaped, `repr`-escaped, URL-encoded), with `***`.

Where it is applied: the CLI wraps stdout and stderr (`ScrubbingStream`) and scrubs its error messages; the
replication job puts `ScrubbingFilter` on its log handler. Values shorter than `MIN_LENGTH` characters are not
scrubbed (replacing every "a" would destroy the output without protecting anything: such a value is not a
secret worth the name).

Pure: no I/O except what `SecretRef.resolve()` reads in `learn()`. Must not: print, log or store a value it
holds, or expose the set of values.
"""

from __future__ import annotations

import io
import json
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

REDACTED = "***"
MIN_LENGTH = 4

_lock = threading.Lock()
_values: set[str] = set()
_ordered: tuple[str, ...] = ()


def remember(value: object) -> None:
    """Scrub `value` (and its escaped forms) from everything this process emits from now on."""
    if not isinstance(value, str) or len(value) < MIN_LENGTH:
        return
    forms = {
        value,
        value.replace("\\", "\\\\").replace('"', '\\"'),  # inside a JAAS line
        json.dumps(value)[1:-1],
        repr(value)[1:-1],
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote_plus(value),
    }
    global _ordered
    with _lock:
        new = {f for f in forms if len(f) >= MIN_LENGTH} - _values
        if not new:
            return
        _values.update(new)
        _ordered = tuple(sorted(_values, key=len, reverse=True))  # longest first: no half-scrubbed value


def scrub(text: str) -> str:
    """`text` with every remembered secret replaced by `***`."""
    for value in _ordered:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def scrub_bytes(data: bytes) -> bytes:
    """`scrub` for bytes (UTF-8; undecodable bytes are kept as they are)."""
    if not _ordered:
        return data
    return scrub(data.decode("utf-8", errors="surrogateescape")).encode("utf-8", errors="surrogateescape")


def knows_secrets() -> bool:
    return bool(_ordered)


def forget_all() -> None:
    """For tests: start from a scrubber that knows nothing."""
    global _ordered
    with _lock:
        _values.clear()
        _ordered = ()


def learn(state: object, *, base_dir: Path | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Resolve (and so remember) every `${env:..}`/`${file:..}` reference anywhere in `state`: a desired state,
    any part of it, or its JSON-shaped dump; references that cannot be resolved are skipped (their use reports them)."""
    from reconciler.spec.secrets import SecretRef

    if base_dir is None:
        base_dir = getattr(state, "base_dir", None)
    for ref in _references(state, set()):
        for single in ref.references:
            try:
                SecretRef(str(single)).resolve(base_dir, environ)
            except Exception:  # a missing secret is reported where it is used, not here
                continue


def _references(value: Any, seen: set[int]) -> Iterable[Any]:
    from pydantic import BaseModel

    from reconciler.spec.secrets import SecretRef

    if isinstance(value, SecretRef):
        yield value
        return
    if isinstance(value, str):
        if "${" in value:  # a JSON-shaped state (the job's spec file) holds references as plain strings
            try:
                yield SecretRef(value)
            except ValueError:
                return
        return
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _references(getattr(value, name, None), seen)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _references(item, seen)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _references(item, seen)


class ScrubbingStream(io.TextIOBase):
    """A text stream that scrubs what is written to it before passing it on (for sys.stdout and sys.stderr)."""

    def __init__(self, inner: IO[str]) -> None:
        super().__init__()
        self._inner = inner

    @property
    def inner(self) -> IO[str]:
        return self._inner

    def write(self, text: str) -> int:
        self._inner.write(scrub(text))
        return len(text)

    def flush(self) -> None:
        self._inner.flush()

    def isatty(self) -> bool:
        return self._inner.isatty()

    def fileno(self) -> int:
        return self._inner.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._inner, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._inner, "errors", None) or "strict"


def scrubbing_log_filter() -> Any:
    """A `logging.Filter` that scrubs each record's message (arguments merged in) and exception text."""
    import logging

    class ScrubbingFilter(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            if not _ordered:
                return True
            message = record.getMessage()
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.msg, record.args = scrub(message), None
            if record.exc_text:
                record.exc_text = scrub(record.exc_text)
            return True

    return ScrubbingFilter()
