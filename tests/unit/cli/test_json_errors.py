"""`--format json` on validate, plan and status prints a diagnostics document on failure too (golden files).

A script reads stdout as JSON whatever happens: `{"ok": false, "error_count", "diagnostics": [{"severity",
"summary", "detail", "address", "location": "file:line:col", ...}]}`; the human error goes to stderr, exit 1.
Rewrite the golden files after an intended change with `KMIRROR_UPDATE_GOLDEN=1 pytest tests/unit/cli`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import main

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden"
INPUTS = Path(__file__).parents[2] / "fixtures" / "bad_inputs"
UPDATE = os.environ.get("KMIRROR_UPDATE_GOLDEN") == "1"

CASES = [
    ("validate", "syntax.yaml"),
    ("validate", "fields.yaml"),
    ("validate", "env.yaml"),
    ("validate", "list.yaml"),
    ("validate", "missing.yaml"),
    ("plan", "fields.yaml"),
    ("plan", "env.yaml"),
    ("status", "syntax.yaml"),
    ("status", "env.yaml"),
]


@pytest.mark.parametrize(("command", "name"), CASES, ids=[f"{c}-{n}" for c, n in CASES])
def test_json_error_document(command: str, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for file in INPUTS.iterdir():
        shutil.copy(file, tmp_path / file.name)
    monkeypatch.chdir(tmp_path)  # relative paths in the document, the same on every machine
    monkeypatch.delenv("KMIRROR_GOLDEN_ONPREM", raising=False)
    result = CliRunner().invoke(main, [command, "-f", name, "--format", "json"])
    assert result.exit_code == 1, result.output
    assert "Error:" in result.stderr and "Error:" not in result.stdout
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and doc["error_count"] >= 1
    assert all(d["location"] is None or d["location"].startswith(name) for d in doc["diagnostics"])
    golden = GOLDEN / f"{command}-{Path(name).stem}.json"
    if UPDATE:
        golden.write_text(result.stdout, encoding="utf-8")
    assert result.stdout == golden.read_text(encoding="utf-8")


def test_a_valid_file_reports_its_warnings_as_diagnostics(tmp_path: Path) -> None:
    path = tmp_path / "kmirror.yaml"
    path.write_text(
        "version: 1\nclusters: {a: {bootstrap_servers: 'a:1'}, b: {bootstrap_servers: 'b:1'}}\nstate: {cluster: b}\n"
        "flows: [{name: f, source: a, target: b, topics: {include: ['orders.*']}}]\n"
    )
    doc = json.loads(CliRunner().invoke(main, ["validate", "-f", str(path), "--format", "json"]).stdout)
    assert doc["ok"] is True and doc["valid"] is True and doc["error_count"] == 0
    assert doc["warning_count"] == len(doc["warnings"]) == len(doc["diagnostics"])


def test_a_plan_problem_becomes_a_diagnostic_with_its_address(tmp_path: Path) -> None:
    """The planner's problems carry their subject: the CLI's JSON names it without reading the message."""
    import dataclasses

    from reconciler.cli.diagnostics import diagnostics_of
    from reconciler.live.model import ClusterState, LiveState
    from reconciler.plan.builder import PlanError, build_plan
    from reconciler.resources.job_status import JobStatus
    from reconciler.resources.recorded import RecordedState
    from reconciler.spec.loader import load_desired_state
    from tests.unit.plan.builders import live, topic

    path = tmp_path / "kmirror.yaml"
    path.write_text(
        "version: 1\nclusters: {src: {bootstrap_servers: 'a:1'}, src2: {bootstrap_servers: 'c:1'}, "
        "dst: {bootstrap_servers: 'b:1'}}\nstate: {cluster: dst}\nflows:\n"
        "  - {name: f, source: src, target: dst, topics: {include: ['ord.*']}, naming: {policy: identity}}\n"
        "  - {name: g, source: src2, target: dst, topics: {include: ['or.*']}, naming: {policy: identity},\n"
        "     topic_defaults: {replication_factor: 5}}\n"
    )
    desired = load_desired_state(path)
    base = live(src=[topic("orders")], internal=False)
    dst = dataclasses.replace(base.clusters["dst"], brokers=3)  # flow g asks for 5 replicas
    world = LiveState(
        clusters={**base.clusters, "dst": dst, "src2": ClusterState("src2", {"orders": topic("orders")}, None)}
    )
    with pytest.raises(PlanError) as raised:
        build_plan(desired, world, RecordedState(), JobStatus(), plan_id="p", created_at="t")
    found = {d.address: d for d in diagnostics_of(raised.value)}
    assert set(found) == {"topic/dst/orders", "job/g"}
    assert found["topic/dst/orders"].summary.startswith("two sources would write this remote topic: src:orders")
    assert found["job/g"].summary.startswith("topic_defaults.replication_factor is 5")
    assert all(d.severity == "error" and not d.summary.startswith(d.address or "-") for d in found.values())
