"""Failover readiness against a known situation, on real clusters: a group stopped at a known offset.

The source topic holds records 0..19; the job copied them to the target after 3 records that were there before
(source offset n at target offset n + 3), writing an offset-sync every 10 records (offset_lag_max 10) and for
the last one. The group committed 16 on the source. MM2's translation resumes it at 14 (the sync 10 -> 13, plus
one); the record it has not consumed, source 16, is at target 19: a consumer that moves now re-reads 5 records.
`kmirror status` (text and JSON) and the job's checkpointer gauges must say 5, and a real consumer moved there
must re-read exactly that many. Another topic of the group has no offset-sync yet: not translatable.

No replication job: the offset-syncs and the copied records a job would write are written here.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from reconciler.core.mm2.wire import OffsetSync
from reconciler.kafka_clients.checkpointer import checkpoint_once
from reconciler.replication.metrics import ReplicationMetrics
from reconciler.spec import load
from tests.conftest import KafkaCluster
from tests.integration.plan.harness import World, create_topics, new_world

pytestmark = pytest.mark.integration


def _produce(cluster: KafkaCluster, topic: str, values: list[str]) -> None:
    producer = Producer(cluster.config(**{"enable.idempotence": True}))
    for v in values:
        producer.produce(topic, value=v.encode(), partition=0)
    assert producer.flush(30) == 0


def _reread_before(cluster: KafkaCluster, topic: str, start: int, first_unconsumed: str) -> int:
    """Records a consumer assigned at `start` reads before it reaches the record `first_unconsumed`."""
    consumer = Consumer(cluster.config(**{"group.id": "kmirror-test-reader", "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, 0, start)])
    read = 0
    try:
        for _ in range(100):
            msg = consumer.poll(5.0)
            assert msg is not None and msg.error() is None, "the target ended before the group's record"
            if msg.value() == first_unconsumed.encode():
                return read
            read += 1
    finally:
        consumer.close()
    raise AssertionError("not found")


def test_rereads_reported_are_what_a_consumer_moved_now_reads_again(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster
) -> None:
    world: World = new_world(tmp_path, source, target)
    topic, pending, group, flow = f"{world.prefix}orders", f"{world.prefix}new", f"{world.prefix}app", f"f{world.id}"
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
            offsets: {{offset_lag_max: 10}}
            heartbeats: {{enabled: false}}
        """)
    )
    create_topics(source, (topic, 1, {}), (pending, 1, {}), (syncs, 1, {"cleanup.policy": "compact"}))
    create_topics(target, (topic, 1, {}))
    _produce(source, topic, [str(i) for i in range(20)])
    _produce(source, pending, ["a", "b"])
    _produce(target, topic, ["before-0", "before-1", "before-2", *[str(i) for i in range(20)]])
    producer = Producer(source.config())
    for up in (0, 10, 19):
        sync = OffsetSync(topic, 0, up, up + 3)
        producer.produce(syncs, key=sync.key_bytes(), value=sync.value_bytes(), partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(source.config(**{"group.id": group, "enable.auto.commit": False}))
    consumer.commit(offsets=[TopicPartition(topic, 0, 16), TopicPartition(pending, 0, 1)], asynchronous=False)
    consumer.close()

    result = world.kmirror("status", "-f", str(spec), "--format", "json", check=True)
    [status] = json.loads(result.stdout)["flows"]
    failover = status["failover"][group]
    assert failover["translatable"] is False and failover["rereads"] is None  # `pending` cannot move yet
    parts = {p["topic"]: p for p in failover["partitions"]}
    assert parts[topic] == {
        "topic": topic,
        "partition": 0,
        "source_offset": 16,
        "target_topic": topic,
        "target_offset": 14,
        "rereads": 5,
    }
    assert parts[pending]["target_offset"] is None and parts[pending]["rereads"] is None
    assert _reread_before(target, topic, parts[topic]["target_offset"], "16") == 5

    text = world.kmirror("status", "-f", str(spec), check=True).stdout
    assert f"failover: group {group} cannot move yet: not translatable ({pending}/0)" in text

    # The job's checkpointer, one cycle, and the gauges the job serves from it.
    desired = load(str(spec)).state
    report = checkpoint_once(
        desired.flow(flow), desired.client_config(world.src), desired.client_config(world.dst), sync_group_offsets=False
    )
    metrics = ReplicationMetrics(world.src, world.dst)
    metrics.observe_failover(flow, report.readiness)
    got = {
        (s.name, s.labels["topic"]): s.value
        for family in metrics.collect()
        for s in family.samples
        if s.name.startswith("kmirror_group_") and s.labels["group"] == group and s.labels["flow"] == flow
    }
    assert got[("kmirror_group_failover_rereads", topic)] == 5
    assert got[("kmirror_group_failover_translatable", topic)] == 1
    assert got[("kmirror_group_failover_translatable", pending)] == 0
    assert 0 <= got[("kmirror_group_checkpoint_age_seconds", topic)] < 60
    assert ("kmirror_group_failover_rereads", pending) not in got
