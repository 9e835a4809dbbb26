"""Several flows on one cluster pair, as users write them (one flow per topic family, each with its settings):
they share MM2's internal topics the MM2 way, with one heartbeats emitter and mirror for the pair and no
hand-tuning; where two flows really would write one remote topic, the error's advice is one that works."""

from __future__ import annotations

import pytest

from reconciler.plan.builder import PlanError
from reconciler.spec.loader import load_text
from reconciler.spec.models import DesiredState
from tests.unit.plan.builders import by_address, live, owned, plan, topic

pytestmark = pytest.mark.unit


def six_flows(*, without: str = "", extra: str = "") -> DesiredState:
    flows = "".join(
        f"  - {{name: fam{i}, source: src, target: dst, topics: {{include: ['fam{i}[.].*']}}}}\n"
        for i in range(6)
        if f"fam{i}" != without
    )
    return load_text(
        "version: 1\nclusters: {src: {bootstrap_servers: 'a:1'}, dst: {bootstrap_servers: 'b:1'}}\n"
        f"state: {{cluster: dst}}\nflows:\n{flows}{extra}"
    ).state


def test_six_flows_of_one_pair_plan_with_one_heartbeats_mirror_and_shared_internal_topics() -> None:
    ds = six_flows()
    lv = live(src=[topic(f"fam{i}.orders") for i in range(6)], internal=False)
    changes = by_address(plan(ds, lv, owned()))
    remote = [a for a in changes if a.startswith("topic/dst/")]
    assert sorted(remote) == sorted([*(f"topic/dst/src.fam{i}.orders" for i in range(6)), "topic/dst/src.heartbeats"])
    assert changes["topic/dst/src.heartbeats"].after.source.flow == "fam0"  # one mirror of the pair's heartbeats
    internal = sorted(a for a in changes if a.startswith("internal_topic/"))
    assert internal == [
        "internal_topic/dst/_kmirror.state",
        "internal_topic/dst/src.checkpoints.internal",
        "internal_topic/src/heartbeats",
        "internal_topic/src/mm2-offset-syncs.dst.internal",
    ]


def test_only_the_pairs_first_flow_emits_and_mirrors_heartbeats() -> None:
    ds = six_flows()
    emits = {f.name: ds.flow_effective_spec(f.name)["flow"]["heartbeats"]["enabled"] for f in ds.flows}
    assert emits == {"fam0": True, **{f"fam{i}": False for i in range(1, 6)}}
    assert "heartbeats" in ds.flow("fam0").subscribe_pattern()
    assert "heartbeats" not in ds.flow("fam3").subscribe_pattern()


def test_when_the_heartbeats_flow_goes_the_next_one_takes_over_and_only_it_redeploys() -> None:
    before, after = six_flows(), six_flows(without="fam0")
    changed = {f.name for f in after.flows if after.flow_digest(f.name) != before.flow_digest(f.name)}
    assert changed == {"fam1"}
    assert after.flow("fam1").heartbeats.enabled


def test_heartbeats_turned_off_by_hand_on_a_flow_stays_off_and_another_flow_takes_the_pair() -> None:
    extra = "  - {name: aaa, source: src, target: dst, topics: {include: ['x']}, heartbeats: {enabled: false}}\n"
    ds = six_flows(extra=extra)
    assert not ds.flow("aaa").heartbeats.enabled and ds.flow("fam0").heartbeats.enabled


def test_two_flows_replicating_one_source_topic_are_told_to_exclude_it_from_one() -> None:
    ds = six_flows(extra="  - {name: zz, source: src, target: dst, topics: {include: ['fam1[.]orders']}}\n")
    with pytest.raises(PlanError) as raised:
        plan(ds, live(src=[topic("fam1.orders")], internal=False), owned())
    (problem,) = raised.value.problems
    assert problem.address == "topic/dst/src.fam1.orders"
    assert "topics.exclude: ['fam1.orders']" in problem.summary and "prefix" not in problem.summary


def test_two_source_clusters_with_identity_naming_are_told_to_name_by_source() -> None:
    ds = load_text(
        "version: 1\nclusters: {a: {bootstrap_servers: 'a:1'}, b: {bootstrap_servers: 'b:1'}, "
        "dst: {bootstrap_servers: 'c:1'}}\nstate: {cluster: dst}\nflows:\n"
        "  - {name: fa, source: a, target: dst, topics: {include: ['ord.*']}, naming: {policy: identity}}\n"
        "  - {name: fb, source: b, target: dst, topics: {include: ['or.*']}, naming: {policy: identity}}\n"
    ).state
    from reconciler.live.model import ClusterState, LiveState

    world = LiveState(
        clusters={
            "a": ClusterState("a", {"orders": topic("orders")}, None),
            "b": ClusterState("b", {"orders": topic("orders")}, None),
            "dst": ClusterState("dst", {}, None),
        }
    )
    with pytest.raises(PlanError) as raised:
        plan(ds, world, owned())
    summaries = {p.address: p.summary for p in raised.value.problems}
    assert "naming: {policy: prefix}" in summaries["topic/dst/orders"]
