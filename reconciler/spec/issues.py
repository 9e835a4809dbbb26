"""Located problems in a desired-state file, and the one error type that carries all of them.

A `SpecIssue` renders as `path/kmirror.yaml:LINE:COL: field.path: what is wrong (what to do)`. The loader and
the validator collect every issue they find and raise one `SpecError` holding them all, so a user fixes a file
in one pass instead of one error per run. Warnings travel the same way but never fail a load.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from reconciler.errors import ConfigError
from reconciler.spec.printable import terminal_safe

Severity = Literal["error", "warning"]
FieldPath = tuple[str | int, ...]


def format_field_path(path: FieldPath) -> str:
    """`("flows", 0, "topics", "include", 2)` -> `flows[0].topics.include[2]`."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif text:
            text += f".{part}"
        else:
            text = str(part)
    return text or "(top level)"


@dataclass(frozen=True, order=True)
class SpecIssue:
    """One problem: where it is (file, 1-based line and column, field path), what is wrong, what to do."""

    file: str
    line: int
    column: int
    path: FieldPath
    message: str
    hint: str = ""
    severity: Severity = "error"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        label = "warning: " if self.severity == "warning" else ""
        text = f"{where}: {label}{format_field_path(self.path)}: {self.message}"
        return terminal_safe(f"{text} ({self.hint})" if self.hint else text, styles=False)


class SpecError(ConfigError):
    """The desired-state file has one or more errors; `issues` holds every one of them, in file order."""

    def __init__(self, issues: Iterable[SpecIssue]) -> None:
        self.issues: tuple[SpecIssue, ...] = tuple(sorted(issues, key=_issue_order))
        count = len([i for i in self.issues if i.severity == "error"])
        head = f"{count} error{'s' if count != 1 else ''} in the desired state"
        super().__init__(head + ":\n" + "\n".join(f"  {issue}" for issue in self.issues))

    @property
    def errors(self) -> tuple[SpecIssue, ...]:
        return tuple(i for i in self.issues if i.severity == "error")


class SecretResolutionError(ConfigError):
    """A `${env:...}` or `${file:...}` reference could not be resolved when a client needed it."""


def _issue_order(issue: SpecIssue) -> tuple[str, int, int, str]:
    return (issue.file, issue.line, issue.column, issue.message)


def raise_if_errors(issues: Sequence[SpecIssue]) -> None:
    """Raise a `SpecError` with all issues (warnings included, for context) when any of them is an error."""
    if any(i.severity == "error" for i in issues):
        raise SpecError(issues)
