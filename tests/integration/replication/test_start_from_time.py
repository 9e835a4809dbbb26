"""A flow with `replication.start_from` set to a timestamp copies the records from that time on, run for real.

One job (real-time mode, the default) on a topic whose records were produced before the deploy with explicit
timestamps: two hours old and ten minutes old, `start_from` one hour back. Partition 0 holds old records, then new
ones, then one more old-stamped record (the start is a position, Kafka's offsets-for-times, not a filter: what
follows it is copied whatever its timestamp); partition 1 only new ones; partition 2 only old ones, so it starts at
its end and copies only what is written after the job started. Nothing before the start reaches the target.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Producer

from reconciler.jobcontract.job_report import read_report
from reconciler.runners import LocalRunner
from reconciler.spec.loader import load_text
from reconciler.spec.models import DesiredState
from tests.conftest import KafkaCluster
from tests.integration.replication.conftest import Flow, Rec, create_topic, kill_job, read_topic, wait_replicated

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _state(source: KafkaCluster, target: KafkaCluster, base: Path, tag: str, start: str) -> DesiredState:
    text = f"""
version: 1
clusters:
  s{tag}: {{bootstrap_servers: "{source.bootstrap_servers}"}}
  t{tag}: {{bootstrap_servers: "{target.bootstrap_servers}"}}
state: {{cluster: t{tag}, topic: _kmirror.state}}
spark:
  deploy: local
  checkpoint_root: checkpoints
  conf: {{spark.kmirror.triggerInterval: "5 seconds"}}
flows:
  - name: repl
    source: s{tag}
    target: t{tag}
    topics: {{include: ["st{tag}\\\\..*"]}}
    replication: {{start_from: "{start}"}}
"""
    return load_text(text).state.with_source_path(base / "kmirror.yaml")


def test_a_flow_starting_at_a_timestamp_copies_exactly_the_records_from_it_on(
    source: KafkaCluster, target: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tag = uuid.uuid4().hex[:6]
    topic = f"st{tag}.events"
    create_topic(source, topic, 3)
    now = int(time.time() * 1000)
    old, new = now - 2 * 3_600_000, now - 600_000
    start = datetime.fromtimestamp((now - 3_600_000) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    producer = Producer(source.config(**{"enable.idempotence": True}))
    expected: dict[int, list[Rec]] = {0: [], 1: [], 2: []}

    def send(partition: int, name: str, timestamp: int, *, copied: bool) -> None:
        key, value = f"{name}-{partition}".encode(), f"{name}@{timestamp}".encode()
        producer.produce(topic, key=key, value=value, timestamp=timestamp, partition=partition)
        if copied:
            expected[partition].append(Rec(key, value, (), timestamp))

    for i in range(30):
        send(0, f"old{i}", old + i, copied=False)
    for i in range(20):
        send(0, f"new{i}", new + i, copied=True)
    send(0, "late", old, copied=True)  # after the start: copied although stamped before it
    for i in range(10):
        send(1, f"new{i}", new + i, copied=True)
    for i in range(25):
        send(2, f"old{i}", old + i, copied=False)
    assert producer.flush(30) == 0

    base = tmp_path_factory.mktemp("start-from")
    state = _state(source, target, base, tag, start)
    runner = LocalRunner(base, state.spark, root=base, stop_timeout=60)
    flow = Flow(state, runner, "repl", f"s{tag}", f"t{tag}", f"st{tag}", source, target)
    flow.deploy()
    try:
        landed = wait_replicated(flow, topic, {0: 21, 1: 10}, timeout=180)
        assert landed.get(2, 0) == 0
        # Written after the job started: copied everywhere, partition 2 (which had nothing after the start) too.
        # Each partition is copied in order, so its last record on the target means nothing else is coming.
        for p in range(3):
            send(p, "after", int(time.time() * 1000), copied=True)
        assert producer.flush(30) == 0
        wait_replicated(flow, topic, {0: 22, 1: 11, 2: 1}, timeout=120)
        assert read_topic(target, flow.remote(topic)) == expected
        report = read_report(runner.folder("repl").status)
        assert report.get("resumed_from") == "start_from", report
    finally:
        kill_job(runner, "repl")
