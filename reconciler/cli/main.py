"""The `kmirror` command: one click group, one error handler, commands registered from their own modules.

Commands live one concern per module (`dev.py`, `validate.py`, ...) and are added in `_register()` below.
Core code never prints: commands render through `reconciler.cli.console`.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from reconciler import __version__
from reconciler.errors import KmirrorError


class KmirrorGroup(click.Group):
    """Runs every command under one handler: a `KmirrorError` becomes `Error: ...` and exit code 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KmirrorError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.secho(f"Error: {exc}", err=True, fg="red", color=_color(ctx))
            sys.exit(1)


def _color(ctx: click.Context) -> bool | None:
    return False if ctx.obj and ctx.obj.get("no_color") else None


@click.group(cls=KmirrorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kmirror")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.option("--no-color", is_flag=True, envvar="NO_COLOR", help="Never colour the output.")
@click.pass_context
def main(ctx: click.Context, debug: bool, no_color: bool) -> None:
    """kmirror: Terraform-style plan/apply for Kafka cross-cluster replication.

    \b
    Examples:
      kmirror dev up                      # two local Kafka clusters (3.9 source, 4.x target)
      kmirror validate -f kmirror.yaml    # offline checks
      kmirror plan -f kmirror.yaml        # what would change
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    ctx.obj["no_color"] = no_color


def _register() -> None:
    from reconciler.cli import dev, import_mm2, plan_apply, schema, validate

    main.add_command(dev.dev)
    main.add_command(validate.validate)
    main.add_command(schema.schema)
    main.add_command(import_mm2.import_group)
    main.add_command(plan_apply.plan)
    main.add_command(plan_apply.apply)
    main.add_command(plan_apply.state)
    main.add_command(plan_apply.force_unlock)


_register()
