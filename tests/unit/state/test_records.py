"""Folding the state topic's records into a snapshot: latest value wins, tombstones remove, history parts join."""

from __future__ import annotations

import pytest

from reconciler.state.records import LEASE, LOCK, META, RESOURCE, encode, fold, history_key, history_part_key

pytestmark = pytest.mark.unit


def _log(*records: tuple[str, object]) -> list[tuple[str, bytes | None, int]]:
    return [(k, encode(v), i) for i, (k, v) in enumerate(records)]  # type: ignore[arg-type]


def test_latest_value_wins_and_tombstones_remove() -> None:
    snap = fold(
        _log(
            (META, {"lineage": "L", "serial": 1}),
            (RESOURCE + "topic/c/a", {"kind": "topic", "attributes": {"v": 1}}),
            (RESOURCE + "topic/c/b", {"kind": "topic", "attributes": {"v": 1}, "pending": True}),
            (RESOURCE + "topic/c/a", {"kind": "topic", "attributes": {"v": 2}}),
            (RESOURCE + "topic/c/b", None),
            (META, {"lineage": "L", "serial": 2}),
        )
    )
    assert (snap.lineage, snap.serial) == ("L", 2)
    recorded = snap.recorded()
    assert set(recorded.resources) == {"topic/c/a"}
    assert recorded.get("topic/c/a") == {"v": 2}
    assert snap.end_offset == 6


def test_pending_resources_are_owned_and_marked() -> None:
    snap = fold(_log((RESOURCE + "topic/c/p", {"kind": "topic", "attributes": {}, "pending": True})))
    rec = snap.recorded()
    assert rec.owns("topic/c/p") and rec.pending("topic/c/p")


def test_history_parts_are_joined_in_order() -> None:
    snap = fold(
        _log(
            (history_part_key(1, 1), {"changes": [{"address": "c"}]}),
            (history_part_key(1, 0), {"changes": [{"address": "a"}]}),
            (history_part_key(1, 0), {"changes": [{"address": "a"}, {"address": "b"}]}),  # rewritten, grown
            (history_key(1), {"serial": 1, "status": "completed", "counts": {"applied": 3}}),
        )
    )
    [apply] = snap.applies()
    assert [c["address"] for c in apply["changes"]] == ["a", "b", "c"]
    assert apply["status"] == "completed"


def test_lock_claims_keep_their_first_offset_and_latest_lease() -> None:
    snap = fold(
        _log(
            (LOCK + "x", {"holder": {"user": "u"}, "operation": "apply", "claimed_at": 1, "lease_until": 10}),
            (LOCK + "y", {"holder": {"user": "v"}, "operation": "apply", "claimed_at": 2, "lease_until": 10}),
            (LEASE + "x", {"lease_until": 99}),
            (LOCK + "y", None),
        )
    )
    assert list(snap.claims) == ["x"]
    assert snap.claims["x"].offset == 0 and snap.claims["x"].lease_until == 99


def test_only_a_resources_latest_value_is_parsed_and_its_place_is_kept() -> None:
    records = _log(
        (RESOURCE + "topic/c/a", {"kind": "topic", "attributes": {"v": 1}, "pending": True}),
        (RESOURCE + "topic/c/b", {"kind": "topic", "attributes": {"v": 1}}),
        (RESOURCE + "topic/c/c", {"kind": "topic", "attributes": {"v": 1}}),
        (RESOURCE + "topic/c/a", {"kind": "topic", "attributes": {"v": 2}}),
        (RESOURCE + "topic/c/b", None),
        (RESOURCE + "topic/c/b", {"kind": "topic", "attributes": {"v": 3}}),
    )
    records[0] = (records[0][0], b"not json: superseded, so never parsed", 0)
    snap = fold(records)
    # a keeps the place of its first record; b, deleted and recreated, moves to the end (as a dict would hold them)
    assert list(snap.resources) == ["topic/c/a", "topic/c/c", "topic/c/b"]
    assert [r["attributes"]["v"] for r in snap.resources.values()] == [2, 1, 3]
    assert not snap.recorded().pending("topic/c/a")
