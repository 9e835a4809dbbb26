"""Saved plans a pipeline hands to `kmirror apply PLANFILE`: added fields accepted within a format_version, an
older or newer format refused naming it, damage and edits refused with an error that names the file, the line and
the field, never a bug report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli.main import main
from reconciler.cli.planfile import read_plan
from reconciler.errors import InputFileError
from reconciler.plan.definition import Plan
from tests.unit.render.plans import PLANS

pytestmark = pytest.mark.unit

PLAN: Plan = PLANS["full"]()


def _write(tmp_path: Path, doc: Any, name: str = "plan.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc, indent=2))
    return path


def test_a_saved_plan_reads_back_equal(tmp_path: Path) -> None:
    assert read_plan(_write(tmp_path, PLAN.to_json())) == PLAN


def test_fields_added_within_a_format_version_are_accepted(tmp_path: Path) -> None:
    doc = json.loads(PLAN.to_json())
    doc["generator"] = {"name": "kmirror", "version": "1.4.0"}
    doc["state"]["workspace"] = "production"
    doc["summary"]["move"] = 0
    doc["changes"][0]["importance"] = "high"
    assert read_plan(_write(tmp_path, doc)) == PLAN


def test_a_newer_format_version_is_refused_naming_it(tmp_path: Path) -> None:
    doc = json.loads(PLAN.to_json()) | {"format_version": 3}
    with pytest.raises(
        InputFileError, match=r"plan.json: format_version: plan format_version 3 was written by a newer"
    ):
        read_plan(_write(tmp_path, doc))


def test_a_plan_of_the_previous_format_is_refused_saying_to_plan_again(tmp_path: Path) -> None:
    """A plan file written by the landed version before typed changes (format_version 1, kept verbatim)."""
    old = (Path(__file__).parent / "plan_format_1.json").read_text()
    assert json.loads(old)["format_version"] == 1
    with pytest.raises(InputFileError) as caught:
        read_plan(_write(tmp_path, json.loads(old)))
    message = str(caught.value)
    assert "plan format_version 1 was written by an older kmirror" in message
    assert "kmirror plan --out PLANFILE" in message and caught.value.field == "format_version"


def test_a_truncated_file_is_located(tmp_path: Path) -> None:
    text = PLAN.to_json()
    path = _write(tmp_path, text[: len(text) // 2])
    with pytest.raises(InputFileError) as caught:
        read_plan(path)
    assert caught.value.line is not None and caught.value.line > 1
    assert str(caught.value).startswith(f"{path}:{caught.value.line}:")
    assert "ends early" in str(caught.value) and "kmirror plan --out" in str(caught.value)


def test_a_wrong_type_names_the_field_and_its_line(tmp_path: Path) -> None:
    doc = json.loads(PLAN.to_json())
    doc["changes"][2]["action"] = "explode"
    path = _write(tmp_path, doc)
    with pytest.raises(InputFileError) as caught:
        read_plan(path)
    error = caught.value
    assert error.field == "changes[2].action" and '"explode" is not one of' in str(error)
    assert error.line is not None
    assert '"action": "explode"' in path.read_text().splitlines()[error.line - 1]


@pytest.mark.parametrize(
    ("text", "needle"),
    [("[1, 2]", "a plan is a JSON object, this file holds a list"), ('{"plan_id": 1}', "format_version")],
)
def test_other_shapes_are_refused(text: str, needle: str, tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match=needle):
        read_plan(_write(tmp_path, text))


def test_apply_of_a_corrupt_plan_is_a_user_error_not_a_bug(tmp_path: Path) -> None:
    spec = tmp_path / "kmirror.yaml"
    spec.write_text("version: 1\nclusters: {c: {bootstrap_servers: 'c:9092'}}\nstate: {cluster: c}\n")
    plan = _write(tmp_path, PLAN.to_json()[:100])
    result = CliRunner().invoke(main, ["apply", "-f", str(spec), str(plan)])
    assert result.exit_code == 1
    assert f"Error: {plan}:" in result.stderr and "bug in kmirror" not in result.stderr


def test_a_sealed_plan_with_an_added_field_still_matches_its_digest(tmp_path: Path) -> None:
    sealed = PLAN.sealed()
    doc = json.loads(sealed.to_json())
    doc["reviewed_by"] = "alice"  # a field a reviewer's tool (or a newer 1.x) added
    doc["changes"][0]["ticket"] = "OPS-1"
    reread = read_plan(_write(tmp_path, doc))
    assert reread == sealed and reread.digest == reread.content_digest()  # apply's alteration check passes
