"""Exit codes scripts rely on: 0 success, 1 any error (usage errors included), 2 only for "changes present" with
`plan --detailed-exitcode`. Every command and subcommand is run with a bad option, as a typo in CI would be."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reconciler.cli.main import main
from reconciler.plan.definition import Action, AnyChange, Plan, change_of, summarize
from reconciler.resources.addresses import Kind
from tests.unit.render.plans import topic_form

pytestmark = pytest.mark.unit


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


ALL_COMMANDS = [(), *_commands(main)]


@pytest.mark.parametrize("path", ALL_COMMANDS, ids=lambda p: " ".join(p) or "kmirror")
def test_every_command_exits_1_on_an_unknown_option(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--no-such-option"])
    assert result.exit_code == 1, result.output
    assert "No such option" in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "--detailed-exitcode", "--format", "yml"],
        ["plan", "--detailed-exitcode", "--timeout", "abc"],
        ["apply", "--timeout", "abc"],
        ["status", "--format", "yaml"],
        ["status", "--timeout", "soon"],
        ["validate", "--format", "xml"],
        ["state", "history", "--format", "csv"],
        ["completion", "tcsh"],
        ["no-such-command"],
        ["state", "show"],  # a missing argument
    ],
    ids=lambda a: " ".join(a),
)
def test_usage_errors_exit_1_never_2(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "Error:" in result.output


def test_help_and_version_exit_0() -> None:
    assert CliRunner().invoke(main, ["plan", "--help"]).exit_code == 0
    assert CliRunner().invoke(main, ["--version"]).exit_code == 0


def test_the_console_script_exits_1_on_a_usage_error(tmp_path: Path) -> None:
    # the real entry point, as a cron job runs it: the exit code comes from the process, not from CliRunner
    run = subprocess.run(
        [str(Path(sys.executable).parent / "kmirror"), "plan", "--detailed-exitcode", "--format", "yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 1, run.stderr
    assert "'yml' is not one of" in run.stderr


def _plan(changes: tuple[AnyChange, ...]) -> Plan:
    return Plan(plan_id="p", created_at="2026-01-01T00:00:00Z", spec_digest="sha256:0", changes=changes,
                summary=summarize(changes))  # fmt: skip


_CREATE = change_of(address="topic/c/t", kind=Kind.TOPIC, action=Action.CREATE, after=topic_form("c", "t", 1, {}))


@pytest.mark.parametrize(("changes", "code"), [((), 0), ((_CREATE,), 2)], ids=["no changes", "changes"])
def test_detailed_exitcode_is_2_only_for_changes(
    changes: tuple[AnyChange, ...], code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reconciler.app import operations

    config = tmp_path / "kmirror.yaml"
    config.write_text("version: 1\nclusters: {c: {bootstrap_servers: 'c:9092'}}\nstate: {cluster: c}\n")
    monkeypatch.setattr(operations, "make_plan", lambda *a, **k: _plan(changes))
    result = CliRunner().invoke(main, ["plan", "-f", str(config), "--detailed-exitcode"])
    assert result.exit_code == code, result.output
    plain = CliRunner().invoke(main, ["plan", "-f", str(config)])
    assert plain.exit_code == 0, plain.output


@pytest.mark.parametrize("command", ["validate", "plan", "status", "verify"])
def test_a_usage_error_with_format_json_still_prints_a_json_document(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--format", "json", "--timeout-typo", "3"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and "No such option '--timeout-typo'" in doc["diagnostics"][0]["summary"]
    assert "Usage:" in result.stderr
