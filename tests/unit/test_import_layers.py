"""The layering bans of issue 36 hold, and each one bites: a deliberate violation in a copy of the package
makes `lint-imports` fail naming the contract (a contract that cannot fail proves nothing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("layers")
    shutil.copytree(ROOT / "reconciler", root / "reconciler", ignore=shutil.ignore_patterns("__pycache__", "*.java"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def test_the_package_as_committed_keeps_every_contract(tree: Path) -> None:
    result = _lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "violation", "contract"),
    [
        (
            "reconciler/replication/progress.py",
            "import reconciler.plan.builder",
            "The job does not import the planner or the control plane's adapters",
        ),
        (
            "reconciler/replication/progress.py",
            "import reconciler.adapters.live_reader",
            "The job does not import the planner or the control plane's adapters",
        ),
        (
            "reconciler/adapters/record_ranges.py",
            "import reconciler.plan.topics",
            "The adapters and the Kafka clients do not import the planner or the application layer",
        ),
        (
            "reconciler/core/topic_rules.py",
            "import reconciler.plan.definition",
            "The core library sits under planner and job",
        ),
        (
            "reconciler/core/mm2/wire.py",
            "import confluent_kafka",
            "The core library sits under planner and job",
        ),
        (
            "reconciler/resources/recorded.py",
            "import reconciler.spec.models",
            "The resource vocabulary (kinds, addresses, recorded state, job reports) imports nothing of kmirror",
        ),
        (
            "reconciler/plan/jobs.py",
            "import reconciler.app.executor",
            "Nothing below the application layer imports it",
        ),
    ],
)
def test_a_deliberate_violation_breaks_its_contract(tree: Path, module: str, violation: str, contract: str) -> None:
    path = tree / module
    original = path.read_text()
    path.write_text(original + f"\n{violation}  # deliberate\n")
    try:
        result = _lint(tree)
    finally:
        path.write_text(original)
    assert result.returncode != 0
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract.split(" (")[0][:40] in " ".join(broken.split()), result.stdout
