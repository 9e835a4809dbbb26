"""Errors as machine-readable diagnostics: what `--format json` prints on failure (validate, plan, status).

A failed command with `--format json` still prints one JSON document on stdout, so a script never parses an
empty string: `{"ok": false, "error_count", "warning_count", "diagnostics": [...]}`, each diagnostic a
`reconciler.errors.Diagnostic` (severity, summary, detail, address, file:line:col, field). The human `Error:`
line still goes to stderr and the exit code is still 1.

Must not: decide anything about the error (that is the error's own business) or print anything but the document.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import click

from reconciler.errors import Diagnostic, KmirrorError
from reconciler.plan.builder import PlanError
from reconciler.spec.issues import SpecError, SpecIssue, format_field_path
from reconciler.spec.loader import LoadedSpec

P = ParamSpec("P")
R = TypeVar("R")


def issue_diagnostic(issue: SpecIssue) -> Diagnostic:
    return Diagnostic(
        severity=issue.severity,
        summary=issue.message,
        detail=issue.hint,
        file=issue.file,
        line=issue.line or None,
        column=issue.column or None,
        field=format_field_path(issue.path) if issue.path else None,
    )


def diagnostics_of(exc: KmirrorError) -> tuple[Diagnostic, ...]:
    if isinstance(exc, SpecError):
        return tuple(issue_diagnostic(i) for i in exc.issues)
    found = exc.problems if isinstance(exc, PlanError) else exc.diagnostics()
    spec: LoadedSpec | None = getattr(exc, _SPEC_ATTRIBUTE, None)
    return found if spec is None else tuple(_locate(d, spec) for d in found)


_SPEC_ATTRIBUTE = "kmirror_loaded_spec"


@contextmanager
def located_in(spec: LoadedSpec) -> Iterator[None]:
    """Errors raised in the block about a cluster get, as diagnostics, the place of its bootstrap_servers."""
    try:
        yield
    except KmirrorError as exc:
        setattr(exc, _SPEC_ATTRIBUTE, spec)
        raise


def _locate(diagnostic: Diagnostic, spec: LoadedSpec) -> Diagnostic:
    if diagnostic.file is not None or not (diagnostic.address or "").startswith("cluster/"):
        return diagnostic
    path = ("clusters", (diagnostic.address or "").removeprefix("cluster/"), "bootstrap_servers")
    if not spec.locations.has(path):
        return diagnostic
    mark = spec.locations.value(path)
    return dataclasses.replace(
        diagnostic, file=spec.file, line=mark.line, column=mark.column, field=format_field_path(path)
    )


def document(diagnostics: Iterable[Diagnostic], **extra: Any) -> dict[str, Any]:
    found = list(diagnostics)
    errors = sum(d.severity == "error" for d in found)
    return {
        "ok": errors == 0,
        **extra,
        "error_count": errors,
        "warning_count": len(found) - errors,
        "diagnostics": [d.to_json() for d in found],
    }


CLIENT_CONFIG_HINT = (
    "Check the clusters' client settings in the desired-state file (docs/security.md lists the keys kmirror "
    "translates for each client)."
)


def is_client_config_error(exc: BaseException) -> bool:
    """librdkafka refusing a property when a client is built: the user's input, not a bug in kmirror."""
    return type(exc).__name__ == "KafkaException" and "_INVALID_ARG" in str(exc)


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2)


def json_errors(**extra: Any) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a command with a `fmt` parameter: with `--format json`, a `KmirrorError` is also printed as an
    error document on stdout (then re-raised, so stderr and the exit code are as for any error)."""

    def wrap(command: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(command)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return command(*args, **kwargs)
            except KmirrorError as exc:
                if kwargs.get("fmt") == "json":
                    click.echo(dumps(document(diagnostics_of(exc), **extra)))
                raise
            except Exception as exc:
                if kwargs.get("fmt") == "json" and is_client_config_error(exc):
                    summary = f"a Kafka client refused its configuration: {exc}"
                    click.echo(dumps(document([Diagnostic("error", summary, CLIENT_CONFIG_HINT)], **extra)))
                raise

        return run

    return wrap
