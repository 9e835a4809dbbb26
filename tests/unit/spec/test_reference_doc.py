"""docs/reference.md is generated from the schema and committed fresh; it documents every field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import main
from reconciler.spec.reference import reference_markdown
from reconciler.spec.schema import json_schema

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def test_reference_doc_is_fresh() -> None:
    fix = "run 'kmirror schema --markdown -o docs/reference.md'"
    assert (ROOT / "docs/reference.md").read_text() == reference_markdown(), fix


def test_every_field_of_every_object_is_documented_with_its_default() -> None:
    schema = json_schema()
    page = reference_markdown(schema)
    for node in [schema, *schema["$defs"].values()]:
        for name, prop in node.get("properties", {}).items():
            assert f"| `{name}`" in page, name
            if isinstance(prop.get("default"), bool | int) and not isinstance(prop.get("default"), float):
                assert f"`{json.dumps(prop['default'])}`" in page
    for section in ("clusters.<alias>", "state", "spark", "flows[]", "flows[].naming", "flows[].offsets", "prune"):
        assert f"## `{section}`" in page


def test_durations_read_as_written_in_the_file() -> None:
    page = reference_markdown()
    assert "| `interval` | duration | `1s` |" in page
    assert "PT1S" not in page


def test_cli_writes_and_checks_the_page(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "reference.md"
    out.write_text("old")
    stale = runner.invoke(main, ["schema", "--markdown", "--check", "-o", str(out)])
    assert stale.exit_code == 1 and "kmirror schema --markdown" in stale.output
    assert runner.invoke(main, ["schema", "--markdown", "-o", str(out)]).exit_code == 0
    assert runner.invoke(main, ["schema", "--markdown", "--check", "-o", str(out)]).exit_code == 0
    assert runner.invoke(main, ["schema", "--markdown", "-o", "-"]).output == reference_markdown()
