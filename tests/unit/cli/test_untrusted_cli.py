"""Issue 35, part A, at the command line: hostile input is a located error with exit code 1, never "a bug in
kmirror"; `--format json` answers with a document whatever fails; a reader that stops early ends kmirror quietly.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import SIGPIPE_EXIT_CODE, main
from reconciler.spec.redaction import forget_all

pytestmark = pytest.mark.unit

KMIRROR = [sys.executable, "-m", "reconciler.cli"]


@pytest.fixture(autouse=True)
def _fresh_scrubber() -> Iterator[None]:
    forget_all()
    yield
    forget_all()


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_an_endless_file_is_refused_in_under_a_second(fmt: str) -> None:
    started = time.monotonic()
    result = CliRunner().invoke(main, ["validate", "-f", "/dev/zero", "--format", fmt])
    assert time.monotonic() - started < 1.0
    assert result.exit_code == 1 and "bug in kmirror" not in result.output
    assert "/dev/zero:1:1" in result.output and "kmirror reads at most 4 MiB" in result.output


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_an_oversized_duration_is_a_located_error(tmp_path: Path, command: str) -> None:
    spec = tmp_path / "kmirror.yaml"
    spec.write_text(
        "version: 1\nclusters: {a: {bootstrap_servers: '127.0.0.1:1'}, b: {bootstrap_servers: '127.0.0.1:1'}}\n"
        "state: {cluster: a}\nflows:\n  - {name: f, source: a, target: b, heartbeats: {interval: 1e999}}\n"
    )
    result = CliRunner().invoke(main, [command, "-f", str(spec), "--format", "json"])
    assert result.exit_code == 1 and "bug in kmirror" not in result.output
    (diagnostic,) = json.loads(result.stdout)["diagnostics"]
    assert diagnostic["line"] == 5 and diagnostic["field"] == "flows[0].heartbeats.interval"


def test_an_escape_sequence_in_a_cluster_name_is_shown_not_obeyed(tmp_path: Path) -> None:
    spec = tmp_path / "kmirror.yaml"
    spec.write_text('version: 1\nclusters: {a: {bootstrap_servers: "a:1"}}\nstate: {cluster: "\\e[2J\\e]0;x\\a"}\n')
    for fmt in ("text", "json"):
        result = CliRunner().invoke(main, ["validate", "-f", str(spec), "--format", fmt], color=True)
        assert result.exit_code == 1
        assert "\x1b[2J" not in result.output and "\x07" not in result.output
    text = CliRunner().invoke(main, ["validate", "-f", str(spec)], color=True).output
    assert "unknown cluster '\\x1b[2J\\x1b]0;x\\x07'" in text


def test_plan_json_prints_a_document_when_the_client_refuses_its_configuration(tmp_path: Path) -> None:
    spec = tmp_path / "kmirror.yaml"
    spec.write_text(
        "version: 1\nclusters:\n  a: {bootstrap_servers: '127.0.0.1:1', "
        "client: {security.protocol: SASL_PLAINTEXT, sasl.mechanism: '${env:KM_MECH}'}}\nstate: {cluster: a}\n"
    )
    result = CliRunner(env={"KM_MECH": "NOT-A-MECHANISM-42"}).invoke(
        main, ["plan", "-f", str(spec), "--format", "json"]
    )
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and doc["error_count"] == 1
    assert "refused its configuration" in doc["diagnostics"][0]["summary"]
    assert "NOT-A-MECHANISM-42" not in result.output  # a secret reference: scrubbed


@pytest.mark.parametrize("args", [["schema"], ["dev", "status", "--format", "json"]])
def test_a_reader_that_stops_early_ends_kmirror_quietly(tmp_path: Path, args: list[str]) -> None:
    """`kmirror ... | head -c1`: no traceback, no "bug in kmirror", the exit code a shell gives SIGPIPE."""
    process = subprocess.Popen([*KMIRROR, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before kmirror (still starting) writes anything
    stderr = process.stderr.read().decode()
    code = process.wait(timeout=60)
    assert "bug in kmirror" not in stderr and "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert code == SIGPIPE_EXIT_CODE


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["import", "mm2", "/dev/zero"], "larger than 4 MiB"),
        (["schema", "--check", "-o", "/dev/zero"], "is stale"),
    ],
)
def test_other_files_kmirror_reads_are_read_up_to_a_limit(args: list[str], says: str) -> None:
    started = time.monotonic()
    result = CliRunner().invoke(main, args)
    assert time.monotonic() - started < 1.0
    assert result.exit_code == 1 and says in result.output and "bug in kmirror" not in result.output
