"""`kmirror plan`, `kmirror apply`, `kmirror state ...` and `kmirror force-unlock`.

Exit codes (the design's contract): 0 success and, with --detailed-exitcode, no changes; 1 any error;
2 changes present (plan with --detailed-exitcode only).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from reconciler.app import operations
from reconciler.app.executor import ChangeOutcome
from reconciler.cli.diagnostics import json_errors, located_in
from reconciler.cli.extras import require_module
from reconciler.cli.options import file_option
from reconciler.cli.planfile import plan_key, read_plan
from reconciler.cli.progress import status
from reconciler.errors import KmirrorError
from reconciler.plan.definition import Action, Plan
from reconciler.resources.addresses import Kind
from reconciler.spec import load

_target_option = click.option(
    "--target",
    "targets",
    multiple=True,
    metavar="ADDRESS",
    help="Only these resources: an address, a prefix ending in '/', or a glob (repeatable).",
)


_DEPLOYS = (Action.CREATE, Action.UPDATE, Action.REPLACE)


def _color(ctx: click.Context) -> bool:
    return sys.stdout.isatty() and not (ctx.obj or {}).get("no_color")


def _render(plan: Plan, fmt: str, color: bool) -> str:
    if fmt == "json":
        return plan.to_json()
    if fmt == "markdown":
        from reconciler.render.markdown import render_markdown

        return render_markdown(plan)
    from reconciler.render.text import render_text

    return render_text(plan, color=color)


@click.command("plan")
@file_option
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Save the plan (JSON) for `apply`.")
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("--detailed-exitcode", is_flag=True, help="Exit 2 when there are changes, 0 when there are none.")
@_target_option
@click.option("--timeout", default=30.0, show_default=True, help="Seconds to wait for each cluster.")
@click.option(
    "--exact-budget",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds for reading the records that tell which group offsets translate exactly (0: not read).",
)
@click.pass_context
@json_errors()
def plan(
    ctx: click.Context, path: str, out: Path | None, fmt: str, detailed_exitcode: bool, targets: tuple[str, ...],
    timeout: float, exact_budget: float,
) -> None:  # fmt: skip
    """Show what apply would change: read the clusters, diff them against the desired state.

    \b
    Examples:
      kmirror plan -f kmirror.yaml
      kmirror plan -f kmirror.yaml --out plan.json && kmirror apply -f kmirror.yaml plan.json
      kmirror plan --format markdown > comment.md       # for a pull request
      kmirror plan --detailed-exitcode                   # drift check: exit 2 when anything changed
      kmirror plan --target topic/cloud/                 # only the topics on cluster 'cloud'

    With --format json a failure prints {"ok": false, "diagnostics": [...]} on stdout (and exits 1).
    """
    key = plan_key()
    loaded = load(path)
    with located_in(loaded), status("Reading the clusters, the state and the jobs"):
        result = operations.make_plan(loaded.state, targets=targets, timeout=timeout, exact_budget=exact_budget)
    result = result.sealed(key)  # keyed with KMIRROR_PLAN_KEY when it is set; otherwise the plan says it is unsealed
    if out is not None:
        out.write_text(result.to_json())
    click.echo(_render(result, fmt, _color(ctx)), nl=False)
    if out is not None and fmt == "text":
        click.echo(f"\nSaved the plan to {out}. Apply exactly it with: kmirror apply -f {path} {out}")
    if detailed_exitcode and result.has_changes:
        sys.exit(2)


@click.command("apply")
@file_option
@click.argument("planfile", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--auto-approve", is_flag=True, help="Apply without asking (CI). Without it, asks on a terminal.")
@click.option("--lock-timeout", default=0.0, show_default=True, help="Seconds to wait for another apply's lock.")
@_target_option
@click.option("--timeout", default=30.0, show_default=True, help="Seconds to wait for each cluster.")
@click.pass_context
def apply(
    ctx: click.Context, path: str, planfile: Path | None, auto_approve: bool, lock_timeout: float,
    targets: tuple[str, ...], timeout: float,
) -> None:  # fmt: skip
    """Make the clusters match the desired state (or execute exactly a saved plan).

    \b
    Examples:
      kmirror apply -f kmirror.yaml                   # plan, show, ask, apply
      kmirror apply -f kmirror.yaml --auto-approve    # CI on merge
      kmirror apply -f kmirror.yaml plan.json         # exactly the reviewed plan; refused if stale
    """
    key = plan_key()
    desired = load(path).state
    saved = read_plan(planfile) if planfile else None
    if saved is not None and key is None:
        click.echo(
            f"Note: {planfile} is not sealed (KMIRROR_PLAN_KEY was not set when it was made, nor is it now); apply "
            "checks it against a fresh plan of the clusters instead."
            if saved.seal == "none"
            else f"Note: {planfile} is sealed, but KMIRROR_PLAN_KEY is not set here, so its seal is not checked; apply "
            "checks it against a fresh plan of the clusters instead."
        )
    color = _color(ctx)
    started = time.monotonic()

    def confirm(p: Plan) -> bool:
        if any(c.kind == Kind.JOB and c.action in _DEPLOYS for c in p.changes):
            require_module("pyspark")  # before anything is changed, not as a failed job after the topics
        click.echo(_render(p, "text", color), nl=False)
        if auto_approve or saved is not None:
            return True
        if not sys.stdin.isatty():
            raise KmirrorError(
                "refusing to apply without confirmation: stdin is not a terminal. Pass --auto-approve, "
                "or save a plan with `kmirror plan --out plan.json` and apply that file."
            )
        return click.confirm("\nDo you want to perform these actions?", default=False)

    def progress(o: ChangeOutcome, done: int, total: int) -> None:
        mark = {"applied": click.style("ok", fg="green"), "failed": click.style("FAILED", fg="red")}.get(
            o.outcome, click.style(o.outcome, fg="yellow")
        )
        detail = f": {o.message}" if o.message and o.outcome != "applied" else ""
        click.echo(f"[{done}/{total}] {o.address} ({o.action}) {mark}{detail}", color=color)

    result = operations.apply(
        desired, saved=saved, confirm=confirm, progress=progress, lock_wait=lock_timeout, targets=targets,
        timeout=timeout, plan_key=key,
    )  # fmt: skip
    if result is None:
        click.echo("Apply cancelled; nothing was changed.")
        return
    if not result.outcomes:
        click.echo("No changes. The clusters match the desired state.")
        return
    applied = sum(o.outcome == "applied" for o in result.outcomes)
    failed = [o for o in result.outcomes if o.outcome == "failed"]
    skipped = [o for o in result.outcomes if o.outcome == "skipped"]
    click.echo(
        f"\nApply {'complete' if not failed and not skipped else 'finished with errors'}: {applied} applied, "
        f"{len(failed)} failed, {len(skipped)} skipped in {time.monotonic() - started:.1f}s "
        f"(state serial {result.serial})."
    )
    if failed or skipped:
        raise KmirrorError(
            "some changes were not applied:\n"
            + "\n".join(f"  {o.address}: {o.outcome}: {o.message}" for o in failed + skipped)
            + "\nFix the cause and run apply again; what was applied is recorded."
        )


@click.group("state")
def state() -> None:
    """Inspect what kmirror recorded in its state topic.

    \b
    Examples:
      kmirror state list -f kmirror.yaml
      kmirror state show -f kmirror.yaml topic/cloud/orders.eu
      kmirror state history -f kmirror.yaml --format json
    """


@state.command("list")
@file_option
def state_list(path: str) -> None:
    """Every managed resource, with the apply (serial) that last changed it.

    \b
    Example:
      kmirror state list -f kmirror.yaml | grep '^topic/'
    """
    snapshot = operations.read_state(load(path).state)
    for address, r in sorted(snapshot.resources.items()):
        click.echo(f"{address}  (serial {r.serial}, {r.applied_at})")
    if not snapshot.resources:
        click.echo("The state is empty: nothing applied yet.")


@state.command("show")
@file_option
@click.argument("address")
def state_show(path: str, address: str) -> None:
    """One resource's recorded (last-applied) form, as JSON.

    \b
    Example:
      kmirror state show -f kmirror.yaml topic/cloud/orders.eu | jq .after.configs
    """
    snapshot = operations.read_state(load(path).state)
    if address not in snapshot.resources:
        raise KmirrorError(f"no resource {address!r} in the state; `kmirror state list` shows what there is")
    click.echo(json.dumps(snapshot.resources[address].to_json(), indent=2, sort_keys=True))


@state.command("history")
@file_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def state_history(path: str, fmt: str) -> None:
    """Every apply: serial, status, who and from where, when, and its outcome per change.

    \b
    Examples:
      kmirror state history -f kmirror.yaml
      kmirror state history -f kmirror.yaml --format json | jq '.applies[-1]'
    """
    from reconciler.state.lock import holder

    snapshot = operations.read_state(load(path).state)
    live_lock = holder(snapshot)
    rows = [
        row.model_copy(update={"status": "interrupted"})
        if row.status == "running" and (live_lock is None or live_lock.id != row.lock_id)
        else row
        for row in operations.history_rows(snapshot)
    ]
    if fmt == "json":
        # keys in sorted order, as the records are written
        applies = [dict(sorted(row.to_json().items())) for row in rows]
        click.echo(json.dumps({"lineage": snapshot.lineage, "serial": snapshot.serial, "applies": applies}, indent=2))
        return
    click.echo(f"lineage {snapshot.lineage or '-'}, serial {snapshot.serial}")
    for row in rows:
        who = row.who
        counts = ", ".join(f"{n} {k}" for k, n in sorted(row.counts.items())) or "no changes"
        commit = f" @{who.git_commit[:8]}" if who.git_commit else ""
        click.echo(
            f"#{row.serial:<4} {row.status:<11} {row.started_at}  {who.user}@{who.host}{commit}"
            f"  plan {row.plan_id[:8]}  {counts}"
        )


@click.command("force-unlock")
@file_option
@click.argument("lock_id")
def force_unlock(path: str, lock_id: str) -> None:
    """Break the state lock LOCK_ID on purpose (its holder is fenced and can no longer write state).

    Only when the holder is gone (a killed CI job, a closed laptop): the "lock held" error names the holder
    and the LOCK_ID.

    \b
    Example:
      kmirror force-unlock -f kmirror.yaml 3f9c2a7b1d04
    """
    claim = operations.unlock(load(path).state, lock_id)
    click.echo(f"Released lock {claim.id} ({claim.operation} by {claim.holder.user}@{claim.holder.host}).")
