"""A plan-only install (no `kmirror[spark]`) validates, plans and imports; a command that needs pyspark says
which extra to install, and apply says it before changing anything. pyspark's absence is simulated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from reconciler.cli.main import main
from reconciler.plan.definition import Action, Plan, change_of, summarize
from reconciler.resources.addresses import Kind

pytestmark = pytest.mark.unit

#: The smallest effective spec of a flow `f` (a job form carries one).
SPEC = {"flow": {"name": "f", "source": "a", "target": "b"}, "clusters": {}, "spark": {}}

ROOT = Path(__file__).resolve().parents[3]
SPARK_MODULES = ("pyspark", "py4j", "prometheus_client")


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] in SPARK_MODULES]:
        monkeypatch.delitem(sys.modules, name)
    for name in SPARK_MODULES:
        monkeypatch.setitem(sys.modules, name, None)  # `import pyspark` now raises ModuleNotFoundError


def test_a_command_that_needs_pyspark_names_the_extra(no_spark: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from reconciler.artifacts.driver_home import driver_home

    @click.command("needs-spark")
    def needs_spark() -> None:
        """Example: kmirror needs-spark"""
        driver_home()

    monkeypatch.setitem(main.commands, "needs-spark", needs_spark)
    result = CliRunner().invoke(main, ["needs-spark"])
    assert result.exit_code == 1
    assert "needs pyspark" in result.stderr and "pip install 'kmirror[spark]'" in result.stderr
    assert "bug in kmirror" not in result.stderr
    debug = CliRunner().invoke(main, ["--debug", "needs-spark"])
    assert isinstance(debug.exception, ModuleNotFoundError)


def test_apply_refuses_a_job_deploy_before_changing_anything(
    no_spark: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from reconciler.app import operations

    deploy = change_of(
        address="job/f",
        kind=Kind.JOB,
        action=Action.CREATE,
        after={"flow": "f", "operation": "deploy", "runner": "local", "spec_digest": "d", "spec": SPEC},
    )
    plan = Plan(plan_id="p", created_at="t", spec_digest="d", changes=(deploy,), summary=summarize((deploy,)))
    executed: list[Plan] = []

    def fake_apply(desired: Any, *, confirm: Any, **kwargs: Any) -> None:
        if confirm(plan):
            executed.append(plan)

    monkeypatch.setattr(operations, "apply", fake_apply)
    spec = tmp_path / "kmirror.yaml"
    spec.write_text("version: 1\nclusters: {c: {bootstrap_servers: 'c:9092'}}\nstate: {cluster: c}\n")
    result = CliRunner().invoke(main, ["apply", "-f", str(spec), "--auto-approve"])
    assert result.exit_code == 1 and "pip install 'kmirror[spark]'" in result.stderr
    assert executed == []


def test_the_plan_path_runs_without_spark(tmp_path: Path) -> None:
    """In a fresh interpreter where pyspark, py4j and prometheus_client cannot be imported at all."""
    script = f"""
import sys
for name in {SPARK_MODULES!r}:
    sys.modules[name] = None
import reconciler.app.operations, reconciler.app.flow_status, reconciler.cli.plan_apply  # what plan and status import
from reconciler.cli.main import main
codes = []
for args in (["validate", "-f", {str(ROOT / "examples/migration/kmirror.yaml")!r}], ["plan", "--help"],
             ["import", "mm2", {str(ROOT / "tests/fixtures/strimzi/kafka-mirror-maker-2.yaml")!r}]):
    try:
        main.main(args, prog_name="kmirror")
    except SystemExit as exit:
        codes.append(exit.code)
print(codes)
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "[0, 0, 0]", run.stdout + run.stderr
