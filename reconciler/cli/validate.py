"""`kmirror validate -f FILE`: offline checks of a desired-state file, every error at once, exit 1 on any.

With `--format json` it prints one document whether the file is valid or not: `valid`, the file, and every
error and warning as a diagnostic (see `diagnostics.py`).

Must not: contact a cluster (per-environment `${env:..}` values are resolved, secrets are not).
"""

from __future__ import annotations

import click

from reconciler.cli.diagnostics import diagnostics_of, document, dumps, issue_diagnostic
from reconciler.cli.options import file_option
from reconciler.errors import KmirrorError
from reconciler.spec import load


@click.command("validate")
@file_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def validate(path: str, fmt: str) -> None:
    """Check a desired-state file without touching any cluster.

    Reports every problem with file:line:column, the field and what to do; exits 1 if there is any error.
    `${env:NAME}` references in bootstrap_servers and other per-environment fields must be set.

    \b
    Examples:
      kmirror validate -f kmirror.yaml
      kmirror validate -f kmirror.yaml --format json | jq .spec_digest
      kmirror validate -f kmirror.yaml --format json | jq -r '.diagnostics[] | "\\(.location): \\(.summary)"'
    """
    try:
        loaded = load(path)  # a SpecError is printed by the group's handler, exit code 1
    except KmirrorError as exc:
        if fmt == "json":
            click.echo(dumps(document(diagnostics_of(exc), valid=False, file=path)))
        raise
    state = loaded.state
    if fmt == "json":
        doc = document(
            [issue_diagnostic(w) for w in loaded.warnings],
            valid=True,
            file=loaded.file,
            clusters=sorted(state.clusters),
            flows=[f.name for f in state.flows],
            warnings=[str(w) for w in loaded.warnings],
            spec_digest=state.spec_digest(),
        )
        click.echo(dumps(doc))
        return
    for warning in loaded.warnings:
        click.echo(str(warning), err=True)
    flows = len(state.flows)
    click.echo(
        f"{loaded.file} is valid: {len(state.clusters)} cluster{'s' if len(state.clusters) != 1 else ''}, "
        f"{flows} flow{'s' if flows != 1 else ''}"
        + (f", {len(loaded.warnings)} warning{'s' if len(loaded.warnings) != 1 else ''}" if loaded.warnings else "")
        + "."
    )
