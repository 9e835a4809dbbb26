"""MM2 filter semantics in Python, and the Java subscribePattern that must agree with them on every name."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.policy import IdentityPolicy, PatternFilter, PrefixPolicy, TemplatePolicy
from reconciler.core.policy.filters import java_subscribe_pattern, should_replicate_topic
from reconciler.spec.defaults import DEFAULT_TOPIC_EXCLUDES
from reconciler.spec.models import FlowSpec

pytestmark = pytest.mark.unit

POLICIES = [
    PrefixPolicy("."),
    PrefixPolicy("_"),
    PrefixPolicy("__"),
    PrefixPolicy("-"),
    IdentityPolicy("."),
    TemplatePolicy(".", template="{source}_{topic}"),
    TemplatePolicy(".", template="m-{source}-{topic}"),
]
FILTERS = [
    PatternFilter((".*",), DEFAULT_TOPIC_EXCLUDES),
    PatternFilter(("a.*", "b"), ()),
    PatternFilter((), ()),
    PatternFilter(("^foo.*",), (r"foo\.x",)),
]
names = st.lists(
    st.sampled_from(["a", "b", "B", "foo", ".", "_", "-", "__", "heartbeats", "internal", "x", "_kmirror"]),
    min_size=1,
    max_size=6,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(
    topic=names,
    policy=st.sampled_from(POLICIES),
    topics=st.sampled_from(FILTERS),
    heartbeats=st.booleans(),
)
def test_subscribe_pattern_agrees_with_python_filter(
    topic: str, policy: PrefixPolicy, topics: PatternFilter, heartbeats: bool
) -> None:
    pattern = java_subscribe_pattern(topics=topics, policy=policy, target_alias="B", replicate_heartbeats=heartbeats)
    expected = should_replicate_topic(
        topic, topics=topics, policy=policy, target_alias="B", replicate_heartbeats=heartbeats
    )
    # Spark's admin-side discovery uses find() (a substring search): the anchors make it a whole-name match
    assert bool(re.search(pattern, topic)) is expected
    assert bool(re.fullmatch(pattern, topic)) is expected


def test_full_match_semantics_like_mm2() -> None:
    topics = PatternFilter(("orders",), ())
    assert topics.matches("orders")
    assert not topics.matches("orders2")
    assert not topics.matches("my-orders")
    assert not PatternFilter((), ()).matches("orders")  # an empty include list replicates nothing


def test_flow_filter_excludes_internal_cycles_and_kmirror_topics() -> None:
    flow = FlowSpec(name="a-to-b", source="a", target="b")
    assert flow.topic_matches("orders")
    assert flow.topic_matches("c.orders")
    assert not flow.topic_matches("b.orders")  # came from the target
    assert not flow.topic_matches("c.b.orders")  # ... through another hop
    assert not flow.topic_matches("__consumer_offsets")
    assert not flow.topic_matches("mm2-offset-syncs.b.internal")
    assert not flow.topic_matches("orders.replica")
    assert not flow.topic_matches("_kmirror.state")
    assert flow.topic_matches("heartbeats")
    assert flow.remote_topic("orders") == "a.orders"
    assert flow.group_matches("billing")
    assert not flow.group_matches("console-consumer-123")
    assert flow.subscribe_pattern().startswith("^") and flow.subscribe_pattern().endswith("$")


def test_a_flows_matcher_decides_as_topic_matches_does() -> None:
    flow = FlowSpec(name="a-to-b", source="a", target="b")
    matches = flow.topic_matcher()
    for topic in ("orders", "c.orders", "b.orders", "c.b.orders", "__consumer_offsets", "_kmirror.state", "heartbeats"):
        assert matches(topic) is flow.topic_matches(topic)


def test_subscribe_pattern_of_a_flow_is_readable_java() -> None:
    flow = FlowSpec.model_validate(
        {
            "name": "f",
            "source": "a",
            "target": "b",
            "topics": {"include": ["orders"], "exclude": []},
            "heartbeats": {"enabled": False},
        }
    )
    assert flow.subscribe_pattern() == (
        r"^(?!_kmirror\..*$)(?!(?:__.*|\..*|.*-internal|.*\.internal|.*\.internal)$)"
        r"(?!(?:(?:(?!\.).)*\.)*b\.(?!(?:\.)*$).*$)(?:(?:orders))$"
    )
