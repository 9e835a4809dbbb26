"""The README's demo, as a new user runs it: `kmirror dev demo` then `kmirror status`, then `kmirror dev down`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.devenv import dev_clusters

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _kmirror(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "reconciler.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip


def test_demo_replicates_to_lag_zero_and_down_leaves_nothing_running(tmp_path: Path) -> None:
    root = tmp_path / "dev"
    try:
        demo = _kmirror("dev", "demo", "--root", str(root), cwd=tmp_path)
        assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
        assert "cutover: ready: lag 0, all 1 group(s) translated" in demo.stdout

        spec = root / "demo" / "kmirror.yaml"
        status = json.loads(_kmirror("status", "-f", str(spec), "--format", "json", cwd=tmp_path).stdout)
        [flow] = status["flows"]
        assert flow["running"] and flow["lag_total"] == 0 and flow["ready"]
        assert flow["records"] >= 40_000
        assert flow["heartbeat_age_ms"] is not None and flow["heartbeat_age_ms"] < 60_000
        plan = _kmirror("plan", "-f", str(spec), "--detailed-exitcode", cwd=tmp_path)
        assert plan.returncode == 0, plan.stdout + plan.stderr
    finally:
        down = _kmirror("dev", "down", "--root", str(root), cwd=tmp_path)
    assert down.returncode == 0, down.stderr
    assert "stopped the replication job of flow source-to-target" in down.stdout
    assert not any(s.running for s in dev_clusters.status(root))
    leftovers = subprocess.run(["pgrep", "-f", str(root)], capture_output=True, text=True, check=False).stdout
    assert leftovers.strip() == "", f"processes left behind: {leftovers}"
