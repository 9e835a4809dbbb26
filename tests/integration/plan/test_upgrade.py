"""An upgrade from the landed release (the last commit before the typed seam, format_version 1) on real clusters.

What a user relies on when they upgrade kmirror in their pipeline: the state topic the previous version wrote is
read as it is (remote topics, internal topics, client quotas), so the first plan of the new version has nothing
to do; and a plan file the previous version saved is refused with a message that says to plan again, changing
nothing. The previous version runs from its own sources (`git archive` of the landed commit), with the same
dependencies.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import KafkaCluster
from tests.integration.plan.harness import World, create_topics, new_world

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
#: The landed release before issue 36 (plans of format_version 1, untyped state records).
LANDED = "7ab5122"


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The landed release's `reconciler` package, extracted from git (nothing installed, nothing in the repo)."""
    root = tmp_path_factory.mktemp("landed")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", LANDED, "reconciler"],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(root, filter="data")
    return root


def _landed_kmirror(world: World, landed: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(landed)}
    return subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=world.tmp,
        check=False,
    )


def test_the_landed_release_runs_from_its_own_sources(landed: Path) -> None:
    code = "import reconciler.plan.definition as d, reconciler; print(d.FORMAT_VERSION, reconciler.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(landed)},
        cwd=landed,  # not the checkout: `python -c` puts the working directory first on the path
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert out[0] == "1" and out[1].startswith(str(landed))


def test_a_state_written_by_the_landed_release_plans_nothing_and_its_saved_plan_is_refused(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster, landed: Path
) -> None:
    world = new_world(tmp_path, source, target)
    create_topics(
        source,
        (f"{world.prefix}orders", 3, {"retention.ms": "3600000"}),
        (f"{world.prefix}payments", 2, {"cleanup.policy": "compact"}),
    )
    spec = world.spec("replication: {throttle: 10MB}")
    applied = _landed_kmirror(world, landed, "apply", "-f", str(spec), "--auto-approve")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    old_plan = tmp_path / "old-plan.json"
    saved = _landed_kmirror(world, landed, "plan", "-f", str(spec), "--out", str(old_plan))
    assert saved.returncode == 0, saved.stderr
    assert json.loads(old_plan.read_text())["format_version"] == 1

    # The new version reads the old state as it is: nothing to do for its topics, internal topics and quotas.
    plan = world.plan_json(spec)
    assert plan["format_version"] == 2
    assert plan["changes"] == [], [c["address"] for c in plan["changes"]]
    assert plan["summary"] == {"create": 0, "update": 0, "replace": 0, "delete": 0}
    recorded = world.kmirror("state", "list", "-f", str(spec), check=True).stdout
    assert f"topic/{world.dst}/{world.remote(world.prefix + 'orders')}" in recorded
    assert f"quota/{world.src}/" in recorded and f"quota/{world.dst}/" in recorded

    # The old plan file is refused before anything is touched.
    refused = world.kmirror("apply", str(old_plan), "-f", str(spec))
    assert refused.returncode == 1
    assert "plan format_version 1 was written by an older kmirror" in refused.stderr
    assert "kmirror plan --out" in refused.stderr
    history = json.loads(world.kmirror("state", "history", "-f", str(spec), "--format", "json", check=True).stdout)
    assert len(history["applies"]) == 1  # only the landed release's apply
