"""`kmirror show PLANFILE` shows everything apply would execute (job specs too, secrets masked), says whether the
plan is sealed, and turns a hostile file into a located error: exit 1, well under a second, bounded memory."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from reconciler.cli.planfile import MAX_PLAN_DEPTH
from reconciler.plan.definition import Plan
from tests.unit.render.plans import PLANS

pytestmark = pytest.mark.unit

KEY = "a-ci-secret-of-32-random-characters"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----"


def _show(*args: str, env: dict[str, str] | None = None) -> tuple[Result, float]:
    from reconciler.cli.main import main

    started = time.monotonic()
    result = CliRunner().invoke(main, ["show", *args], env={"KMIRROR_PLAN_KEY": "", **(env or {})})
    return result, time.monotonic() - started


def _jobs_plan(edit: Any = None, key: bytes | None = None) -> str:
    plan: Plan = PLANS["jobs"]()
    doc = json.loads(plan.to_json())
    if edit is not None:
        edit(doc)
    return Plan.from_json(json.dumps(doc)).sealed(key).to_json()


def _job_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = next(c for c in doc["changes"] if c["kind"] == "job" and c["after"])["after"]["spec"]
    return spec


def test_show_prints_the_job_spec_apply_deploys(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(_jobs_plan())
    spec = _job_spec(json.loads(path.read_text()))
    servers = next(iter(spec["clusters"].values()))["bootstrap_servers"]
    for fmt in ("text", "markdown"):
        result, _ = _show(str(path), "--format", fmt)
        assert result.exit_code == 0, result.output
        assert "bootstrap_servers" in result.stdout and servers in result.stdout


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_an_inline_key_in_a_plan_file_is_shown_as_sensitive(tmp_path: Path, fmt: str) -> None:
    def inline_key(doc: dict[str, Any]) -> None:
        next(iter(_job_spec(doc)["clusters"].values())).setdefault("client", {})["ssl.key.pem"] = PEM

    path = tmp_path / "plan.json"
    path.write_text(_jobs_plan(inline_key))
    result, _ = _show(str(path), "--format", fmt)
    assert result.exit_code == 0, result.output
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" not in result.output
    assert "PRIVATE KEY" not in result.output
    assert "(sensitive value)" in result.stdout


def test_show_says_whether_the_plan_is_sealed_and_whether_apply_would_take_it(tmp_path: Path) -> None:
    unsealed, sealed = tmp_path / "unsealed.json", tmp_path / "sealed.json"
    unsealed.write_text(_jobs_plan())
    sealed.write_text(_jobs_plan(key=KEY.encode()))
    result, _ = _show(str(unsealed))
    assert "not sealed" in result.stderr and "Unsealed:" in result.stdout
    result, _ = _show(str(sealed), env={"KMIRROR_PLAN_KEY": KEY})
    assert "seal matches" in result.stderr and "Unsealed:" not in result.stdout
    result, _ = _show(str(sealed), env={"KMIRROR_PLAN_KEY": "some-other-key-0123456789"})
    assert "does not match KMIRROR_PLAN_KEY" in result.stderr and "will refuse" in result.stderr


def test_a_short_plan_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(_jobs_plan())
    result, _ = _show(str(path), env={"KMIRROR_PLAN_KEY": "Zq7xK-pass"})
    assert result.exit_code == 1
    assert "KMIRROR_PLAN_KEY is too short" in result.output and "Zq7xK" not in result.output


def _hostile(tmp_path: Path, name: str) -> Path:
    if name == "/dev/zero":
        return Path("/dev/zero")
    path = tmp_path / "plan.json"
    if name == "deep":
        path.write_text('{"format_version": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif name == "deep-but-parseable":
        path.write_text('{"format_version": 1, "x": ' + "[" * 500 + "]" * 500 + "}")
    elif name == "long-number":
        path.write_text('{"format_version": ' + "1" * 100_000 + "}")
    elif name == "long-number-inside":
        path.write_text('{\n"format_version": 1,\n"plan_id": ' + "9" * 100_000 + "\n}")
    return path


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("/dev/zero", "larger than 64 MiB"),
        ("deep", f"nests more than {MAX_PLAN_DEPTH} levels"),
        ("deep-but-parseable", f"nests more than {MAX_PLAN_DEPTH} levels"),
        ("long-number", "digits"),
        ("long-number-inside", "digits"),
    ],
)
def test_a_hostile_plan_file_is_a_located_error_in_under_a_second(tmp_path: Path, name: str, says: str) -> None:
    path = _hostile(tmp_path, name)
    result, seconds = _show(str(path))
    assert result.exit_code == 1, result.output
    assert seconds < 1.0, f"took {seconds:.2f} s"
    assert says in result.stderr, result.stderr
    assert result.stderr.startswith(f"Error: {path}"), result.stderr
    assert "bug in kmirror" not in result.output and "Traceback" not in result.output
    assert result.stdout == ""
