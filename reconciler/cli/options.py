"""Options shared by several commands, declared once."""

from __future__ import annotations

import click

#: `-f/--file`: the desired-state file, passed to the command as `path`.
file_option = click.option(
    "-f",
    "--file",
    "path",
    default="kmirror.yaml",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The desired-state file.",
)
