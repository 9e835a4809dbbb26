"""The planner on remote and internal topics: one test per action and per error."""

from __future__ import annotations

import pytest

from reconciler.live.model import ClusterState, LiveState
from reconciler.plan.builder import PlanError
from reconciler.plan.definition import Action, Plan
from reconciler.spec.loader import load_text
from tests.unit.plan.builders import by_address, desired, live, owned, plan, topic

pytestmark = pytest.mark.unit


def test_new_source_topic_creates_a_remote_topic_with_synced_configs() -> None:
    ds = desired("topics: {include: ['orders']}")
    p = plan(ds, live(src=[topic("orders", 6, retention_ms="3600000", min_insync_replicas="2")]))
    change = by_address(p)["topic/dst/src.orders"]
    assert change.action == Action.CREATE
    assert change.after.model_dump(mode="json") == {
        "cluster": "dst",
        "name": "src.orders",
        "partitions": 6,
        "replication_factor": -1,
        "configs": {"retention.ms": "3600000"},  # min.insync.replicas: on MM2's exclusion list
        "source": {"cluster": "src", "topic": "orders", "flow": "f"},
    }
    assert p.summary.create == 1 and p.summary.total == 1


def test_topics_the_filter_rejects_or_that_are_internal_are_not_replicated() -> None:
    src = [topic("orders"), topic("tmp-x"), topic("__consumer_offsets", 50), topic("x.internal"), topic("a.replica")]
    # MM2's default excludes: mm2.*\.internal, .*\.replica, __.*; internal topics never replicate anyway.
    p = plan(desired("topics: {include: ['.*']}"), live(src=src))
    assert [c.address for c in p.changes] == ["topic/dst/src.orders", "topic/dst/src.tmp-x"]
    # An explicit exclude list replaces MM2's defaults, as in MM2.
    p = plan(desired("topics: {include: ['.*'], exclude: ['tmp-.*']}"), live(src=src))
    assert [c.address for c in p.changes] == ["topic/dst/src.a.replica", "topic/dst/src.orders"]


def test_matching_mirror_plans_nothing() -> None:
    ds = desired("topics: {include: ['orders']}")
    lv = live(src=[topic("orders", 3, retention_ms="1")], dst=[topic("src.orders", 3, retention_ms="1")])
    p = plan(ds, lv, owned("src.orders"))
    assert p.changes == () and not p.has_changes


def test_source_partition_increase_grows_the_remote_topic() -> None:
    ds = desired("topics: {include: ['orders']}")
    lv = live(src=[topic("orders", 8)], dst=[topic("src.orders", 3)])
    change = by_address(plan(ds, lv, owned("src.orders")))["topic/dst/src.orders"]
    assert change.action == Action.UPDATE
    assert (
        change.before.model_dump(mode="json")["partitions"] == 3
        and change.after.model_dump(mode="json")["partitions"] == 8
    )
    assert "partitions 3 -> 8" in change.reason


def test_remote_with_more_partitions_than_source_is_a_warning_not_a_change() -> None:
    ds = desired("topics: {include: ['orders']}")
    p = plan(ds, live(src=[topic("orders", 2)], dst=[topic("src.orders", 4)]), owned("src.orders"))
    assert p.changes == ()
    assert any("never shrink" in w for w in p.warnings)


def test_config_changes_are_incremental_set_and_delete_and_keep_excluded_target_configs() -> None:
    ds = desired("topics: {include: ['orders']}")
    lv = live(
        src=[topic("orders", 1, retention_ms="100", cleanup_policy="compact")],
        dst=[topic("src.orders", 1, retention_ms="999", segment_bytes="1000", min_insync_replicas="2")],
    )
    change = by_address(plan(ds, lv, owned("src.orders")))["topic/dst/src.orders"]
    assert change.action == Action.UPDATE
    assert change.before.model_dump(mode="json")["configs"] == {
        "retention.ms": "999",
        "segment.bytes": "1000",
        "min.insync.replicas": "2",
    }
    # segment.bytes: not set on the source -> deleted; min.insync.replicas: excluded -> the target's own, kept.
    assert change.after.model_dump(mode="json")["configs"] == {
        "retention.ms": "100",
        "cleanup.policy": "compact",
        "min.insync.replicas": "2",
    }
    assert "cleanup.policy, retention.ms, segment.bytes" in change.reason


def test_config_sync_off_only_applies_topic_defaults() -> None:
    ds = desired(
        "topics: {include: ['orders']}\nsync: {configs: false}\ntopic_defaults: {configs: {retention.ms: '5'}}"
    )
    lv = live(src=[topic("orders", 1, cleanup_policy="compact")])
    change = by_address(plan(ds, lv))["topic/dst/src.orders"]
    assert change.after.model_dump(mode="json")["configs"] == {"retention.ms": "5"}


def test_replication_factor_difference_is_reported_not_acted_on() -> None:
    ds = desired("topics: {include: ['orders']}\ntopic_defaults: {replication_factor: 3}")
    p = plan(ds, live(src=[topic("orders")], dst=[topic("src.orders", 1, rf=1)]), owned("src.orders"))
    assert p.changes == ()
    assert any("replication factor is 1, the flow asks for 3" in w for w in p.warnings)


def test_existing_target_topic_kmirror_does_not_own_is_a_plan_error() -> None:
    ds = desired("topics: {include: ['orders']}\nnaming: {policy: identity}")
    lv = live(src=[topic("orders")], dst=[topic("orders")])
    with pytest.raises(PlanError) as err:
        plan(ds, lv, owned("heartbeats"))
    message = str(err.value)
    assert "topic/dst/orders" in message and "kmirror did not create it" in message
    assert "adopt_existing: true" in message


def test_adopt_existing_turns_the_error_into_an_adoption() -> None:
    ds = desired("topics: {include: ['orders']}\nnaming: {policy: identity}\nreplication: {adopt_existing: true}")
    lv = live(src=[topic("orders", 2)], dst=[topic("orders", 2)])
    change = by_address(plan(ds, lv))["topic/dst/orders"]
    assert change.action == Action.UPDATE and change.reason.startswith("src:orders (flow f): adopting")


def test_two_sources_writing_one_remote_topic_is_a_plan_error() -> None:
    ds = load_text(
        """
version: 1
clusters:
  src: {bootstrap_servers: "127.0.0.1:1"}
  src2: {bootstrap_servers: "127.0.0.1:3"}
  dst: {bootstrap_servers: "127.0.0.1:2"}
state: {cluster: dst}
flows:
  - {name: f, source: src, target: dst, topics: {include: ['ord.*']}, naming: {policy: identity}}
  - {name: g, source: src2, target: dst, topics: {include: ['or.*']}, naming: {policy: identity}}
"""
    ).state
    base = live(src=[topic("orders")], internal=False)
    lv = LiveState(clusters={**base.clusters, "src2": ClusterState("src2", {"orders": topic("orders")}, None)})
    with pytest.raises(PlanError) as err:
        plan(ds, lv, owned())
    assert (
        "topic/dst/orders: two sources would write this remote topic: src:orders (flow f) and src2:orders (flow g)"
        in str(err.value)
    )


def test_prefix_naming_never_replicates_a_topic_back_to_its_source() -> None:
    ds = desired("topics: {include: ['.*']}")
    p = plan(ds, live(src=[topic("orders"), topic("dst.orders")]))
    assert [c.address for c in p.changes] == ["topic/dst/src.orders"]


def test_topic_no_longer_replicated_is_kept_unless_prune_topics() -> None:
    lv = live(src=[], dst=[topic("src.gone")])
    kept = plan(desired("topics: {include: ['orders']}"), lv, owned("src.gone"))
    assert kept.changes == () and any("prune.topics is off" in w for w in kept.warnings)
    pruned = plan(desired("topics: {include: ['orders']}", prune="prune: {topics: true}"), lv, owned("src.gone"))
    assert [(c.address, c.action) for c in pruned.changes] == [("topic/dst/src.gone", Action.DELETE)]


def test_topics_kmirror_did_not_create_are_never_deleted() -> None:
    lv = live(src=[], dst=[topic("someone-elses")])
    p = plan(desired("topics: {include: ['orders']}", prune="prune: {topics: true}"), lv)
    assert p.changes == ()


def test_internal_topics_have_mm2_names_and_are_compacted() -> None:
    ds = desired("topics: {include: ['orders']}")
    p = plan(ds, live(src=[topic("orders")], internal=False), owned())
    internal = {c.address: c for c in p.changes if c.kind == "internal_topic"}
    assert set(internal) == {
        "internal_topic/src/heartbeats",
        "internal_topic/src/mm2-offset-syncs.dst.internal",
        "internal_topic/dst/src.checkpoints.internal",
        "internal_topic/dst/_kmirror.state",
    }
    assert all(c.after.model_dump(mode="json")["configs"] == {"cleanup.policy": "compact"} for c in internal.values())
    # the remote heartbeats topic is planned with the heartbeats topic, before it exists on the source
    assert by_address(p)["topic/dst/src.heartbeats"].action == Action.CREATE


def test_offset_syncs_on_the_target_use_the_source_alias() -> None:
    ds = desired("topics: {include: ['orders']}\noffsets: {offset_syncs_location: target}")
    p = plan(ds, live(src=[topic("orders")], internal=False), owned())
    assert "internal_topic/dst/mm2-offset-syncs.src.internal" in by_address(p)


def test_internal_topic_that_is_not_compacted_is_fixed() -> None:
    ds = desired("topics: {include: ['orders']}")
    lv = live(src=[topic("orders")])
    lv.clusters["dst"].topics["src.checkpoints.internal"] = topic("src.checkpoints.internal", cleanup_policy="delete")  # type: ignore[index]
    change = by_address(plan(ds, lv, owned("src.orders")))["internal_topic/dst/src.checkpoints.internal"]
    assert (
        change.action == Action.UPDATE
        and change.after.model_dump(mode="json")["configs"]["cleanup.policy"] == "compact"
    )


def test_target_narrows_the_plan() -> None:
    ds = desired("topics: {include: ['a', 'b']}")
    p = plan(ds, live(src=[topic("a"), topic("b")]), targets=("topic/dst/src.b",))
    assert [c.address for c in p.changes] == ["topic/dst/src.b"]
    glob = plan(ds, live(src=[topic("a"), topic("b")]), targets=("topic/dst/*",))
    assert len(glob.changes) == 2


def test_plan_round_trips_through_json() -> None:
    ds = desired("topics: {include: ['orders']}")
    p = plan(ds, live(src=[topic("orders", 2, retention_ms="1")]))
    again = Plan.from_json(p.to_json())
    assert again == p
    assert again.state.lineage == "lin-1" and again.state.serial == 1


def test_replication_factor_above_the_broker_count_is_a_plan_error() -> None:
    from dataclasses import replace

    ds = desired("topics: {include: ['orders']}\ntopic_defaults: {replication_factor: 3}")
    lv = live(src=[topic("orders")])
    lv = LiveState(clusters={**lv.clusters, "dst": replace(lv.clusters["dst"], brokers=1)})
    with pytest.raises(PlanError, match="replication_factor is 3, but 'dst' has 1 broker;"):
        plan(ds, lv)


def test_internal_topics_get_three_replicas_and_min_insync_two_on_a_three_broker_cluster() -> None:
    from dataclasses import replace

    ds = desired("topics: {include: ['orders']}")
    lv = live(src=[topic("orders")], internal=False)
    lv = replace(lv, clusters={n: replace(c, brokers=3) for n, c in lv.clusters.items()})
    internal = [c for c in plan(ds, lv, owned()).changes if c.kind == "internal_topic"]
    assert internal and all(c.after.model_dump(mode="json")["replication_factor"] == 3 for c in internal)
    assert all(
        c.after.model_dump(mode="json")["configs"] == {"cleanup.policy": "compact", "min.insync.replicas": "2"}
        for c in internal
    )
    single = replace(lv, clusters={n: replace(c, brokers=1) for n, c in lv.clusters.items()})
    internal = [c for c in plan(ds, single, owned()).changes if c.kind == "internal_topic"]
    assert all(c.after.model_dump(mode="json")["replication_factor"] == 1 for c in internal)
    assert all(c.after.model_dump(mode="json")["configs"] == {"cleanup.policy": "compact"} for c in internal)


def test_an_internal_topic_with_three_replicas_gets_min_insync_two_and_one_with_fewer_a_warning() -> None:
    from dataclasses import replace

    ds = desired("topics: {include: ['orders']}")
    lv = live(src=[topic("orders")])
    clusters = dict(lv.clusters)
    dst = clusters["dst"]
    topics = dict(dst.topics)
    topics["src.checkpoints.internal"] = topic("src.checkpoints.internal", rf=3, cleanup_policy="compact")
    clusters["dst"] = replace(dst, topics=topics, brokers=3)
    p = plan(ds, replace(lv, clusters=clusters), owned())
    change = by_address(p)["internal_topic/dst/src.checkpoints.internal"]
    assert (
        change.action == Action.UPDATE and change.after.model_dump(mode="json")["configs"]["min.insync.replicas"] == "2"
    )
    assert any(w.startswith("internal_topic/dst/_kmirror.state: replication factor 1") for w in p.warnings)
