"""Which group offsets `kmirror plan` writes exact and which conservative, and why, on hand-built verdicts.

The planner takes the per-partition verdicts (`LiveState.exact_offsets`) as data; the adapter that reads the
records (`with_exact_offsets`) is checked here only on the paths that need no broker: a partition still copying
is not read, a spent time budget and a failing read answer "exactness unknown", budget 0 reads nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import pytest

from reconciler.adapters.group_offsets import with_exact_offsets
from reconciler.adapters.record_ranges import translate_exactly
from reconciler.core.mm2.wire import OffsetSync
from reconciler.core.offsets.exact import ExactRequest, ExactTranslation, still_copying, unknown
from reconciler.core.offsets.history import SyncHistory
from reconciler.live.model import GroupInfo, LiveState
from reconciler.plan.builder import build_plan
from reconciler.plan.forms import OffsetRow
from reconciler.plan.group_offsets import group_translation, plan_group_offsets
from reconciler.render import render_json, render_text
from reconciler.resources.job_status import JobStatus
from reconciler.resources.recorded import RecordedState
from tests.unit.plan.builders import desired, live, topic

pytestmark = pytest.mark.unit

FLOW = """
topics: {include: ["orders"]}
replication: {adopt_existing: true}
groups: {include: ["app-.*"]}
sync: {group_offsets: true}
"""

SYNCS = ((0, 100, 90), (1, 10, 10), (2, 0, 0))


def syncs() -> SyncHistory:
    s = SyncHistory()
    s.mark_read_to_end()
    for partition, up, down in SYNCS:
        s.update(OffsetSync("orders", partition, up, down))
    return s


def world(verdicts: Iterable[ExactTranslation] | None, dst: Mapping[str, GroupInfo] | None = None) -> LiveState:
    base = live([topic("orders", 3)], [topic("src.orders", 3)])
    clusters = dict(base.clusters)
    src = {"app-1": GroupInfo("app-1", "EMPTY", {("orders", 0): 150, ("orders", 1): 10, ("orders", 2): 7})}
    clusters["src"] = replace(clusters["src"], groups=src)
    clusters["dst"] = replace(clusters["dst"], groups=dict(dst or {}))
    exact = {} if verdicts is None else {"f": tuple(verdicts)}
    return replace(base, clusters=clusters, offset_syncs={"f": syncs()}, exact_offsets=exact)


def request(partition: int, g: int) -> ExactRequest:
    up, down = {p: (u, d) for p, u, d in SYNCS}[partition]
    return ExactRequest("orders", partition, g, OffsetSync("orders", partition, up, down))


def exact(partition: int, g: int, answer: int) -> ExactTranslation:
    r = request(partition, g)
    assert r.sync is not None
    mm2 = r.sync.downstream_offset + (0 if r.sync.upstream_offset == g else 1)
    return ExactTranslation("orders", partition, g, mm2, answer, "matched")


def conservative(partition: int, g: int, why: str) -> ExactTranslation:
    r = request(partition, g)
    assert r.sync is not None
    mm2 = r.sync.downstream_offset + (0 if r.sync.upstream_offset == g else 1)
    return ExactTranslation("orders", partition, g, mm2, None, why)


def rows(state: LiveState) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    out = plan_group_offsets(desired(FLOW), state)
    assert out.errors == []
    [c] = out.changes
    assert c.after is not None
    return c.after.model_dump(mode="json"), {r["partition"]: r for r in c.after.model_dump(mode="json")["partitions"]}


def test_all_exact_writes_the_exact_offsets_and_says_so() -> None:
    after, by_p = rows(world([exact(0, 150, 140), exact(1, 10, 10), exact(2, 7, 7)]))
    assert after["translation"] == "exact"
    assert {p: (r["target_offset"], r["translation"]) for p, r in by_p.items()} == {
        0: (140, "exact"),
        1: (10, "exact"),
        2: (7, "exact"),
    }
    assert by_p[0]["conservative_offset"] == 91 and "why" not in by_p[0]


def test_mixed_group_names_each_partition_and_why() -> None:
    state = world(
        [
            exact(0, 150, 140),
            conservative(1, 10, "irrelevant: the sync is at the offset"),
            still_copying(request(2, 7), 12),
        ]
    )
    after, by_p = rows(state)
    assert after["translation"] == "mixed"
    assert by_p[0]["translation"] == "exact" and by_p[0]["target_offset"] == 140
    assert by_p[2]["translation"] == "conservative" and by_p[2]["target_offset"] == 1  # MM2's rule: 0 + 1
    assert by_p[2]["why"].startswith("the flow is still copying: 12 record(s)")


def test_conservative_and_unknown_groups() -> None:
    dup = "target record 95 is not the copy of source record 105 (a record written twice, or compaction on the target)"
    after, by_p = rows(world([conservative(0, 150, dup), conservative(1, 10, "x"), conservative(2, 7, "y")]))
    assert after["translation"] == "conservative" and by_p[0]["why"] == dup and by_p[0]["target_offset"] == 91
    failed = [unknown(request(p, g), "could not read the records: boom") for p, g in ((0, 150), (1, 10), (2, 7))]
    after, by_p = rows(world(failed))
    assert after["translation"] == "unknown"
    assert by_p[0] == {
        **by_p[0],
        "translation": "unknown",
        "target_offset": 91,
        "why": "could not read the records: boom",
    }


def test_records_not_read_every_row_says_unknown() -> None:
    after, by_p = rows(world(None))
    assert after["translation"] == "unknown"
    assert all(r["translation"] == "unknown" and r["why"] == "the records were not read" for r in by_p.values())


def test_an_exact_offset_the_target_group_already_has_is_no_change_and_never_backwards() -> None:
    at_exact = {
        "app-1": GroupInfo("app-1", "EMPTY", {("src.orders", 0): 140, ("src.orders", 1): 10, ("src.orders", 2): 7})
    }
    out = plan_group_offsets(desired(FLOW), world([exact(0, 150, 140), exact(1, 10, 10), exact(2, 7, 7)], at_exact))
    assert out.changes == []
    # the read failed this time: MM2's offset (91) is behind what the group has (140): left alone
    failed = [unknown(request(p, g), "timeout") for p, g in ((0, 150), (1, 10), (2, 7))]
    assert plan_group_offsets(desired(FLOW), world(failed, at_exact)).changes == []


def test_group_translation_summary() -> None:
    assert group_translation([OffsetRow(topic="t", partition=0, translation="exact")]) == (
        "exact",
        "translation exact (every partition matched record for record)",
    )
    verdict, text = group_translation(
        [
            OffsetRow(topic="t", partition=0, translation="exact"),
            OffsetRow(topic="t", partition=1, translation="unknown"),
        ]
    )
    assert verdict == "mixed" and text == "translation mixed (exact 1, unknown 1 of 2 partition(s))"


def test_plan_text_and_json_show_the_verdicts() -> None:
    state = world([exact(0, 150, 140), conservative(1, 10, "a duplicate"), unknown(request(2, 7), "timeout")])
    plan = build_plan(desired(FLOW), state, RecordedState(), JobStatus(), plan_id="p", created_at="t")
    text = render_text(plan, color=False)
    assert re.search(r"translation +  = mixed", text) or re.search(r"translation += mixed", text), text
    assert "src.orders/1: conservative: a duplicate" in text
    assert "src.orders/2: exactness unknown (timeout)" in text
    assert "current offset  translation" in text
    assert '"translation": "mixed"' in render_json(plan)


class _Admin:
    """An admin whose offset reads fail: the exact translation must answer "unknown", never raise."""

    cluster = "src"

    def start_offsets(self, partitions: object) -> dict[tuple[str, int], int]:
        raise RuntimeError("broker gone")

    end_offsets = start_offsets


def test_with_exact_offsets_never_fails_and_budget_zero_reads_nothing() -> None:
    ds = desired(FLOW)
    state = world(None)
    assert with_exact_offsets(ds, state, {}, budget=0) is state
    read = with_exact_offsets(ds, state, {"src": _Admin(), "dst": _Admin()}, budget=5)  # type: ignore[dict-item]
    found = read.exact_offsets["f"]
    assert [x.verdict for x in found] == ["unknown"] * 3
    assert all(x.reason == "could not read the records: broker gone" for x in found)
    assert all(r["translation"] == "unknown" for r in rows(read)[1].values())


def test_a_partition_still_copying_is_not_read_and_a_spent_budget_is_unknown() -> None:
    offsets = [("orders", 0, 150), ("orders", 1, 10)]
    common: dict[str, Any] = {
        "remote_topic": lambda t: f"src.{t}",
        "source_config": {"bootstrap.servers": "127.0.0.1:1"},
        "target_config": {"bootstrap.servers": "127.0.0.1:2"},
        "offset_lag_max": 10,
        "timeout": 1.0,
    }
    copying = translate_exactly(offsets, syncs(), lag={("orders", 0): 3, ("orders", 1): 1}, **common)
    assert [(x.verdict, x.offset) for x in copying] == [("conservative", 91), ("conservative", 10)]
    assert all(x.reason.startswith("the flow is still copying") for x in copying)
    spent = translate_exactly(offsets, syncs(), budget=0.0, **common)
    assert [x.verdict for x in spent] == ["unknown", "unknown"]
    assert all("time budget of 0s" in x.reason for x in spent)
