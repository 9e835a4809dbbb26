"""Checkpoint computation and the offsets written to the target: MM2's MirrorCheckpointTask rules, by hand."""

from __future__ import annotations

import pytest

from reconciler.core.mm2.wire import Checkpoint, OffsetSync, TopicPartition
from reconciler.core.offsets.checkpoints import (
    CheckpointStore,
    checkpoints_for_group,
    is_more_recent,
    offsets_to_sync,
    translate_group,
)
from reconciler.core.offsets.translation import OffsetSyncStore
from reconciler.live.model import GroupInfo

pytestmark = pytest.mark.unit


def store(*syncs: tuple[str, int, int, int]) -> OffsetSyncStore:
    s = OffsetSyncStore()
    s.mark_read_to_end()
    for topic, partition, up, down in syncs:
        s.update(OffsetSync(topic, partition, up, down))
    return s


def remote(topic: str) -> str:
    return f"src.{topic}"


def replicated(topic: str) -> bool:
    return topic.startswith("orders")


def cps(group: str, offsets: dict[tuple[str, int], int], s: OffsetSyncStore, last: CheckpointStore) -> list[Checkpoint]:
    return checkpoints_for_group(group, offsets, s, last.get(group), remote_topic=remote, replicated=replicated)


def test_translation_follows_mm2_rule_and_renames_and_filters_topics() -> None:
    s = store(("orders", 0, 100, 40), ("orders", 1, 0, 0))
    rows = translate_group(
        {("orders", 0): 100, ("orders", 1): 7, ("clicks", 0): 5, ("orders", 2): 3},
        s,
        remote_topic=remote,
        replicated=replicated,
    )
    got = {(r.target_topic, r.partition): r.target_offset for r in rows}
    # equal -> downstream; above -> downstream + 1; no sync -> None; clicks is not replicated
    assert got == {("src.orders", 0): 40, ("src.orders", 1): 1, ("src.orders", 2): None}


def test_no_checkpoint_below_the_first_sync_or_without_syncs() -> None:
    s = store(("orders", 0, 100, 40))
    assert cps("g", {("orders", 0): 99, ("orders", 3): 5}, s, CheckpointStore()) == []


def test_checkpoints_only_move_forward_unless_the_group_rewinds() -> None:
    s = store(("orders", 0, 100, 40))
    last = CheckpointStore()
    first = cps("g", {("orders", 0): 150}, s, last)
    assert [(c.topic, c.partition, c.upstream_offset, c.downstream_offset) for c in first] == [
        ("src.orders", 0, 150, 41)
    ]
    last.update(first)
    # the same translation again: not re-emitted
    assert cps("g", {("orders", 0): 160}, s, last) == []
    # a newer sync moves it forward
    s.update(OffsetSync("orders", 0, 200, 140))
    fwd = cps("g", {("orders", 0): 200}, s, last)
    assert [c.downstream_offset for c in fwd] == [140]
    last.update(fwd)
    # the group was reset upstream on purpose: MM2 emits the rewind
    back = cps("g", {("orders", 0): 120}, s, last)
    assert [(c.upstream_offset, c.downstream_offset) for c in back] == [(120, 41)]


def test_is_more_recent_matches_checkpoint_is_more_recent() -> None:
    last = Checkpoint("g", "t", 0, 100, 50)
    assert is_more_recent(Checkpoint("g", "t", 0, 100, 50), None)
    assert not is_more_recent(Checkpoint("g", "t", 0, 100, 50), last)  # repeated
    assert not is_more_recent(Checkpoint("g", "t", 0, 110, 49), last)  # downstream would go back
    assert is_more_recent(Checkpoint("g", "t", 0, 90, 45), last)  # upstream rewind
    assert is_more_recent(Checkpoint("g", "t", 0, 110, 51), last)  # forward


def test_offsets_are_written_only_for_empty_or_absent_groups_and_never_backwards() -> None:
    converted = {
        "absent": {("src.orders", 0): 10},
        "empty": {("src.orders", 0): 10, ("src.orders", 1): 20, ("src.orders", 2): 30},
        "stable": {("src.orders", 0): 10},
        "dead": {("src.orders", 0): 5},
    }
    target = {
        "empty": GroupInfo("empty", "EMPTY", {("src.orders", 0): 12, ("src.orders", 1): 3}),
        "stable": GroupInfo("stable", "STABLE", {("src.orders", 0): 1}),
        "dead": GroupInfo("dead", "DEAD", {}),
    }
    assert offsets_to_sync(converted, target) == {
        "absent": {("src.orders", 0): 10},
        # p0: the target is ahead (12 > 10) and stays; p1 moves forward; p2 is new
        "empty": {("src.orders", 1): 20, ("src.orders", 2): 30},
        "dead": {("src.orders", 0): 5},
    }


def test_equal_offsets_are_not_rewritten() -> None:
    target = {"g": GroupInfo("g", "EMPTY", {("t", 0): 10})}
    assert offsets_to_sync({"g": {("t", 0): 10}}, target) == {}


def test_checkpoint_store_keeps_the_latest_per_group_and_partition() -> None:
    st = CheckpointStore([Checkpoint("g", "t", 0, 1, 1), Checkpoint("g", "t", 0, 5, 4), Checkpoint("h", "t", 1, 2, 2)])
    assert len(st) == 2
    assert st.get("g")[TopicPartition("t", 0)].downstream_offset == 4
    assert st.converted_offsets() == {"g": {("t", 0): 4}, "h": {("t", 1): 2}}


def test_dense_history_translates_groups_far_behind_precisely_and_stays_safe() -> None:
    from reconciler.core.offsets.history import SyncHistory

    h = SyncHistory()
    for up in range(1, 200, 12):  # a catch-up batch: syncs every 12 records
        h.update(OffsetSync("orders", 0, up, up))
    h.update(OffsetSync("orders", 0, 199, 199))
    assert h.translate_downstream(TopicPartition("orders", 0), 50) is None  # not read to the end yet
    h.mark_read_to_end()
    mm2 = h.store.translate_downstream(TopicPartition("orders", 0), 50)
    assert mm2 is None or mm2 < 40  # MM2's store kept only the newest (or thinned the old syncs out)
    assert h.translate_downstream(TopicPartition("orders", 0), 50) == 50  # sync 49 -> 49, + 1
    assert h.translate_downstream(TopicPartition("orders", 0), 0) is None  # before the first sync
    # a rewind (target recreated: downstream goes back) forgets everything before it
    h.update(OffsetSync("orders", 0, 300, 5))
    assert h.translate_downstream(TopicPartition("orders", 0), 250) is None
    assert h.translate_downstream(TopicPartition("orders", 0), 310) == 6
    assert h.syncs_for(TopicPartition("orders", 0))[0] == OffsetSync("orders", 0, 300, 5)


def test_dense_history_falls_back_to_mm2_store_below_a_trimmed_window() -> None:
    from reconciler.core.offsets.history import SyncHistory

    h = SyncHistory(max_per_partition=3)
    for up in (0, 10, 20, 30, 40):
        h.update(OffsetSync("t", 0, up, up))
    h.mark_read_to_end()
    assert h.translate_downstream(TopicPartition("t", 0), 35) == 31
    assert h.translate_downstream(TopicPartition("t", 0), 5) == h.store.translate_downstream(TopicPartition("t", 0), 5)


def test_checkpoints_carry_the_source_commit_metadata_and_so_do_the_offsets_to_write() -> None:
    s = store(("orders", 0, 100, 40), ("orders", 1, 0, 0))
    got = checkpoints_for_group(
        "g",
        {("orders", 0): 150, ("orders", 1): 0},
        s,
        {},
        remote_topic=remote,
        replicated=replicated,
        metadata={("orders", 0): "consumer-7 at 2024-01-01"},
    )
    assert {(c.partition, c.metadata) for c in got} == {(0, "consumer-7 at 2024-01-01"), (1, "")}
    assert all(Checkpoint.from_record(c.key_bytes(), c.value_bytes()) == c for c in got)  # MM2 STRING round-trips
    st = CheckpointStore(got)
    assert st.converted_metadata("g") == {("src.orders", 0): "consumer-7 at 2024-01-01"}
    assert st.converted_metadata("absent") == {}
