"""Messages about a per-environment value that came from a reference name the reference, never what it read.

`bootstrap_servers: "${file:key.pem}"` resolves, at load, to whatever the file holds; a validation message would
quote it (`'-----BEGIN PRIVATE KEY-----...' is not host:port`), and a pull request could so publish any file below
the allowed folders. `hide_values(issue, fields)` rewrites a located issue: every quoted literal that is (part of)
the value of a field the issue is about becomes "the value of ${file:key.pem}", and the value itself, or any piece
of it (a line, a comma-separated entry), is replaced wherever else it appears. The scrubber (`redaction.remember_as`)
does the same for whole values in everything printed later; this module covers the pieces a validator quotes.

Pure. Must not: print, log or keep a value.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from reconciler.spec.issues import FieldPath, SpecIssue

_QUOTED = re.compile(r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*\"""")
_PIECES = re.compile(r"[\s,]+")
_MIN_PIECE = 4


@dataclass(frozen=True)
class ResolvedField:
    """A per-environment field's text as written (with references) and the value it resolved to."""

    written: str
    value: str


def hide_values(issue: SpecIssue, fields: Mapping[FieldPath, ResolvedField]) -> SpecIssue:
    """`issue` with no trace of a resolved value: quoted parts of its own field's value name the reference,
    and any field's value or piece of one is replaced by that field's written text."""
    message, hint = issue.message, issue.hint
    for path, field in fields.items():
        if not field.value:
            continue
        if _related(issue.path, path):
            message = _QUOTED.sub(lambda m, f=field: _name_quoted(m.group(0), f), message)  # type: ignore[misc]
        message, hint = _replace_pieces(message, field), _replace_pieces(hint, field)
    if message == issue.message and hint == issue.hint:
        return issue
    return replace(issue, message=message, hint=hint)


def _related(a: FieldPath, b: FieldPath) -> bool:
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


def _name_quoted(literal: str, field: ResolvedField) -> str:
    try:
        content = ast.literal_eval(literal)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return literal
    if not isinstance(content, str) or not content or content not in field.value:
        return literal
    if content == field.value:
        return f"the value of {field.written}"
    return f"a part of the value of {field.written}"


def _replace_pieces(text: str, field: ResolvedField) -> str:
    if field.value in text:
        text = text.replace(field.value, field.written)
    for piece in sorted(set(_PIECES.split(field.value)), key=len, reverse=True):
        if len(piece) >= _MIN_PIECE and piece in text and piece not in field.written:
            text = text.replace(piece, field.written)
    return text
