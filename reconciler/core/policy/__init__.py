"""Replication policies: how remote topics are named, which topics a flow replicates, and MM2's internal names.

This is the one place that knows these rules. The planner, the replication job, offset translation and the
spec validator all import it, so that a topic name computed at plan time is the name the job writes to.

Pure: no Kafka or Spark client, no I/O, no import of `reconciler.spec` (the spec builds on this, not the
other way round).
"""

from reconciler.core.policy.filters import (
    KMIRROR_INTERNAL_TOPIC_PATTERN,
    PatternFilter,
    flow_policy,
    group_matches,
    java_subscribe_pattern,
    remote_topic,
    should_replicate_group,
    should_replicate_topic,
    spark_remote_topic_expr,
    subscribe_pattern,
    topic_matcher,
    topic_matches,
)
from reconciler.core.policy.naming import (
    HEARTBEATS_TOPIC,
    IdentityPolicy,
    PrefixPolicy,
    ReplicationPolicy,
    TemplatePolicy,
    policy_for,
)

__all__ = [
    "HEARTBEATS_TOPIC",
    "KMIRROR_INTERNAL_TOPIC_PATTERN",
    "IdentityPolicy",
    "PatternFilter",
    "PrefixPolicy",
    "ReplicationPolicy",
    "TemplatePolicy",
    "flow_policy",
    "group_matches",
    "java_subscribe_pattern",
    "policy_for",
    "remote_topic",
    "should_replicate_group",
    "should_replicate_topic",
    "spark_remote_topic_expr",
    "subscribe_pattern",
    "topic_matcher",
    "topic_matches",
]
