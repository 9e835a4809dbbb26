"""The `kmirror` command: one click group, one error handler, commands registered from their own modules.

Commands live one concern per module (`dev.py`, `validate.py`, ...) and are added in `_register()` below.
Core code never prints: commands render through `reconciler.cli.console`.

The group is also the secrets boundary: stdout and stderr pass through the scrubber (`spec.redaction`), which
knows every secret value resolved in this process (the loader teaches it the desired state's), so no output or
error message, librdkafka's and Java's included, carries one; and every file kmirror creates is private to its
user (umask 077), as a log, a plan or a job folder may hold what a broker echoed back.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any

import click

from reconciler import __version__
from reconciler.cli.diagnostics import CLIENT_CONFIG_HINT, is_client_config_error
from reconciler.cli.extras import extra_for, missing_extra_message
from reconciler.errors import KmirrorError
from reconciler.spec.printable import terminal_safe
from reconciler.spec.redaction import ScrubbingStream, scrub

#: Exit code of every error, usage errors included (click's own default for those is 2).
USAGE_ERROR_EXIT_CODE = 1

#: Exit code when the reader of stdout went away: 128 + SIGPIPE, what a shell reports for `yes | head -1`'s yes.
SIGPIPE_EXIT_CODE = 128 + 13

#: Options of the `kmirror` group that are also accepted after a command name.
GLOBAL_FLAGS = ("--debug", "--no-color")


class KmirrorGroup(click.Group):
    """Runs every command under one handler: a `KmirrorError` becomes `Error: ...` and exit code 1.

    Anything else that escapes a command is a bug in kmirror, not in the user's input: it also exits 1 with one
    line, and says how to get the traceback. A module of an extra that is not installed (pyspark in a plan-only
    install) is an error naming the extra to install. `--debug` re-raises all of them. Ctrl-C exits 130 without
    a traceback.
    Click's usage errors (an unknown option, a bad choice, `--timeout abc`) are shown as click shows them but
    exit 1, not click's 2: exit code 2 means "changes present" (`plan --detailed-exitcode`) and nothing else,
    so a drift check never reads a typo as drift.
    """

    def main(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("standalone_mode", True) is False:
            return super().main(*args, **kwargs)
        kwargs["standalone_mode"] = False
        argv = list(kwargs.get("args") or (args[0] if args else None) or sys.argv[1:])
        try:
            result = super().main(*args, **kwargs)
        except click.exceptions.ClickException as exc:
            if _wants_json(argv):  # a script asked for JSON: it gets a document, on stdout, for this error too
                from reconciler.cli.diagnostics import document, dumps
                from reconciler.errors import Diagnostic

                hint = "run the command with --help for its options"
                click.echo(dumps(document([Diagnostic("error", exc.format_message(), hint)])))
            exc.show()
            sys.exit(USAGE_ERROR_EXIT_CODE)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(USAGE_ERROR_EXIT_CODE)
        # Without standalone mode click returns `ctx.exit(code)`'s code (e.g. 0 after --help) or the command's
        # return value (None): exit with the former, 0 for the latter.
        sys.exit(result if isinstance(result, int) else 0)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # `kmirror plan --debug` works like `kmirror --debug plan`, as kubectl users expect of global flags.
        if ctx.parent is None:
            end = args.index("--") if "--" in args else len(args)
            head = args[:end]
            args = [a for a in head if a in GLOBAL_FLAGS] + [a for a in head if a not in GLOBAL_FLAGS] + args[end:]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        os.umask(0o077)
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if not isinstance(stream, ScrubbingStream):
                setattr(sys, name, ScrubbingStream(stream))
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except KmirrorError as exc:
            if _debug(ctx):
                raise
            click.secho(_message(f"Error: {exc}"), err=True, fg="red", color=_color(ctx))
            sys.exit(1)
        except ModuleNotFoundError as exc:
            extra = extra_for(exc)
            if extra is None or _debug(ctx):
                raise
            click.secho(f"Error: {missing_extra_message(str(exc.name), extra)}", err=True, fg="red", color=_color(ctx))
            sys.exit(1)
        except BrokenPipeError:
            _reader_gone()
        except KeyboardInterrupt:
            if _debug(ctx):
                raise
            click.secho(
                "\nInterrupted. An apply in progress recorded what it finished; run `kmirror plan` to see what is "
                "left. If `kmirror state history` shows the apply still running, its lock is released when the "
                "lock expires, or now with `kmirror force-unlock LOCK_ID`.",
                err=True,
                fg="yellow",
                color=_color(ctx),
            )
            sys.exit(130)
        except Exception as exc:
            if _debug(ctx):
                raise
            if is_client_config_error(exc):
                click.secho(
                    _message(f"Error: a Kafka client refused its configuration: {exc}\n") + CLIENT_CONFIG_HINT,
                    err=True,
                    fg="red",
                    color=_color(ctx),
                )
                sys.exit(1)
            click.secho(
                _message(f"Error: unexpected {type(exc).__name__}: {exc}\n")
                + "This is a bug in kmirror. Run the command again with `kmirror --debug ...` for the traceback and "
                "report it with that output.",
                err=True,
                fg="red",
                color=_color(ctx),
            )
            sys.exit(1)


def _reader_gone() -> None:
    """The reader of stdout exited early (`kmirror ... | head`): stop quietly, as a Unix tool killed by SIGPIPE
    does (exit 141), with stdout pointed at /dev/null so that the final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a real file (a test's captured stream): nothing left to flush into a pipe
    sys.exit(SIGPIPE_EXIT_CODE)


def _message(text: str) -> str:
    """An error message ready for stderr: no secret, and no control character a name in it may carry."""
    return terminal_safe(scrub(text), styles=False)


def _wants_json(argv: list[str]) -> bool:
    """`--format json` (or `--format=json`) among the arguments of a command that prints JSON errors."""
    if not {"validate", "plan", "status", "verify"} & set(argv):
        return False
    pairs = zip(argv, [*argv[1:], ""], strict=True)
    return "--format=json" in argv or any(a == "--format" and b == "json" for a, b in pairs)


def _debug(ctx: click.Context) -> bool:
    return bool(ctx.obj and ctx.obj.get("debug"))


def _color(ctx: click.Context) -> bool | None:
    return False if ctx.obj and ctx.obj.get("no_color") else None


@click.group(cls=KmirrorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kmirror")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors (also after a command).")
@click.option(
    "--no-color",
    is_flag=True,
    envvar="NO_COLOR",
    help="Never colour the output (or set $NO_COLOR); also after a command.",
)
@click.pass_context
def main(ctx: click.Context, debug: bool, no_color: bool) -> None:
    """kmirror: Terraform-style plan/apply for Kafka cross-cluster replication.

    \b
    Examples:
      kmirror dev up                      # two local Kafka clusters (3.9 source, 4.x target)
      kmirror validate -f kmirror.yaml    # offline checks
      kmirror plan -f kmirror.yaml        # what would change
      kmirror apply -f kmirror.yaml       # make it so (asks first)
      kmirror completion bash             # shell completion: eval "$(kmirror completion bash)"

    Documentation: docs/ in the kmirror repository (concepts, reference, troubleshooting).
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    ctx.obj["no_color"] = no_color
    if no_color:
        ctx.color = False  # every click.echo/secho below strips styles, even on a terminal


def _register() -> None:
    from reconciler.cli import (
        completion,
        connections,
        cutover,
        dev,
        plan_apply,
        schema,
        show,
        state_cmds,
        status,
        validate,
    )

    main.add_command(dev.dev)
    main.add_command(validate.validate)
    main.add_command(schema.schema)
    main.add_command(state_cmds.import_group)  # `import ADDRESS` and `import mm2 FILE...`
    main.add_command(plan_apply.plan)
    main.add_command(plan_apply.apply)
    main.add_command(plan_apply.state)
    plan_apply.state.add_command(state_cmds.state_rm)
    main.add_command(show.show)
    main.add_command(plan_apply.force_unlock)
    main.add_command(cutover.cutover)
    main.add_command(status.status)
    main.add_command(completion.completion)
    main.add_command(connections.connections)  # hidden: the plan workflow's warning about connection changes
    from reconciler.cli import verify

    main.add_command(verify.verify)


_register()
