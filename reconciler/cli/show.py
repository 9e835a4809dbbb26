"""`kmirror show PLANFILE`: render a saved plan as `kmirror plan` would have shown it (Terraform's `show`).

The plan file is read by the same reader `kmirror apply PLANFILE` uses, so a damaged or edited file is the same
located error (file, line, field, what to do) here as there; a plan `show` renders is one `apply` would read.
Rendering is the renderers' (`reconciler.render`), from the plan value alone.

Must not: read a cluster or the state topic, or re-plan; it shows exactly what the file holds.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from reconciler.cli.planfile import read_plan
from reconciler.plan.definition import Plan


def render(plan: Plan, fmt: str, color: bool) -> str:
    """The plan in `fmt` (text, markdown or json); json is the plan file's own form, re-serialised."""
    if fmt == "json":
        return plan.to_json()
    if fmt == "markdown":
        from reconciler.render.markdown import render_markdown

        return render_markdown(plan)
    from reconciler.render.text import render_text

    return render_text(plan, color=color)


@click.command("show")
@click.argument("planfile", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.pass_context
def show(ctx: click.Context, planfile: Path, fmt: str) -> None:
    """Show a plan saved with `kmirror plan --out PLANFILE`, without reading any cluster.

    \b
    Examples:
      kmirror show plan.json                       # review what `kmirror apply -f kmirror.yaml plan.json` does
      kmirror show plan.json --format markdown     # the pull-request comment of a plan made in CI
      kmirror show plan.json --format json | jq '.changes[].address'
    """
    plan = read_plan(planfile)
    color = sys.stdout.isatty() and not (ctx.obj or {}).get("no_color")
    click.echo(render(plan, fmt, color), nl=False)
