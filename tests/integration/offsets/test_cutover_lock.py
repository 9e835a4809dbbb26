"""`kmirror cutover` writes only under the state lock: while another process holds it, cutover fails at once,
naming the holder, exit 1, and writes nothing (no checkpoints topic, no group offsets on the target).

No replication job here: the refusal comes before cutover waits for lag 0. The e2e in test_migration_gaps.py
covers the other path (the lock taken by someone else by the time cutover reaches its writing steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reconciler.state.lock import StateLock
from reconciler.state.store import StateStore
from tests.conftest import KafkaCluster
from tests.integration.offsets.test_migration import Env, group_offsets, produce

pytestmark = pytest.mark.integration


def test_cutover_refuses_while_another_holds_the_state_lock_and_writes_nothing(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster
) -> None:
    env = Env(tmp_path, source, target)
    group = env.groups["app"]
    admin = AdminClient(source.config())
    admin.create_topics([NewTopic(env.topic, 3, 1)])[env.topic].result(30)
    produce(source, env.topic, 0, 5)
    c = Consumer(source.config(**{"group.id": group, "enable.auto.commit": False}))
    c.commit(offsets=[TopicPartition(env.topic, p, 3) for p in range(3)], asynchronous=False)
    c.close()

    store = StateStore(env.dst, target.config(), env.state.state.topic)
    other = StateLock(store, "apply")
    with other.held():
        refused = env.kmirror("cutover", "-f", str(env.spec), "--flow", env.flow, "--timeout", "5")
        dry = env.kmirror("cutover", "-f", str(env.spec), "--flow", env.flow, "--dry-run")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    err = refused.stderr
    assert f"lock {other.id} held by" in err and "for apply since" in err and "nothing was written" in err, err
    assert "1. Stop every producer" not in refused.stdout  # refused before waiting for anything
    assert dry.returncode == 0, dry.stdout + dry.stderr  # a dry run needs no lock
    assert f"{env.src}.checkpoints.internal" not in AdminClient(target.config()).list_topics(timeout=10).topics
    assert all(o < 0 for o in group_offsets(target, group, env.topic).values())
    assert store.read().applies() == []  # nothing recorded either
