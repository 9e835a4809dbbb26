"""`kmirror state rm ADDRESS...` and `kmirror import ADDRESS`: Terraform's state edits, for kmirror's state topic.

`state rm` forgets resources (the cluster keeps them); `import` adopts a remote topic or a synced ACL that is
already what the flow would create. Both take the state lock, as apply does, and leave an entry in
`kmirror state history` (operation `state rm` / `import`, who, when, the addresses). `kmirror import` also keeps
its older meaning, `kmirror import mm2 FILE...` (an MM2 configuration to a kmirror.yaml): a first argument that
is a subcommand's name runs that subcommand, anything else is an ADDRESS.

Must not: change anything on a cluster; record a resource that does not match what kmirror would make.
"""

from __future__ import annotations

from typing import Any

import click

from reconciler.app import operations
from reconciler.cli.import_mm2 import mm2
from reconciler.cli.options import file_option
from reconciler.spec import load

_lock_timeout_option = click.option(
    "--lock-timeout", default=0.0, show_default=True, help="Seconds to wait for another apply's lock."
)
_timeout_option = click.option("--timeout", default=30.0, show_default=True, help="Seconds to wait for each cluster.")


@click.command("rm")
@file_option
@click.argument("addresses", metavar="ADDRESS...", nargs=-1, required=True)
@_lock_timeout_option
@_timeout_option
def state_rm(path: str, addresses: tuple[str, ...], lock_timeout: float, timeout: float) -> None:
    """Forget resources in the state without touching the cluster (the topic or ACL stays as it is).

    The next plan sees a forgotten remote topic as one kmirror did not create (a plan error, until it is
    imported again); a forgotten ACL is left alone, as every ACL kmirror did not create.

    \b
    Examples:
      kmirror state rm -f kmirror.yaml topic/cloud/orders.eu
      kmirror state rm -f kmirror.yaml 'acl/cloud/User:alice/READ/orders.eu'
    """
    edit = operations.state_rm(load(path).state, addresses, lock_wait=lock_timeout, timeout=timeout)
    for address in edit.addresses:
        click.echo(f"Removed {address} from the state (the cluster was not changed).")
    click.echo(f"State serial {edit.serial}; see `kmirror state history`.")


class _ImportGroup(click.Group):
    """`kmirror import mm2 FILE...` as before; `kmirror import [-f FILE] ADDRESS` otherwise."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands:
            return "address", import_address, args
        return super().resolve_command(ctx, args)

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(ctx.command_path, "[-f FILE] ADDRESS | mm2 FILE...")


class _ImportAddress(click.Command):
    """Shown as `kmirror import [OPTIONS] ADDRESS`: it runs without a subcommand name of its own."""

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        path = ctx.parent.command_path if ctx.parent is not None else "kmirror import"
        formatter.write_usage(path, " ".join(self.collect_usage_pieces(ctx)))


@click.command("import", cls=_ImportAddress)
@file_option
@click.argument("address")
@_lock_timeout_option
@_timeout_option
def import_address(path: str, address: str, lock_timeout: float, timeout: float) -> None:
    """Adopt ADDRESS (an existing remote topic or synced ACL) as kmirror's."""
    edit = operations.import_resource(load(path).state, address, lock_wait=lock_timeout, timeout=timeout)
    for note in edit.notes:
        click.echo(f"warning: {note}", err=True)
    click.echo(f"Imported {address}: it matches what the flow would create; it is kmirror's now.")
    click.echo(f"State serial {edit.serial}; see `kmirror state history`.")


@click.group(
    "import",
    cls=_ImportGroup,
    context_settings={"ignore_unknown_options": True},
    subcommand_metavar="ADDRESS | mm2 FILE...",
)
def import_group(**_: Any) -> None:
    """Adopt an existing remote topic or ACL (ADDRESS), or import replication set up with MM2 (mm2).

    ADDRESS must already be exactly what a flow would create: a remote topic with the source's partition count
    and the configs the flow sets, or the ACLs the flow's ACL sync would create; otherwise the import is refused,
    with the differences. It takes the state lock and is recorded in `kmirror state history`.

    \b
    Options of `kmirror import ADDRESS`:
      -f, --file FILE        the desired-state file (default kmirror.yaml)
      --lock-timeout FLOAT   seconds to wait for another apply's lock (default 0)
      --timeout FLOAT        seconds to wait for each cluster (default 30)

    \b
    Examples:
      kmirror import -f kmirror.yaml topic/cloud/onprem.orders
      kmirror import -f kmirror.yaml 'acl/cloud/User:alice/READ/onprem.orders'
      kmirror import mm2 connect-mirror-maker.properties -o kmirror.yaml
    """


import_group.add_command(mm2)
