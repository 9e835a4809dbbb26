"""The README's demo, installed and run the way users do: the built wheel with its `spark` extra in a fresh
virtualenv, no Maven, empty caches. `kmirror dev demo` fetches Kafka and the Spark connector from Maven Central
itself (each set from its committed lock, every jar's SHA-256 checked), once, saying so, then runs the demo end to end:
plan, apply, replicate to lag 0, the consumer group translated; `kmirror status` shows the running flow and its
metrics; `kmirror dev down` leaves nothing running. Needs PyPI and Maven Central; slow (a Spark job starts).

One test for the whole user path (it was two: the demo from the repository's venv and the wheel's demo ran the
same clusters and job twice, on the examples' ports, one after the other)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, TopicPartition

from reconciler.core.mm2.wire import Checkpoint
from reconciler.devenv import dev_clusters

if TYPE_CHECKING:
    from tests.integration.cli.conftest import Release

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(1500)]


def test_the_wheel_runs_the_demo_with_no_maven_and_empty_caches_and_down_leaves_nothing(
    tmp_path: Path, release: Release
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KMIRROR_DEV_HOME")}
    env.update(
        KMIRROR_CACHE=str(tmp_path / "cache"),  # nothing fetched yet: a new machine
        KMIRROR_HOME=str(tmp_path / "home"),
        KMIRROR_RESOLVER="",  # the default, Maven or not: the committed locks (test_artifacts covers Maven, Ivy)
        NO_COLOR="1",
    )

    def run(*args: str | Path, cwd: Path = tmp_path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        assert result.returncode == 0, f"{' '.join(map(str, args))}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return result

    wheel = release.wheel
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    started = time.monotonic()
    run(venv / "bin" / "pip", "install", "-q", f"{wheel}[spark]")
    installed = time.monotonic() - started
    kmirror = venv / "bin" / "kmirror"
    user = tmp_path / "user"
    user.mkdir()
    root = user / ".kmirror" / "dev"  # `kmirror dev`'s default root, in the directory it runs from
    spec = root / "demo" / "kmirror.yaml"
    started = time.monotonic()
    try:
        demo = run(kmirror, "dev", "demo", cwd=user, timeout=1200)
        took = time.monotonic() - started
        # Kafka 3.9, Kafka 4.x, the Spark connector: each once (the two Kafka fetches run at once, so their
        # progress lines may share a line)
        fetched = demo.stderr.count("from Maven Central with the pinned lock")
        assert fetched == 3, demo.stderr[-2000:]
        assert "cutover: ready: lag 0, all 1 group(s) translated" in demo.stdout, demo.stdout[-2000:]
        jars = sorted(p.name for p in (tmp_path / "cache" / "jars").iterdir())
        assert any(j.startswith("spark-kafka-") for j in jars) and any(j.startswith("kafka-") for j in jars), jars

        # The job writes its acknowledged count every 5 s, while the lag comes from the clusters: right after
        # the demo saw lag 0, the count may still be the one from mid-copy (CI read 14,434 of 40,063 once).
        deadline = time.monotonic() + 30
        while True:
            again = run(kmirror, "status", "-f", spec, "--format", "json", cwd=user)
            assert "Maven Central" not in again.stderr  # fetched once
            [flow] = json.loads(again.stdout)["flows"]
            if flow["records"] >= 40_000 or time.monotonic() > deadline:
                break
            time.sleep(2)
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
        print(f"wheel path: pip install {installed:.0f}s, kmirror dev demo (fetch + clusters + job) {took:.0f}s")
    finally:
        down = subprocess.run(
            [kmirror, "dev", "down"], cwd=user, env=env, capture_output=True, text=True, timeout=300, check=False
        )
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
