"""ACL sync with MM2's semantics, and kmirror's rule: never delete an ACL it did not create."""

from __future__ import annotations

import pytest

from reconciler.plan.definition import Action
from reconciler.plan.forms import AclForm
from tests.unit.plan.builders import acl, by_address, desired, live, owned, plan, topic

pytestmark = pytest.mark.unit

FLOW = "topics: {include: ['orders']}"


def _entries(form: AclForm | None) -> list[tuple[str, str]]:
    return [(e.host, e.permission) for e in (form.entries if form else ())]


def test_literal_topic_acls_are_synced_with_mm2_semantics() -> None:
    src_acls = [
        acl("orders", "User:reader", "READ"),
        acl("orders", "User:writer", "WRITE"),  # ALLOW WRITE: not synced
        acl("orders", "User:admin", "ALL"),  # ALLOW ALL -> ALLOW READ
        acl("orders", "User:mallory", "READ", "DENY", host="10.0.0.1"),  # DENY copied, host kept
        acl("orders", "User:pre", "READ", pattern="PREFIXED"),  # prefixed: not synced
        acl("orders", "User:grp", "READ", resource_type="GROUP"),  # group ACL: not synced
        acl("payments", "User:reader", "READ"),  # topic not replicated
    ]
    p = plan(desired(FLOW), live(src=[topic("orders"), topic("payments")], src_acls=src_acls, dst_acls=[]))
    acls = {c.address: c for c in p.changes if c.kind == "acl"}
    assert set(acls) == {
        "acl/dst/User:reader/READ/src.orders",
        "acl/dst/User:admin/READ/src.orders",
        "acl/dst/User:mallory/READ/src.orders",
    }
    assert all(c.action == Action.CREATE for c in acls.values())
    assert _entries(acls["acl/dst/User:mallory/READ/src.orders"].after) == [("10.0.0.1", "DENY")]
    assert _entries(acls["acl/dst/User:admin/READ/src.orders"].after) == [("*", "ALLOW")]


def test_synced_acls_already_on_the_target_plan_nothing() -> None:
    lv = live(
        src=[topic("orders")],
        dst=[topic("src.orders")],
        src_acls=[acl("orders", "User:reader", "READ")],
        dst_acls=[acl("src.orders", "User:reader", "READ")],
    )
    assert plan(desired(FLOW), lv, owned("src.orders")).changes == ()


def test_acl_sync_without_an_authorizer_is_a_warning() -> None:
    p = plan(desired(FLOW), live(src=[topic("orders")], src_acls=None, dst_acls=[]))
    assert [c for c in p.changes if c.kind == "acl"] == []
    assert any("cannot be read (no authorizer" in w for w in p.warnings)


def test_acl_removed_on_the_source_is_deleted_only_with_prune_and_only_if_kmirror_made_it() -> None:
    entry = [{"host": "*", "permission": "ALLOW"}]
    form = {"cluster": "dst", "principal": "User:old", "operation": "READ", "topic": "src.orders"}
    mine = ("acl/dst/User:old/READ/src.orders", "acl", {**form, "entries": entry, "managed": entry})
    lv = live(
        src=[topic("orders")],
        dst=[topic("src.orders")],
        src_acls=[],
        dst_acls=[acl("src.orders", "User:old", "READ"), acl("src.orders", "User:byhand", "READ")],
    )
    kept = plan(desired(FLOW), lv, owned("src.orders", extra=(mine,)))
    assert kept.changes == () and any("prune.acls is off" in w for w in kept.warnings)

    pruned = plan(desired(FLOW, prune="prune: {acls: true}"), lv, owned("src.orders", extra=(mine,)))
    assert [(c.address, c.action) for c in pruned.changes] == [("acl/dst/User:old/READ/src.orders", Action.DELETE)]
    # User:byhand was never created by kmirror: no change for it, even with prune on.


def test_a_hand_made_acl_next_to_a_synced_one_is_kept() -> None:
    lv = live(
        src=[topic("orders")],
        dst=[topic("src.orders")],
        src_acls=[acl("orders", "User:u", "READ")],
        dst_acls=[acl("src.orders", "User:u", "READ", "DENY", host="10.1.1.1")],
    )
    change = by_address(plan(desired(FLOW), lv, owned("src.orders")))["acl/dst/User:u/READ/src.orders"]
    assert change.action == Action.UPDATE
    assert _entries(change.after) == [("*", "ALLOW"), ("10.1.1.1", "DENY")]
    assert [(e["host"], e["permission"]) for e in change.after.model_dump(mode="json")["managed"]] == [("*", "ALLOW")]
