"""`kmirror cutover` writes its entry to `kmirror state history`, like an apply: operation, flow, who, when, the
group offsets it wrote and its outcome (and it moves the state serial, so a plan saved before it is stale).

No replication job: the offset-syncs a job would write are written here, so the flow reads as caught up (lag 0)
and the group translates.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from reconciler.core.mm2.wire import OffsetSync
from tests.conftest import KafkaCluster
from tests.integration.plan.harness import World, create_topics, new_world

pytestmark = pytest.mark.integration


def _produce(cluster: KafkaCluster, topic: str, count: int) -> None:
    producer = Producer(cluster.config(**{"enable.idempotence": True}))
    for i in range(count):
        producer.produce(topic, value=str(i).encode(), partition=0)
    assert producer.flush(30) == 0


def test_cutover_is_recorded_in_the_state_history(tmp_path: Path, source: KafkaCluster, target: KafkaCluster) -> None:
    world: World = new_world(tmp_path, source, target)
    topic, group, flow = f"{world.prefix}orders", f"{world.prefix}app", f"f{world.id}"
    syncs = f"mm2-offset-syncs.{world.dst}.internal"
    spec = tmp_path / "kmirror.yaml"
    spec.write_text(
        textwrap.dedent(f"""\
        version: 1
        clusters:
          {world.src}: {{bootstrap_servers: "{source.bootstrap_servers}"}}
          {world.dst}: {{bootstrap_servers: "{target.bootstrap_servers}"}}
        state: {{cluster: {world.dst}, topic: "{world.state_topic}"}}
        spark: {{deploy: none}}
        flows:
          - name: {flow}
            source: {world.src}
            target: {world.dst}
            topics: {{include: ['{world.prefix}.*']}}
            groups: {{include: ['{world.prefix}.*']}}
            naming: {{policy: identity}}
            offsets: {{emit_checkpoints: false}}
            heartbeats: {{enabled: false}}
        """)
    )
    create_topics(source, (topic, 1, {}), (syncs, 1, {"cleanup.policy": "compact"}))
    create_topics(target, (topic, 1, {}))
    _produce(source, topic, 5)
    _produce(target, topic, 5)
    producer = Producer(source.config())
    for up in (0, 4):  # what the job writes: the first record copied, and the last one
        sync = OffsetSync(topic, 0, up, up)
        producer.produce(syncs, key=sync.key_bytes(), value=sync.value_bytes(), partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(source.config(**{"group.id": group, "enable.auto.commit": False}))
    consumer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    consumer.close()

    done = world.kmirror("cutover", "-f", str(spec), "--flow", flow, "--timeout", "60", timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr

    history = json.loads(world.kmirror("state", "history", "-f", str(spec), "--format", "json", check=True).stdout)
    [entry] = history["applies"]
    assert entry["operation"] == "cutover" and entry["flow"] == flow
    assert entry["status"] == "completed" and entry["counts"] == {"applied": 1}
    assert [c["address"] for c in entry["changes"]] == [f"group_offsets/{world.dst}/{group}"]
    assert history["serial"] == entry["serial"] == 1
    text = world.kmirror("state", "history", "-f", str(spec), check=True).stdout
    assert "completed" in text and "1 applied" in text
