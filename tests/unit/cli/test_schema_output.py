"""`kmirror schema` prints to stdout and writes a file only when `-o PATH` names one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import main
from reconciler.spec.schema import schema_text

pytestmark = pytest.mark.unit


def test_schema_goes_to_stdout_and_touches_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0
    assert result.stdout == schema_text() and json.loads(result.stdout)["title"]
    assert list(tmp_path.iterdir()) == []


def test_dash_o_writes_the_file_and_check_compares_it(tmp_path: Path) -> None:
    path = tmp_path / "out" / "kmirror.schema.json"
    written = CliRunner().invoke(main, ["schema", "-o", str(path)])
    assert written.exit_code == 0 and written.stdout == "" and path.read_text() == schema_text()
    assert CliRunner().invoke(main, ["schema", "--check", "-o", str(path)]).exit_code == 0
    path.write_text("{}")
    stale = CliRunner().invoke(main, ["schema", "--check", "-o", str(path)])
    assert stale.exit_code == 1 and f"kmirror schema -o {path}" in stale.stderr
