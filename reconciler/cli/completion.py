"""`kmirror completion bash|zsh|fish`: print click's shell-completion script for the `kmirror` command.

The script calls `kmirror` back with `_KMIRROR_COMPLETE` set to complete commands, options, choices and paths;
this module only prints it and installs nothing.
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

SHELLS = ("bash", "zsh", "fish")


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL (commands, options, choices and file names).

    \b
    Examples:
      eval "$(kmirror completion bash)"                      # in ~/.bashrc (bash 4.4+)
      kmirror completion zsh > "${fpath[1]}/_kmirror"        # then restart zsh
      kmirror completion fish > ~/.config/fish/completions/kmirror.fish
    """
    cls = get_completion_class(shell)
    if cls is None:  # click knows all three; guards against a click without one of them
        raise click.UsageError(f"click has no completion for {shell!r} in this version")
    root = ctx.find_root().command
    click.echo(cls(root, {}, "kmirror", "_KMIRROR_COMPLETE").source())
