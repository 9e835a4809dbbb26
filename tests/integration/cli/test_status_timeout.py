"""`kmirror status --timeout SECONDS`: a cluster that does not answer is an error naming it, exit 1, after about
SECONDS (not a status of empty lags and exit 0); a cluster that answers is not blamed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import KafkaCluster
from tests.integration.plan.harness import KMIRROR

pytestmark = pytest.mark.integration


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once the socket is closed


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_status_names_the_cluster_that_did_not_answer(
    fmt: str, kafka_pair: tuple[KafkaCluster, KafkaCluster], tmp_path: Path
) -> None:
    source, _ = kafka_pair
    spec = tmp_path / "kmirror.yaml"
    spec.write_text(
        "version: 1\n"
        f"clusters: {{up: {{bootstrap_servers: '{source.bootstrap_servers}'}}, "
        f"down: {{bootstrap_servers: '127.0.0.1:{_closed_port()}'}}}}\n"
        "state: {cluster: up}\nspark: {deploy: none}\nflows: [{name: f, source: up, target: down}]\n"
    )
    started = time.monotonic()
    result = subprocess.run(
        [*KMIRROR, "status", "-f", str(spec), "--timeout", "3", "--format", fmt],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stdout + result.stderr
    assert "cluster 'down'" in result.stderr and "within 3s" in result.stderr
    assert "cluster 'up'" not in result.stderr
    assert 3 <= elapsed < 30, f"status took {elapsed:.1f}s with --timeout 3"
    if fmt == "json":
        (diagnostic,) = json.loads(result.stdout)["diagnostics"]
        assert diagnostic["address"] == "cluster/down" and diagnostic["severity"] == "error"
        # located at the bootstrap_servers of 'down' in the file: line 2, after 'up's mapping
        assert (
            diagnostic["location"].startswith(f"{spec}:2:") and diagnostic["field"] == "clusters.down.bootstrap_servers"
        )
        assert "did not answer within 3s" in diagnostic["summary"]
