"""`kmirror cutover`: move a flow's consumers to the target (the migration procedure), or check readiness.

Renders what `reconciler.app.cutover` reports; decides nothing itself.
"""

from __future__ import annotations

import json

import click

from reconciler.app import cutover as use_case
from reconciler.cli.options import file_option
from reconciler.spec import load


@click.command("cutover")
@file_option
@click.option("--flow", "flow_name", required=True, help="The flow whose consumers move to its target.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Show the steps and what each would do now (per partition: exact or conservative offset, and why); "
    "wait for and write nothing.",
)
@click.option("--check", is_flag=True, help="Only print cutover readiness (lag, translated groups, checkpoint age).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--timeout", default=300.0, show_default=True, help="Seconds to wait for lag 0 and idle consumers.")
@click.option(
    "--lock-timeout",
    default=0.0,
    show_default=True,
    help="Seconds to wait for the state lock (held by an apply or another cutover) before writing anything.",
)
def cutover(
    path: str, flow_name: str, dry_run: bool, check: bool, fmt: str, timeout: float, lock_timeout: float
) -> None:
    """Walk the migration procedure of one flow: lag 0, final checkpoint, group offsets, what to switch.

    Group offsets are translated exactly where the records after each offset-sync match on both clusters
    (nothing re-read, nothing skipped), with MM2's conservative rule elsewhere; each row says which, and why.

    The final checkpoint and the offset writes hold the state lock `kmirror apply` takes; --dry-run and
    --check take none.

    \b
    Examples:
      kmirror cutover -f kmirror.yaml --flow onprem-to-cloud --check     # readiness verdict
      kmirror cutover -f kmirror.yaml --flow onprem-to-cloud --dry-run   # the steps, nothing written
      kmirror cutover -f kmirror.yaml --flow onprem-to-cloud             # do it
    """
    desired = load(path).state
    if check:
        r = use_case.readiness(desired, flow_name)
        if fmt == "json":
            click.echo(json.dumps(r.to_json(), indent=2, sort_keys=True))
            return
        click.echo(f"flow {r.flow}: {r.verdict()}")
        for topic, lag in r.lag_per_topic().items():
            click.echo(f"  lag {topic}: {lag}")
        for group in r.groups:
            age = r.checkpoint_age_ms.get(group)
            text = "no checkpoint" if age is None else f"checkpoint age {age / 1000:.1f}s"
            click.echo(f"  group {group}: {text}{' (untranslated partitions)' if group in r.untranslated else ''}")
        return
    use_case.run_cutover(desired, flow_name, say=click.echo, dry_run=dry_run, timeout=timeout, lock_wait=lock_timeout)
