"""The README's demo, as a new user runs it: `kmirror dev demo` then `kmirror status`, then `kmirror dev down`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from reconciler.devenv import dev_clusters
from reconciler.mm2.wire import Checkpoint

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
        with urllib.request.urlopen(flow["metrics_url"], timeout=10) as response:
            assert "kmirror_record_count_total{" in response.read().decode()
        # The job's checkpointer emits MM2 checkpoints for the half-way group on the target.
        target = next(c for c in dev_clusters.status(root) if c.name == "target").bootstrap_servers
        assert target is not None
        checkpoints = _read_all(target, "source.checkpoints.internal", timeout=90, until=lambda cs: bool(cs))
        assert {c.group for c in checkpoints} == {"demo-billing"}
        assert {c.topic for c in checkpoints} == {"demo.orders"} and all(c.downstream_offset > 0 for c in checkpoints)
    finally:
        down = _kmirror("dev", "down", "--root", str(root), cwd=tmp_path)
    assert down.returncode == 0, down.stderr
    assert "stopped the replication job of flow source-to-target" in down.stdout
    assert not any(s.running for s in dev_clusters.status(root))
    leftovers = subprocess.run(["pgrep", "-f", str(root)], capture_output=True, text=True, check=False).stdout
    assert leftovers.strip() == "", f"processes left behind: {leftovers}"


def _read_all(
    bootstrap: str, topic: str, timeout: float, until: Callable[[list[Checkpoint]], bool]
) -> list[Checkpoint]:
    """Every checkpoint record of `topic`, re-read until `until` holds or `timeout` passes."""
    deadline = time.monotonic() + timeout
    found: list[Checkpoint] = []
    while time.monotonic() < deadline:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 0)])
        found = [
            Checkpoint.from_record(m.key() or b"", m.value() or b"")
            for m in consumer.consume(10_000, timeout=3)
            if m.error() is None
        ]
        consumer.close()
        if until(found):
            return found
        time.sleep(2)
    return found
