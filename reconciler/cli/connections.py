"""`kmirror connections BASE_FILE HEAD_FILE`: the pull-request warning about where kmirror connects, as Markdown.

The plan workflow runs it on the base branch's and the pull request's desired-state files and puts what it prints
(a warning, or nothing) at the top of the comment. It is a subcommand of the installed `kmirror`, never
`python -m ...` in the checkout: with the pull request's checkout as the working folder, `python -m` would import
a `reconciler/` folder the pull request adds, and run its code on a runner that reaches every cluster.

Must not: resolve a reference, or print anything of either file but the names of the fields that changed.
"""

from __future__ import annotations

from pathlib import Path

import click

from reconciler.spec.connections import connection_changes, warning_markdown
from reconciler.spec.files import FileTooLarge, read_capped
from reconciler.spec.yaml_source import MAX_DOCUMENT_BYTES


@click.command("connections", hidden=True)
@click.argument("base_file", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("head_file", type=click.Path(dir_okay=False, path_type=Path))
def connections(base_file: Path, head_file: Path) -> None:
    """Print a Markdown warning when HEAD_FILE changes a cluster's bootstrap_servers or client, or state.cluster,
    against BASE_FILE (nothing when it does not). A file that cannot be read counts as empty.

    \b
    Example (the plan workflow):
      kmirror connections base/kmirror.yaml kmirror.yaml > connections.md
    """
    click.echo(warning_markdown(connection_changes(_text(base_file), _text(head_file))), nl=False)


def _text(path: Path) -> str:
    try:
        return read_capped(path, MAX_DOCUMENT_BYTES).decode("utf-8", errors="replace")
    except (OSError, FileTooLarge):
        return ""
