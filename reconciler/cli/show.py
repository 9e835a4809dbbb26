"""`kmirror show PLANFILE`: render a saved plan with everything apply would execute (Terraform's `show`).

The plan file is read by the same reader `kmirror apply PLANFILE` uses, so a damaged, edited or hostile file is
the same located error (file, line, field, what to do) here as there; a plan `show` renders is one `apply`
would read. Rendering is the renderers' (`reconciler.render`), from the plan value alone, in the full view:
each job's whole spec (bootstrap servers, client settings, flow, Spark), not only its digest, so that a reviewer
sees what apply deploys. Whether the plan is sealed is said first: checked against KMIRROR_PLAN_KEY when it is set.

Must not: read a cluster or the state topic, or re-plan; it shows exactly what the file holds, except that a
sensitive-looking value that is not a `${env:..}`/`${file:..}` reference is shown as `(sensitive value)`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from reconciler.cli.planfile import plan_key, read_plan
from reconciler.plan.definition import Plan


def render(plan: Plan, fmt: str, color: bool) -> str:
    """The plan in `fmt` (text, markdown or json), job specs included; json is the plan file's own form, with
    sensitive-looking values masked."""
    from reconciler.render.view import masked

    if fmt == "json":
        return json.dumps(masked(plan.model_dump(mode="json")), indent=2) + "\n"
    if fmt == "markdown":
        from reconciler.render.markdown import render_markdown

        return render_markdown(plan, full=True)
    from reconciler.render.text import render_text

    return render_text(plan, color=color, full=True)


def seal_note(plan: Plan, planfile: Path, key: bytes | None) -> str:
    """One line on the plan's seal, for stderr: what `apply` will make of it."""
    problem = plan.seal_problem(key)
    if problem is not None:
        return f"Warning: {planfile}: {problem}; `kmirror apply` will refuse it."
    if plan.seal == "none":
        return f"Note: {planfile} is not sealed (KMIRROR_PLAN_KEY was not set when it was made)."
    if key is None:
        return f"Note: {planfile} is sealed, but KMIRROR_PLAN_KEY is not set here, so the seal was not checked."
    return f"{planfile}: the seal matches KMIRROR_PLAN_KEY."


@click.command("show")
@click.argument("planfile", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.pass_context
def show(ctx: click.Context, planfile: Path, fmt: str) -> None:
    """Show a plan saved with `kmirror plan --out PLANFILE`, job specs included, without reading any cluster.

    \b
    Examples:
      kmirror show plan.json                       # review what `kmirror apply -f kmirror.yaml plan.json` does
      kmirror show plan.json --format markdown     # the pull-request comment of a plan made in CI
      kmirror show plan.json --format json | jq '.changes[].address'
    """
    plan = read_plan(planfile)
    color = sys.stdout.isatty() and not (ctx.obj or {}).get("no_color")
    click.echo(seal_note(plan, planfile, plan_key()), err=True)
    click.echo(render(plan, fmt, color), nl=False)
