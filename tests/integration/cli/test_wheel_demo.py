"""Installed the way users install: the built wheel with its `spark` extra in a fresh virtualenv, no Maven, empty
caches. `kmirror dev demo` fetches Kafka and the Spark connector from Maven Central itself (Apache Ivy, from
pyspark's jars, checksums verified), once, saying so, then runs the demo end to end: plan, apply, replicate,
the consumer group translated. Needs PyPI and Maven Central; slow (a Spark job starts)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]

ROOT = Path(__file__).resolve().parents[3]


def test_the_wheel_runs_the_demo_with_no_maven_and_empty_caches(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KMIRROR_DEV_HOME")}
    env.update(
        KMIRROR_CACHE=str(tmp_path / "cache"),  # nothing fetched yet: a new machine
        KMIRROR_HOME=str(tmp_path / "home"),
        KMIRROR_RESOLVER="ivy",  # what a machine without `mvn` uses (see test_artifacts for the choice itself)
        NO_COLOR="1",
    )

    def run(*args: str | Path, cwd: Path = tmp_path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        assert result.returncode == 0, f"{' '.join(map(str, args))}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        return result

    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", ".kmirror", "*cache*", "build"))
    run(sys.executable, "-m", "build", "--wheel", "--outdir", tmp_path / "dist", source)
    (wheel,) = (tmp_path / "dist").glob("kmirror-*.whl")
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    started = time.monotonic()
    run(venv / "bin" / "pip", "install", "-q", f"{wheel}[spark]")
    installed = time.monotonic() - started
    user = tmp_path / "user"
    user.mkdir()
    started = time.monotonic()
    demo = run(venv / "bin" / "kmirror", "dev", "demo", cwd=user, timeout=1200)
    took = time.monotonic() - started
    try:
        # Kafka 3.9, Kafka 4.x, the Spark connector: each once (the two Kafka fetches run at once, so their
        # progress lines may share a line)
        fetched = demo.stderr.count("from Maven Central with Apache Ivy")
        assert fetched == 3, demo.stderr[-2000:]
        assert "cutover: ready" in demo.stdout, demo.stdout[-2000:]  # lag 0 and the group translated
        jars = sorted(p.name for p in (tmp_path / "cache" / "jars").iterdir())
        assert any(j.startswith("spark-kafka-") for j in jars) and any(j.startswith("kafka-") for j in jars), jars
        again = run(venv / "bin" / "kmirror", "status", "-f", ".kmirror/dev/demo/kmirror.yaml", cwd=user)
        assert "Maven Central" not in again.stderr  # fetched once
        print(f"wheel path: pip install {installed:.0f}s, kmirror dev demo (fetch + clusters + job) {took:.0f}s")
    finally:
        subprocess.run([venv / "bin" / "kmirror", "dev", "down"], cwd=user, env=env, capture_output=True, timeout=300)
