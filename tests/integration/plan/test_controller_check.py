"""The admin adapter's controller check on real brokers (3.9 source, 4.x target): a validate-only create
answers TOPIC_ALREADY_EXISTS for a topic the controller has, and creates nothing for one it does not."""

from __future__ import annotations

import uuid

import pytest

from reconciler.kafka_clients.admin import KafkaAdmin
from tests.conftest import KafkaCluster
from tests.integration.plan.harness import create_topics, topic_exists

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("side", ["source", "target"])
def test_exist_on_controller_knows_existing_topics_and_creates_nothing(
    side: str, source: KafkaCluster, target: KafkaCluster
) -> None:
    cluster = source if side == "source" else target
    tag = uuid.uuid4().hex[:6]
    present, absent = f"cc{tag}-present", f"cc{tag}-absent"
    create_topics(cluster, (present, 2, {"retention.ms": "60000"}))
    admin = KafkaAdmin(side, cluster.config(), timeout=30)
    assert admin.wait_visible([present]) == set()
    assert admin.exist_on_controller([present, absent]) == {present}
    assert not topic_exists(cluster, absent)


def test_delete_group_removes_a_groups_offsets_and_a_missing_group_is_already_gone(target: KafkaCluster) -> None:
    """What apply does to a removed exactly-once flow's group on the target (Kafka 4.x)."""
    tag = uuid.uuid4().hex[:6]
    topic, group = f"dg{tag}", f"kmirror-eos._kmirror.state.dg{tag}"
    create_topics(target, (topic, 1, {}))
    admin = KafkaAdmin("target", target.config(), timeout=30)
    assert admin.alter_group_offsets(group, {(topic, 0): 0}).ok
    assert group in admin.groups()
    deleted = admin.delete_group(group)
    assert deleted.ok and not deleted.already_done, deleted
    assert group not in admin.groups()
    again = admin.delete_group(group)
    assert again.ok and again.already_done, again
