"""Planning of group_offsets changes on hand-built states: translation, EMPTY-only, never backwards."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reconciler.core.mm2.wire import OffsetSync
from reconciler.core.offsets.translation import OffsetSyncStore
from reconciler.live.model import GroupInfo, LiveState
from reconciler.plan.builder import PlanError
from reconciler.plan.definition import Action
from reconciler.plan.group_offsets import plan_group_offsets
from reconciler.render.text import render_text
from reconciler.resources.addresses import Kind
from tests.unit.plan.builders import desired, live, topic

pytestmark = pytest.mark.unit

FLOW = """
topics: {include: ["orders"]}
replication: {adopt_existing: true}
groups: {include: ["app-.*"]}
sync: {group_offsets: true}
"""


def syncs(*items: tuple[int, int, int]) -> OffsetSyncStore:
    s = OffsetSyncStore()
    s.mark_read_to_end()
    for partition, up, down in items:
        s.update(OffsetSync("orders", partition, up, down))
    return s


def world(
    src_groups: dict[str, GroupInfo], dst_groups: dict[str, GroupInfo], store: OffsetSyncStore | None
) -> LiveState:
    base = live([topic("orders", 3)], [topic("src.orders", 3)])
    clusters = dict(base.clusters)
    clusters["src"] = replace(clusters["src"], groups=src_groups)
    clusters["dst"] = replace(clusters["dst"], groups=dst_groups)
    return replace(base, clusters=clusters, offset_syncs={"f": store} if store is not None else {})


def test_new_group_is_created_with_source_translated_and_current_per_partition() -> None:
    ds = desired(FLOW)
    src = {
        "app-1": GroupInfo("app-1", "EMPTY", {("orders", 0): 150, ("orders", 1): 10, ("other", 0): 3}),
        "tool": GroupInfo("tool", "EMPTY", {("orders", 0): 150}),  # not in the group filter
    }
    out = plan_group_offsets(ds, world(src, {}, syncs((0, 100, 90), (1, 10, 10))))
    assert out.errors == []
    [c] = out.changes
    assert (c.address, c.kind, c.action, c.before) == (
        "group_offsets/dst/app-1",
        Kind.GROUP_OFFSETS,
        Action.CREATE,
        None,
    )
    assert c.after is not None
    assert c.after.model_dump(mode="json")["cluster"] == "dst" and c.after.model_dump(mode="json")["group"] == "app-1"
    assert [
        (r["topic"], r["partition"], r["source_offset"], r["target_offset"], r["current_offset"])
        for r in c.after.model_dump(mode="json")["partitions"]
    ] == [
        ("src.orders", 0, 150, 91, None),
        ("src.orders", 1, 10, 10, None),
    ]


def test_target_group_never_moves_backwards_and_equal_is_no_change() -> None:
    ds = desired(FLOW)
    src = {"app-1": GroupInfo("app-1", "EMPTY", {("orders", 0): 150, ("orders", 1): 10, ("orders", 2): 5})}
    dst = {"app-1": GroupInfo("app-1", "EMPTY", {("src.orders", 0): 200, ("src.orders", 1): 10, ("src.orders", 2): 1})}
    out = plan_group_offsets(ds, world(src, dst, syncs((0, 100, 90), (1, 10, 10), (2, 0, 0))))
    # p0: target ahead (200 > 91); p1: equal; p2: translation 0 + 1 == current 1
    assert out.changes == [] and out.errors == []
    # p2 one behind: only that partition moves, the others are left alone
    dst2 = {"app-1": GroupInfo("app-1", "EMPTY", {("src.orders", 0): 200, ("src.orders", 1): 10, ("src.orders", 2): 0})}
    out2 = plan_group_offsets(ds, world(src, dst2, syncs((0, 100, 90), (1, 10, 10), (2, 0, 0))))
    [c2] = out2.changes
    assert c2.action == Action.UPDATE and c2.after is not None
    assert [
        (r["partition"], r["target_offset"], r["current_offset"])
        for r in c2.after.model_dump(mode="json")["partitions"]
    ] == [(2, 1, 0)]
    assert c2.before.model_dump(mode="json") == {
        "cluster": "dst",
        "group": "app-1",
        "flow": "f",
        "source_cluster": "src",
        "partitions": [{"topic": "src.orders", "partition": 2, "current_offset": 0}],
    }


def test_active_target_group_that_would_move_is_an_error_naming_it() -> None:
    ds = desired(FLOW)
    src = {"app-1": GroupInfo("app-1", "EMPTY", {("orders", 0): 150})}
    dst = {"app-1": GroupInfo("app-1", "STABLE", {("src.orders", 0): 3})}
    out = plan_group_offsets(ds, world(src, dst, syncs((0, 100, 90))))
    assert out.changes == []
    [err] = out.errors
    assert (
        err.address == "group_offsets/dst/app-1" and "'app-1' is active on cluster 'dst' (state STABLE)" in err.summary
    )


def test_active_target_group_already_ahead_is_fine() -> None:
    ds = desired(FLOW)
    src = {"app-1": GroupInfo("app-1", "EMPTY", {("orders", 0): 150})}
    dst = {"app-1": GroupInfo("app-1", "STABLE", {("src.orders", 0): 500})}
    out = plan_group_offsets(ds, world(src, dst, syncs((0, 100, 90))))
    assert out.changes == [] and out.errors == []


def test_untranslatable_partitions_and_missing_syncs_are_warnings() -> None:
    ds = desired(FLOW)
    src = {"app-1": GroupInfo("app-1", "EMPTY", {("orders", 0): 50})}
    out = plan_group_offsets(ds, world(src, {}, syncs((0, 100, 90))))
    assert out.changes == [] and "no offset-sync at or below" in out.warnings[0].summary
    assert out.warnings[0].address == "group_offsets/dst/app-1"
    out = plan_group_offsets(ds, world(src, {}, None))
    assert out.changes == [] and "no offset-syncs to read yet" in out.warnings[0].summary
    assert out.warnings[0].address == "job/f"


def test_flows_without_group_sync_plan_nothing_and_build_plan_raises_on_active() -> None:
    ds = desired('topics: {include: ["orders"]}')
    src = {"app-1": GroupInfo("app-1", "EMPTY", {("orders", 0): 150})}
    assert plan_group_offsets(ds, world(src, {}, syncs((0, 100, 90)))).changes == []
    from reconciler.plan.builder import build_plan
    from reconciler.resources.job_status import JobStatus
    from reconciler.resources.recorded import RecordedState

    ds2 = desired(FLOW)
    dst = {"app-1": GroupInfo("app-1", "STABLE", {})}
    with pytest.raises(PlanError, match="app-1"):
        build_plan(
            ds2,
            world(src, dst, syncs((0, 100, 90))),
            RecordedState(),
            JobStatus(known=False),
            plan_id="p",
            created_at="t",
        )


def test_the_text_renderer_shows_the_offsets_table() -> None:
    from reconciler.plan.builder import build_plan
    from reconciler.resources.job_status import JobStatus
    from reconciler.resources.recorded import RecordedState

    ds = desired(FLOW)
    src = {"app-1": GroupInfo("app-1", "EMPTY", {("orders", 0): 150})}
    plan = build_plan(
        ds, world(src, {}, syncs((0, 100, 90))), RecordedState(), JobStatus(known=False), plan_id="p", created_at="t"
    )
    text = render_text(plan)
    assert "group_offsets/dst/app-1" in text
    assert "source offset" in text and "91" in text and "150" in text


def test_the_source_commit_metadata_travels_with_the_translated_offset() -> None:
    src = {
        "app-1": GroupInfo(
            "app-1", "EMPTY", {("orders", 0): 150, ("orders", 1): 10}, metadata={("orders", 0): "tx-42;node=a"}
        )
    }
    plan = plan_group_offsets(desired(FLOW), world(src, {}, syncs((0, 100, 90), (1, 10, 10))))
    (change,) = plan.changes
    rows = {r["partition"]: r for r in change.after.model_dump(mode="json")["partitions"]}
    assert rows[0]["metadata"] == "tx-42;node=a" and rows[0]["target_offset"] == 91
    assert "metadata" not in rows[1]  # none committed: the row stays as it was
