"""What a Terraform or kubectl user expects of the CLI: examples in every --help, global --debug/--no-color
(also after the command), shell completion, one-line errors that say what to do, a progress line on a TTY."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reconciler.cli import progress
from reconciler.cli.main import main
from reconciler.spec.issues import SpecError

pytestmark = pytest.mark.unit


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


ALL_COMMANDS = [(), *_commands(main)]


@pytest.mark.parametrize("path", ALL_COMMANDS, ids=lambda p: " ".join(p) or "kmirror")
def test_every_command_has_help_with_an_example(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output, f"`kmirror {' '.join(path)} --help` shows no example"
    for line in result.output.split("Example", 1)[1].splitlines()[1:]:
        if line.strip().startswith("kmirror "):
            break
    else:
        raise AssertionError(f"`kmirror {' '.join(path)} --help`: the examples do not show a kmirror command line")


def test_the_expected_commands_exist() -> None:
    top = {p[0] for p in ALL_COMMANDS if p}
    assert {"validate", "plan", "apply", "state", "force-unlock", "schema", "import", "dev", "completion"} <= top


@pytest.mark.parametrize(
    ("shell", "needle"), [("bash", "complete -o"), ("zsh", "#compdef kmirror"), ("fish", "complete")]
)
def test_completion_prints_the_script(shell: str, needle: str) -> None:
    result = CliRunner().invoke(main, ["completion", shell])
    assert result.exit_code == 0
    assert needle in result.output and "_KMIRROR_COMPLETE" in result.output


def test_completion_refuses_an_unknown_shell() -> None:
    result = CliRunner().invoke(main, ["completion", "tcsh"])
    assert result.exit_code == 1 and "tcsh" in result.output


def test_completion_script_completes_commands_and_choices() -> None:
    env = {**os.environ, "_KMIRROR_COMPLETE": "bash_complete"}

    def complete(words: str, cword: int) -> list[str]:
        out = subprocess.run(
            [str(Path(sys.executable).parent / "kmirror")],  # the console script, as a shell would run it
            env={**env, "COMP_WORDS": words, "COMP_CWORD": str(cword)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return [line.split(",", 1)[1] for line in out.splitlines()]

    assert complete("kmirror pl", 1) == ["plan"]
    assert complete("kmirror plan --format ", 3) == ["text", "markdown", "json"]
    assert complete("kmirror completion ", 2) == ["bash", "zsh", "fish"]


def test_an_error_is_one_line_with_what_to_do_and_exit_1(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", "-f", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ")
    assert "check the path" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("args", [["--debug", "validate"], ["validate", "--debug"]], ids=["before", "after"])
def test_debug_reraises_before_or_after_the_command(args: list[str], tmp_path: Path) -> None:
    result = CliRunner().invoke(main, [*args, "-f", str(tmp_path / "missing.yaml")])
    assert isinstance(result.exception, SpecError)


def test_global_flags_after_double_dash_are_left_alone() -> None:
    # `--` ends option parsing: what follows is an argument, even when it looks like a global flag
    result = CliRunner().invoke(main, ["completion", "--", "--debug"])
    assert result.exit_code == 1 and "--debug" in result.output


def test_an_unexpected_exception_says_it_is_a_bug_and_how_to_get_the_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from reconciler.cli import validate

    def boom(path: str) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(validate, "load", boom)
    result = CliRunner().invoke(main, ["validate"])
    assert result.exit_code == 1
    assert "Error: unexpected RuntimeError: kaboom" in result.output
    assert "kmirror --debug" in result.output
    debug = CliRunner().invoke(main, ["validate", "--debug"])
    assert isinstance(debug.exception, RuntimeError)


def test_ctrl_c_exits_130_without_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    from reconciler.cli import validate

    def interrupted(path: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(validate, "load", interrupted)
    result = CliRunner().invoke(main, ["validate"])
    assert result.exit_code == 130 and "Interrupted" in result.output


@pytest.mark.parametrize("args", [["--no-color", "dev", "status"], ["dev", "status", "--no-color"]])
def test_no_color_strips_styles_even_on_a_terminal(args: list[str], tmp_path: Path) -> None:
    coloured = CliRunner().invoke(main, ["dev", "status", "--root", str(tmp_path)], color=True)
    assert coloured.exit_code == 0 and "\x1b[" in coloured.output
    plain = CliRunner().invoke(main, [*args, "--root", str(tmp_path)], color=True)
    assert plain.exit_code == 0 and "\x1b[" not in plain.output
    assert "stopped" in plain.output


def test_no_color_from_the_environment(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["dev", "status", "--root", str(tmp_path)], color=True, env={"NO_COLOR": "1"})
    assert "\x1b[" not in result.output


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_spins_on_a_terminal_and_erases_its_line() -> None:
    out = _Tty()
    with progress.status("Reading the clusters", stream=out, interval=0.01):
        import time

        time.sleep(0.1)
    text = out.getvalue()
    assert "Reading the clusters" in text
    assert text.endswith("\r\x1b[K")


def test_progress_is_silent_when_not_a_terminal() -> None:
    out = io.StringIO()
    with progress.status("Reading the clusters", stream=out, interval=0.01):
        pass
    assert out.getvalue() == ""


def test_progress_erases_its_line_when_the_block_fails() -> None:
    out = _Tty()
    with pytest.raises(ValueError), progress.status("x", stream=out, interval=0.01):
        raise ValueError
    assert out.getvalue().endswith("\r\x1b[K")
