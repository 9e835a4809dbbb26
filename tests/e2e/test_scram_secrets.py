"""One full path (plan, apply, replicate) on clusters that require SASL/SCRAM, with the password given as an
`${env:...}` reference: records arrive, and the secret appears in no plan, state record, log, file or process
listing of ours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reconciler.runners import LocalRunner
from reconciler.spec.loader import load_text
from tests.conftest import SCRAM_USER, KafkaCluster, applied_state_key

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ENV = "KMIRROR_TEST_SCRAM_PASSWORD"


def _key(desired: Any, target: KafkaCluster) -> str:
    """The applied jobs' state key; the state cluster's id, asked on its plaintext listener (the same cluster)."""
    return applied_state_key(desired, {"bootstrap.servers": target.bootstrap_servers})


def _client(cluster: KafkaCluster, secret: str, **extra: object) -> dict[str, object]:
    return {
        "bootstrap.servers": cluster.sasl_bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": SCRAM_USER,
        "sasl.password": secret,
        **extra,
    }


def _spec(source: KafkaCluster, target: KafkaCluster) -> str:
    client = (
        f"{{security.protocol: SASL_PLAINTEXT, sasl.mechanism: SCRAM-SHA-512, sasl.username: {SCRAM_USER}, "
        f'sasl.password: "${{env:{ENV}}}"}}'
    )
    return f"""
version: 1
clusters:
  onprem: {{bootstrap_servers: "{source.sasl_bootstrap_servers}", client: {client}}}
  cloud: {{bootstrap_servers: "{target.sasl_bootstrap_servers}", client: {client}}}
state: {{cluster: cloud}}
spark:
  deploy: local
  master: "local[2]"
  checkpoint_root: checkpoints
  conf: {{spark.kmirror.triggerInterval: "10 seconds"}}  # real-time mode, two tasks; a quick stop at the end
flows:
  - name: secure
    source: onprem
    target: cloud
    topics: {{include: ['secure\\..*']}}
    naming: {{policy: prefix}}
    offsets: {{emit_checkpoints: false}}
"""


def test_scram_path_replicates_and_never_leaks_the_secret(
    tmp_path: Path, scram_pair: tuple[KafkaCluster, KafkaCluster], scram_secret: str
) -> None:
    source, target = scram_pair
    admin = AdminClient(_client(source, scram_secret))
    admin.create_topics([NewTopic("secure.orders", 2, 1, config={"retention.ms": "3600000"})])["secure.orders"].result(
        timeout=30
    )
    producer = Producer(_client(source, scram_secret))
    for i in range(500):
        producer.produce("secure.orders", key=str(i).encode(), value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0

    spec = tmp_path / "kmirror.yaml"
    spec.write_text(_spec(source, target))
    env = {**os.environ, ENV: scram_secret, "NO_COLOR": "1"}
    outputs: list[str] = []

    def kmirror(*args: str) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([sys.executable, "-m", "reconciler.cli", *args], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
        outputs.extend([r.stdout, r.stderr])
        return r

    try:
        plan = kmirror("plan", "-f", str(spec), "--format", "json", "--out", str(tmp_path / "plan.json"))
        assert plan.returncode == 0, plan.stderr
        applied = kmirror("apply", "-f", str(spec), "--auto-approve")
        assert applied.returncode == 0, applied.stdout + applied.stderr

        consumer = Consumer(_client(target, scram_secret, **{"group.id": "verify", "enable.auto.commit": False}))
        consumer.assign([TopicPartition("onprem.secure.orders", p, 0) for p in range(2)])
        got = 0
        deadline = time.monotonic() + 240
        while got < 500 and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(500, timeout=2) if m.error() is None)
        consumer.close()
        assert got == 500, f"only {got} of 500 records replicated over SASL/SCRAM"

        # The process listing while everything runs: none of our processes carries the secret.
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                assert scram_secret.encode() not in cmdline.read_bytes(), f"secret in process {cmdline.parent.name}"
            except OSError:
                continue
        outputs.append(kmirror("state", "list", "-f", str(spec)).stdout)
        history = kmirror("state", "history", "-f", str(spec), "--format", "json")
        outputs.append(history.stdout)
        for line in kmirror("state", "list", "-f", str(spec)).stdout.splitlines():
            outputs.append(kmirror("state", "show", "-f", str(spec), line.split()[0]).stdout)
    finally:
        desired = load_text(_spec(source, target)).state.with_source_path(spec)
        LocalRunner(tmp_path, desired.spark, state_topic=desired.state.topic, state_key=_key(desired, target)).stop(
            "secure"
        )

    # Every output of ours, the saved plan, the state topic's raw bytes, and every file kmirror or the job wrote.
    assert all(scram_secret not in o for o in outputs)
    assert scram_secret not in (tmp_path / "plan.json").read_text()
    assert json.loads((tmp_path / "plan.json").read_text())["changes"]
    state = Consumer(_client(target, scram_secret, **{"group.id": "raw", "enable.auto.commit": False}))
    state.assign([TopicPartition("_kmirror.state", 0, 0)])
    raw = b""
    for _ in range(10):
        raw += b"".join((m.key() or b"") + (m.value() or b"") for m in state.consume(1000, timeout=2))
    state.close()
    assert b"resource/" in raw and scram_secret.encode() not in raw
    job_folder = (
        LocalRunner(tmp_path, desired.spark, state_topic=desired.state.topic, state_key=_key(desired, target))
        .folder("secure")
        .path
    )
    written = [p for folder in (tmp_path, job_folder) for p in folder.rglob("*") if p.is_file()]
    assert any(p.name == "driver.log" for p in written)
    for p in written:
        assert scram_secret.encode() not in p.read_bytes(), f"secret written to {p}"
