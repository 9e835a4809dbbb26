"""A consumer group whose listing failed is never treated as absent: no offsets are planned into it, and the
plan warns naming it (writing into a group that exists but was not listed could move it backwards)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.adapters import group_offsets
from reconciler.core.mm2.wire import OffsetSync
from reconciler.core.offsets.history import SyncHistory
from reconciler.live.model import GroupInfo
from reconciler.plan.group_offsets import plan_group_offsets
from tests.unit.plan.builders import desired, live, topic

pytestmark = pytest.mark.unit


class Admin:
    def __init__(self, cluster: str, groups: dict[str, GroupInfo], incomplete: str | None = None) -> None:
        self.cluster = cluster
        self._groups = groups
        self.incomplete = incomplete

    def groups(self, wanted: Any = None) -> dict[str, GroupInfo]:
        return self.read_groups(wanted)[0]

    def read_groups(self, wanted: Any = None) -> tuple[dict[str, GroupInfo], str | None]:
        return {g: i for g, i in self._groups.items() if wanted is None or wanted(g)}, self.incomplete


def _syncs() -> SyncHistory:
    history = SyncHistory()
    history.update(OffsetSync("orders", 0, 100, 100))
    history.mark_read_to_end()
    return history


@pytest.mark.parametrize("incomplete", [None, "broker 2: timed out"])
def test_a_target_group_missing_from_an_incomplete_listing_gets_no_offsets(
    incomplete: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(group_offsets, "read_offset_syncs", lambda *a, **k: _syncs())
    ds = desired("topics: {include: ['orders']}\nnaming: {policy: identity}\nsync: {group_offsets: true}")
    source = {
        "billing": GroupInfo("billing", "EMPTY", {("orders", 0): 100}, {}),
        "audit": GroupInfo("audit", "EMPTY", {("orders", 0): 100}, {}),
    }
    target = {"audit": GroupInfo("audit", "EMPTY", {("orders", 0): 50}, {})}  # listed: known, moves forward
    admins = {"src": Admin("src", source), "dst": Admin("dst", target, incomplete)}
    lv = group_offsets.with_group_offsets(ds, live(src=[topic("orders")], dst=[topic("orders")]), admins)  # type: ignore[arg-type]
    planned = {c.address for c in plan_group_offsets(ds, lv).changes}
    if incomplete is None:
        assert planned == {"group_offsets/dst/audit", "group_offsets/dst/billing"}
        assert lv.warnings == ()
    else:
        assert planned == {"group_offsets/dst/audit"}
        [warning] = lv.warnings
        assert warning.address == "group_offsets/dst/billing" and "broker 2: timed out" in warning.summary
