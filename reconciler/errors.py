"""The one error root of kmirror, its meaningful subclasses, and the diagnostic record errors are reported as.

Every error a user can hit is a `KmirrorError` whose message says what was wrong, where, and what to do.
The CLI prints `Error: <message>` and exits 1; `--debug` shows the traceback instead. With `--format json`
(validate, plan, status) the same error is printed as a list of `Diagnostic`s, Terraform's
`{Address, Summary, Detail, Severity}` plus where in which file.

Must not: import a client, the CLI or dev tooling (import-linter holds it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

Severity = Literal["error", "warning"]


class DiagnosticDoc(TypedDict):
    """A diagnostic in the CLI's JSON (`--format json`)."""

    severity: Severity
    summary: str
    detail: str
    address: str | None
    location: str | None
    file: str | None
    line: int | None
    column: int | None
    field: str | None


@dataclass(frozen=True)
class Diagnostic:
    """One problem for a machine to read: how bad, what (one line), more (what to do), which resource, where."""

    severity: Severity
    summary: str
    detail: str = ""
    address: str | None = None
    file: str | None = None
    line: int | None = None
    column: int | None = None
    field: str | None = None

    @property
    def location(self) -> str | None:
        """`file:line:col`, `file` alone when the line is unknown, None when no file is involved."""
        if self.file is None:
            return None
        return f"{self.file}:{self.line}:{self.column}" if self.line else self.file

    @classmethod
    def warning(cls, address: str | None, summary: str) -> Diagnostic:
        """A warning about the resource at `address` (None: about the whole plan)."""
        return cls("warning", summary, address=address)

    @classmethod
    def error(cls, address: str | None, summary: str) -> Diagnostic:
        """An error about the resource at `address` (None: about the whole plan)."""
        return cls("error", summary, address=address)

    def __str__(self) -> str:
        """One line for people: `<address>: <summary>`, or the summary alone."""
        return f"{self.address}: {self.summary}" if self.address else self.summary

    def to_json(self) -> DiagnosticDoc:
        return {
            "severity": self.severity,
            "summary": self.summary,
            "detail": self.detail,
            "address": self.address,
            "location": self.location,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "field": self.field,
        }


class KmirrorError(Exception):
    """Base of every error kmirror reports to a user."""

    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """The error as diagnostics: by default one, its first line the summary and the rest the detail."""
        summary, _, detail = str(self).partition("\n")
        return (Diagnostic("error", summary.strip(), detail.strip()),)


class ConfigError(KmirrorError):
    """The desired-state file (or another input file) is invalid."""


class InputFileError(ConfigError):
    """An input file other than the desired state (a saved plan, an MM2 config) is invalid; located in it."""

    def __init__(
        self, file: str, message: str, hint: str = "", *, line: int | None = None, column: int | None = None,
        field: str | None = None,
    ) -> None:  # fmt: skip
        self.file, self.line, self.column, self.field, self.message, self.hint = (
            file,
            line,
            column,
            field,
            message,
            hint,
        )
        where = f"{file}:{line}:{column}" if line else file
        text = f"{where}: {field + ': ' if field else ''}{message}"
        super().__init__(f"{text} ({hint})" if hint else text)

    def diagnostics(self) -> tuple[Diagnostic, ...]:
        return (Diagnostic("error", self.message, self.hint, None, self.file, self.line, self.column, self.field),)


class ClusterUnreachableError(KmirrorError):
    """A Kafka cluster did not answer in time."""

    def __init__(self, message: str, *, cluster: str | None = None) -> None:
        self.cluster = cluster
        super().__init__(message)

    def diagnostics(self) -> tuple[Diagnostic, ...]:
        summary, _, detail = str(self).partition(": ")
        address = f"cluster/{self.cluster}" if self.cluster else None
        return (Diagnostic("error", summary.strip(), detail.strip(), address),)


class MissingExtraError(KmirrorError):
    """A command needs an optional dependency (an extra such as `kmirror[spark]`) that is not installed."""


class DevEnvError(KmirrorError):
    """The local development clusters could not be fetched, started or stopped."""


class WireFormatError(KmirrorError):
    """Bytes of an MM2 internal-topic record (heartbeat, checkpoint, offset-sync) could not be read or written."""


class ManyErrors(KmirrorError):
    """Several independent errors found at once (e.g. two clusters that did not answer); one line each."""

    def __init__(self, errors: list[KmirrorError]) -> None:
        self.errors = tuple(errors)
        super().__init__("\n".join(str(e) for e in errors))

    def diagnostics(self) -> tuple[Diagnostic, ...]:
        return tuple(d for e in self.errors for d in e.diagnostics())
