"""A disabled flow keeps its remote topics (and their ACLs): nothing is deleted or forgotten, and enabling it again
carries on; a removed flow's topic delete names who wrote it, so the executor stops that job first."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.live.model import ClusterState, LiveState
from reconciler.plan.definition import Action
from reconciler.spec.loader import load_text
from tests.unit.plan.builders import acl, desired, live, owned, plan, recorded, topic

pytestmark = pytest.mark.unit

PRUNE_ALL = "prune: {topics: true, acls: true, jobs: true}"


def _of_flow(name: str, flow: str, cluster: str = "dst") -> tuple[str, str, dict[str, Any]]:
    attrs = {"cluster": cluster, "name": name, "source": {"cluster": "src", "topic": name, "flow": flow}}
    return (f"topic/{cluster}/{name}", "topic", attrs)


def test_a_disabled_flow_keeps_its_topics_even_with_prune_on() -> None:
    ds = desired("topics: {include: ['orders']}\nenabled: false", prune=PRUNE_ALL)
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    p = plan(ds, lv, recorded(_of_flow("src.orders", "f")))
    assert not [c for c in p.changes if c.kind == "topic"]
    assert not any("src.orders" in w for w in p.warnings)


def test_a_disabled_flow_whose_clusters_are_not_read_forgets_nothing() -> None:
    # The live reader reads only the clusters enabled flows use; the topic's cluster is then absent from LiveState.
    ds = desired("topics: {include: ['orders']}\nenabled: false", prune=PRUNE_ALL)
    lv = LiveState(clusters={"dst": ClusterState("dst", {"_kmirror.state": topic("_kmirror.state")}, None)})
    p = plan(ds, lv, recorded(_of_flow("src.orders", "f")))
    assert [c for c in p.changes if c.kind == "topic"] == []


def test_a_topic_on_a_cluster_that_was_not_read_is_never_forgotten() -> None:
    lv = LiveState(clusters={"dst": ClusterState("dst", {}, None)})
    ds = desired("topics: {include: ['orders']}\nenabled: false", prune=PRUNE_ALL)
    p = plan(ds, lv, recorded(_of_flow("orders", "gone", cluster="elsewhere")))
    assert [c for c in p.changes if c.kind == "topic"] == []


def test_enabling_the_flow_again_needs_no_topic_change() -> None:
    ds = desired("topics: {include: ['orders']}", prune=PRUNE_ALL)
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    p = plan(ds, lv, owned(extra=(_of_flow("src.orders", "f"),)))
    assert [c.address for c in p.changes if c.kind == "topic"] == []


TWO_FLOWS = """
version: 1
clusters:
  src: {bootstrap_servers: "127.0.0.1:1"}
  dst: {bootstrap_servers: "127.0.0.1:2"}
state: {cluster: dst}
flows:
  - {name: f, source: src, target: dst, topics: {include: [orders]}, enabled: false}
  - {name: g, source: src, target: dst, topics: {include: [payments]}}
prune: {topics: true, acls: true, jobs: true}
"""


def test_a_disabled_flows_acls_stay_while_another_flow_syncs_acls_on_its_cluster() -> None:
    ds = load_text(TWO_FLOWS).state
    lv = live(
        src=[topic("orders"), topic("payments")],
        dst=[topic("src.orders"), topic("src.payments")],
        src_acls=[],
        dst_acls=[acl("src.orders", "User:a", "READ")],
    )
    managed = {
        "cluster": "dst",
        "principal": "User:a",
        "operation": "READ",
        "topic": "src.orders",
        "managed": [{"host": "*", "permission": "ALLOW"}],
    }
    rec = recorded(
        _of_flow("src.orders", "f"),
        _of_flow("src.payments", "g"),
        _of_flow("src.heartbeats", "g"),
        ("acl/dst/User:a/READ/src.orders", "acl", managed),
    )
    assert [c for c in plan(ds, lv, rec).changes if c.kind == "acl"] == []


def test_a_removed_flows_topic_delete_names_the_flow_that_wrote_it() -> None:
    ds = desired("topics: {include: ['payments']}", prune=PRUNE_ALL)
    lv = live(src=[topic("payments")], dst=[topic("src.orders"), topic("src.payments")])
    rec = recorded(_of_flow("src.orders", "old"), _of_flow("src.payments", "f"), _of_flow("src.heartbeats", "f"))
    delete = {c.address: c for c in plan(ds, lv, rec).changes}["topic/dst/src.orders"]
    assert delete.action == Action.DELETE
    assert delete.before.model_dump(mode="json")["source"]["flow"] == "old"
