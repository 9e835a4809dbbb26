"""The naming policies against MM2's own tests (ReplicationPolicyTest, MirrorClientTest, MirrorSourceConnectorTest)."""

from __future__ import annotations

import pytest

from reconciler.core.policy import IdentityPolicy, PrefixPolicy, TemplatePolicy, policy_for

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("separator", [".", "_", "__", "-"])
def test_prefix_round_trip(separator: str) -> None:
    policy = PrefixPolicy(separator)
    remote = policy.remote_topic("source1", "topic1")
    assert remote == f"source1{separator}topic1"
    assert policy.topic_source(remote) == "source1"
    assert policy.upstream_topic(remote) == "topic1"
    assert policy.original_topic(policy.remote_topic("source2", remote)) == "topic1"


def test_prefix_dot_and_underscore_like_mm2() -> None:
    dot, underscore = PrefixPolicy("."), PrefixPolicy("_")
    assert dot.topic_source("topic1") is None
    assert dot.upstream_topic("topic1") is None
    assert dot.topic_source("source1.source2.topic") == "source1"
    assert dot.upstream_topic("source1.source2.topic") == "source2.topic"
    assert underscore.topic_source("source1_topic") == "source1"
    assert underscore.topic_source("source1.topic") is None
    # remoteTopicsSeparatorTest: "__"
    double = PrefixPolicy("__")
    assert double.topic_source("source3__source4__source5__topic6") == "source3"
    assert double.original_topic("source3__source4__source5__topic6") == "topic6"


def test_java_split_edge_cases() -> None:
    policy = PrefixPolicy(".")
    assert policy.topic_source("source.") is None  # Java drops trailing empty strings
    assert policy.topic_source(".topic") == ""  # but keeps a leading one
    assert policy.upstream_topic("a..b") == ".b"


def test_internal_topics_like_replication_policy_test() -> None:
    policy = PrefixPolicy()
    assert policy.is_internal_topic("__consumer_offsets")
    assert policy.is_internal_topic(".hiddentopic")
    assert policy.is_internal_topic("mm2-offsets.CLUSTER.internal")
    assert policy.is_internal_topic("mm2-offsets-CLUSTER-internal")
    assert not policy.is_internal_topic("mm2-offsets_CLUSTER_internal")
    assert not policy.is_internal_topic("orders")


def test_internal_topic_names_exactly_as_mm2() -> None:
    policy = PrefixPolicy()
    assert policy.heartbeats_topic() == "heartbeats"
    assert policy.checkpoints_topic("CLUSTER") == "CLUSTER.checkpoints.internal"
    assert policy.offset_syncs_topic("CLUSTER") == "mm2-offset-syncs.CLUSTER.internal"
    custom = PrefixPolicy("__")
    assert custom.offset_syncs_topic("CLUSTER") == "mm2-offset-syncs__CLUSTER__internal"
    assert custom.checkpoints_topic("CLUSTER") == "CLUSTER__checkpoints__internal"
    assert custom.heartbeats_topic() == "heartbeats"
    legacy = PrefixPolicy("__", internal_topic_separator_enabled=False)
    assert legacy.offset_syncs_topic("CLUSTER") == "mm2-offset-syncs.CLUSTER.internal"
    assert legacy.checkpoints_topic("CLUSTER") == "CLUSTER.checkpoints.internal"


def test_heartbeat_and_checkpoint_topics_like_mirror_client_test() -> None:
    policy = PrefixPolicy()
    for topic in ("heartbeats", "source1.heartbeats", "source2.source1.heartbeats"):
        assert policy.is_heartbeats_topic(topic)
    for topic in ("heartbeats!", "!heartbeats", "source1heartbeats", "source1-heartbeats"):
        assert not policy.is_heartbeats_topic(topic)
    assert policy.is_checkpoints_topic("source1.checkpoints.internal")
    for topic in (
        "checkpoints.internal",
        "checkpoints-internal",
        "checkpoints.internal!",
        "source1checkpointsinternal",
    ):
        assert not policy.is_checkpoints_topic(topic)


def test_count_hops_like_mirror_client_test() -> None:
    policy = PrefixPolicy()
    assert policy.count_hops("topic", "source") == -1
    assert policy.count_hops("source", "source") == -1
    assert policy.count_hops("sourcetopic", "source") == -1
    assert policy.count_hops("source1.topic", "source2") == -1
    assert policy.count_hops("source1.topic", "source1") == 1
    assert policy.count_hops("source2.source1.topic", "source2") == 1
    assert policy.count_hops("source2.source1.topic", "source1") == 2
    assert policy.count_hops("source3.source2.source1.topic", "source1") == 3
    assert policy.count_hops("source3.source2.source1.topic", "source4") == -1


def test_cycle_detection_through_two_hops() -> None:
    policy = PrefixPolicy()
    # flow A -> B: a topic that came from B, directly or through C, is never sent back
    assert policy.is_cycle("B.orders", "B")
    assert policy.is_cycle("C.B.orders", "B")
    assert policy.is_cycle("D.C.B.orders", "B")
    assert not policy.is_cycle("C.orders", "B")
    assert not policy.is_cycle("orders", "B")
    assert not policy.is_cycle("XB.orders", "B")


def test_identity_keeps_names_but_prefixes_heartbeats() -> None:
    policy = IdentityPolicy()
    assert policy.remote_topic("source1", "topic1") == "topic1"
    assert policy.remote_topic("source1", "heartbeats") == "source1.heartbeats"
    assert policy.topic_source("topic1") is None
    assert policy.upstream_topic("topic1") == "topic1"
    assert policy.original_topic("topic1") == "topic1"
    assert policy.topic_source("source1.heartbeats") == "source1"
    assert policy.is_heartbeats_topic("source2.source1.heartbeats")
    assert not policy.is_cycle("B.orders", "B")  # identity cannot see where a topic came from
    assert policy.is_cycle("B.heartbeats", "B")  # ... except heartbeats
    assert not policy.detects_cycles
    assert IdentityPolicy(source_alias="primary").topic_source("orders") == "primary"


def test_template_policy() -> None:
    policy = TemplatePolicy(template="mirror-{source}-{topic}")
    assert policy.remote_topic("east", "orders") == "mirror-east-orders"
    assert policy.topic_source("mirror-east-orders") == "east"
    assert policy.upstream_topic("mirror-east-orders") == "orders"
    assert policy.remote_topic("east", "heartbeats") == "east.heartbeats"
    assert not policy.detects_cycles
    prefix_like = TemplatePolicy(template="{source}_{topic}")
    assert prefix_like.detects_cycles and prefix_like.is_cycle("b_x", "b")
    with pytest.raises(ValueError, match="exactly once"):
        TemplatePolicy(template="{source}")


def test_spark_expressions() -> None:
    assert PrefixPolicy().spark_remote_topic_expr("src") == "concat('src.', topic)"
    assert policy_for("identity").spark_remote_topic_expr("src") == (
        "CASE WHEN topic LIKE '%heartbeats' THEN concat('src.', topic) ELSE topic END"
    )
    template = policy_for("template", template="m-{source}-{topic}-x").spark_remote_topic_expr("it's")
    assert "concat('m-it\\'s-', topic, '-x')" in template
