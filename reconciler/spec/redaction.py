"""The one scrubber: every secret value this process has resolved, removed from any text before it leaves.

`SecretRef.resolve()` hands each value it produces to `remember()`; `learn(state)` resolves every reference of a
loaded desired state up front (failures are ignored here: they are reported where the value is used), so that
even a message written before the first client is built cannot carry a secret. `scrub(text)` replaces every known
value, and the forms it takes on the way (JAAS-escaped, JSON-escaped, `repr`-escaped, URL-encoded), with `***`.

A per-environment value (bootstrap servers, the state topic, Spark's master, REST URL and checkpoint root) that
came from a reference is handed to `remember_as(value, written)` instead: it is shown as the reference the user
wrote (`${file:bootstrap.txt}`), never as what the reference read, since a `${file:..}` can read any file below
the allowed folders.

The rule for short values, the same for both (docs/security.md): a value of `MIN_ANYWHERE` (8) characters or
more is replaced wherever it appears; a value of `MIN_LENGTH` (3) to 7 characters is replaced only where it stands
alone (no letter or digit right before or after it), so that a 4-character password `pass` is scrubbed from
`password=pass;` but the word `password` is left whole; a value of 1 or 2 characters is not replaced (it cannot
be told from ordinary text, and protects nothing).

Where it is applied: the CLI wraps stdout and stderr (`ScrubbingStream`) and scrubs its error messages; the
replication job puts `ScrubbingFilter` on its log handler.

Pure: no I/O except what `SecretRef.resolve()` reads in `learn()`. Must not: print, log or store a value it
holds, or expose the set of values.
"""

from __future__ import annotations

import io
import json
import re
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from reconciler.spec.printable import terminal_safe

REDACTED = "***"
MIN_LENGTH = 3
"""Values shorter than this are not scrubbed."""
MIN_ANYWHERE = 8
"""Values this long are scrubbed inside words too; shorter ones only where they stand alone."""

_lock = threading.Lock()
_shown: dict[str, str] = {}  # a form a value takes -> what is printed instead
_pattern: re.Pattern[str] | None = None


def remember(value: object) -> None:
    """Scrub `value` (and its escaped forms) from everything this process emits from now on: `***`."""
    _add(value, REDACTED)


def remember_as(value: object, written: str) -> None:
    """Show `value` (a per-environment value read through a reference) as `written`, the reference text."""
    _add(value, written)


def _add(value: object, shown: str) -> None:
    if not isinstance(value, str) or len(value.strip()) < MIN_LENGTH or value == shown:
        return
    escaped = _jaas(shown) if shown != REDACTED else shown
    forms = {
        value: shown,
        _jaas(value): escaped,  # inside a JAAS line
        json.dumps(value)[1:-1]: json.dumps(shown)[1:-1] if shown != REDACTED else shown,
        repr(value)[1:-1]: repr(shown)[1:-1] if shown != REDACTED else shown,
        urllib.parse.quote(value, safe=""): shown,
        urllib.parse.quote_plus(value): shown,
    }
    global _pattern
    with _lock:
        changed = False
        for form, replacement in forms.items():
            if len(form) < MIN_LENGTH or _shown.get(form) == REDACTED or _shown.get(form) == replacement:
                continue  # a secret stays a secret, whatever else it is also known as
            _shown[form] = replacement
            changed = True
            if replacement != REDACTED and replacement not in _shown:
                _shown[replacement] = replacement  # shown text is kept as it is: scrubbing twice changes nothing
        if changed:
            _pattern = _compile(_shown)


def _jaas(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _compile(shown: Mapping[str, str]) -> re.Pattern[str] | None:
    longest_first = sorted(shown, key=len, reverse=True)  # no half-scrubbed value
    anywhere = [re.escape(f) for f in longest_first if len(f) >= MIN_ANYWHERE]
    alone = [re.escape(f) for f in longest_first if len(f) < MIN_ANYWHERE]
    branches = []
    if anywhere:
        branches.append("|".join(anywhere))
    if alone:
        branches.append(r"(?<![A-Za-z0-9])(?:" + "|".join(alone) + r")(?![A-Za-z0-9])")
    return re.compile("|".join(branches)) if branches else None


def scrub(text: str) -> str:
    """`text` with every remembered secret replaced by `***`, every per-environment value by its reference."""
    pattern = _pattern
    if pattern is None or not text:
        return text
    return pattern.sub(lambda m: _shown.get(m.group(0), REDACTED), text)


def scrub_bytes(data: bytes) -> bytes:
    """`scrub` for bytes (UTF-8; undecodable bytes are kept as they are)."""
    if _pattern is None:
        return data
    return scrub(data.decode("utf-8", errors="surrogateescape")).encode("utf-8", errors="surrogateescape")


def knows_secrets() -> bool:
    return _pattern is not None


def forget_all() -> None:
    """For tests: start from a scrubber that knows nothing."""
    global _pattern
    with _lock:
        _shown.clear()
        _pattern = None


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
    """A text stream that scrubs what is written to it, and escapes control characters a name may carry
    (`printable.terminal_safe`), before passing it on (for sys.stdout and sys.stderr)."""

    def __init__(self, inner: IO[str]) -> None:
        super().__init__()
        self._inner = inner

    @property
    def inner(self) -> IO[str]:
        return self._inner

    def write(self, text: str) -> int:
        self._inner.write(terminal_safe(scrub(text)))
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
    """A `logging.Filter` that scrubs each record's message (arguments merged in) and exception text, and escapes
    the control characters a name in them may carry."""
    import logging

    class ScrubbingFilter(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            message = record.getMessage()
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.msg, record.args = terminal_safe(scrub(message), styles=False), None
            if record.exc_text:
                record.exc_text = terminal_safe(scrub(record.exc_text), styles=False)
            return True

    return ScrubbingFilter()
