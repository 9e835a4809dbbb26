"""OffsetSyncEmitter: ports of MirrorSourceTaskTest/OffsetSyncWriterTest, and end-to-end translation checks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.mm2.wire import OffsetSync, TopicPartition
from reconciler.core.offsets.emitter import (
    OffsetSyncEmitter,
    PartitionSyncState,
    SyncTrigger,
    decide_sync,
)
from reconciler.core.offsets.translation import OffsetSyncStore

pytestmark = pytest.mark.unit

TP = TopicPartition("topic", 0)


def run(offset_lag_max: int, pairs: list[tuple[int, int]]) -> list[bool]:
    """Feed (upstream, downstream) pairs through MM2's PartitionState.update + reset, as OffsetSyncWriter does."""
    state: PartitionSyncState | None = None
    out = []
    for upstream, downstream in pairs:
        decision = decide_sync(state, upstream, downstream, offset_lag_max)
        state = decision.state
        out.append(decision.emit)
    return out


# --- ports of MirrorSourceTaskTest.testOffsetSync / testZeroOffsetSync ---------------------------------------


def test_offset_sync() -> None:
    pairs_and_expected = [
        ((0, 100), True),  # always emit offset sync on first update
        ((2, 102), True),  # upstream offset skipped -> resync
        ((3, 152), False),  # no sync
        ((4, 153), True),  # one past target offset
        ((5, 154), False),
        ((6, 203), False),
        ((7, 204), True),  # one past target offset
        ((2, 206), True),  # upstream reset
        ((3, 207), False),
        ((4, 3), True),  # downstream reset
        ((5, 4), False),
        ((7, 6), True),  # upstream skipped
        ((7, 6), True),  # upstream repeated (step 0 != 1)
        # MM2's test asserts True here only because it skips `reset()` between these calls, so its
        # `shouldSyncOffsets` flag is still set; OffsetSyncWriter always resets, and so do we.
        ((8, 7), False),
        ((10, 57), True),
        ((11, 58), False),
    ]
    pairs = [pair for pair, _ in pairs_and_expected]
    assert run(50, pairs) == [expected for _, expected in pairs_and_expected]


def test_zero_offset_sync() -> None:
    # if max offset lag is zero, should always emit offset syncs
    pairs = [(0, 100), (2, 102), (3, 153), (4, 154), (5, 155), (6, 207), (2, 208), (3, 209), (4, 3), (5, 4)]
    pairs += [(7, 6), (7, 6), (8, 7), (10, 57), (11, 58)]
    assert all(run(0, pairs))


def test_triggers_explain_each_rule() -> None:
    first = decide_sync(None, 0, 100, 50)
    # MM2 starts from -1: 100 - (-1 + 1) >= 50 is lag too, and 0 - (-1) == 1 is no gap.
    assert first.triggers == {SyncTrigger.FIRST, SyncTrigger.LAG}
    assert first.state == PartitionSyncState(0, 100, 100)
    lag = decide_sync(PartitionSyncState(3, 152, 102), 4, 153, 50)
    assert lag.triggers == {SyncTrigger.LAG}
    rewind = decide_sync(PartitionSyncState(3, 207, 206), 4, 3, 50)
    assert rewind.triggers == {SyncTrigger.DOWNSTREAM_REWIND}
    held = decide_sync(PartitionSyncState(4, 153, 153), 5, 154, 50)
    assert not held.emit and held.triggers == frozenset()
    assert held.state == PartitionSyncState(5, 154, 153)  # last sync unchanged when nothing is emitted


# --- ports of OffsetSyncWriterTest ---------------------------------------------------------------------------


def test_maybe_queue_offset_syncs() -> None:
    emitter = OffsetSyncEmitter(offset_lag_max=2)
    assert emitter.observe_record(TP, 0, 1) == OffsetSync("topic", 0, 0, 1)  # pending, not delayed
    state = emitter.state(TP)
    assert state is not None and state.last_sync_downstream == 1
    assert emitter.observe_record(TP, 1, 2) is None  # delayed
    state = emitter.state(TP)
    assert state is not None and state.last_sync_downstream == 1
    assert emitter.take_delayed() == [OffsetSync("topic", 0, 1, 2)]


def test_fire_pending_offset_syncs_updates_last_sync() -> None:
    emitter = OffsetSyncEmitter(offset_lag_max=1)
    assert emitter.observe_record(TP, 0, 100) is not None
    assert emitter.observe_record(TP, 2, 102) == OffsetSync("topic", 0, 2, 102)
    state = emitter.state(TP)
    assert state is not None and state.last_sync_downstream == 102


def test_promote_delayed_offset_syncs() -> None:
    emitter = OffsetSyncEmitter(offset_lag_max=50)
    assert emitter.observe_record(TP, 0, 100) is not None
    assert emitter.observe_record(TP, 1, 101) is None
    delayed = emitter.take_delayed()
    assert delayed == [OffsetSync("topic", 0, 1, 101)]
    assert emitter.take_delayed() == []


def test_immediate_sync_drops_the_delayed_one_and_order_is_kept() -> None:
    other = TopicPartition("other", 3)
    emitter = OffsetSyncEmitter(offset_lag_max=10)
    emitter.observe_record(TP, 0, 0)
    emitter.observe_record(other, 0, 0)
    assert emitter.observe_record(TP, 1, 1) is None
    assert emitter.observe_record(other, 1, 1) is None
    assert emitter.observe_record(TP, 2, 2) is None  # replaces TP's delayed sync, keeps its place
    assert emitter.observe_record(other, 5, 5) is not None  # gap: immediate, drops other's delayed sync
    assert emitter.take_delayed() == [OffsetSync("topic", 0, 2, 2)]


def test_negative_lag_is_rejected() -> None:
    with pytest.raises(ValueError, match="offset_lag_max"):
        OffsetSyncEmitter(offset_lag_max=-1)


# --- batch granularity ---------------------------------------------------------------------------------------


def test_batches_copied_one_to_one_only_emit_on_lag() -> None:
    emitter = OffsetSyncEmitter(offset_lag_max=100)
    assert emitter.observe_batch(TP, 9, 109) is not None  # first
    assert emitter.observe_batch(TP, 49, 149) is None  # 40 more records, one-to-one
    assert emitter.observe_batch(TP, 99, 199) is None  # 199 - 110 = 89 < 100
    assert emitter.observe_batch(TP, 119, 219) == OffsetSync("topic", 0, 119, 219)  # 219 - 110 >= 100
    # The same pairs fed as records-of-batches hit MM2's per-record gap test every time.
    per_record = OffsetSyncEmitter(offset_lag_max=100)
    assert [per_record.observe_record(TP, u, d) is not None for u, d in [(9, 109), (49, 149)]] == [True, True]


def test_batch_with_skipped_upstream_offsets_emits_a_gap_sync() -> None:
    emitter = OffsetSyncEmitter(offset_lag_max=100)
    emitter.observe_batch(TP, 9, 109)
    # 20 upstream offsets, 18 records copied (two were aborted/compacted): distance changed.
    assert emitter.observe_batch(TP, 29, 127) == OffsetSync("topic", 0, 29, 127)
    assert emitter.observe_batch(TP, 5, 130) is not None  # upstream went backwards
    assert emitter.observe_batch(TP, 6, 2) is not None  # downstream went backwards


# --- end to end: emitted syncs drive translation -------------------------------------------------------------


@st.composite
def replicated_records(draw: st.DrawFn) -> list[tuple[int, int]]:
    upstream_steps = draw(st.lists(st.sampled_from([1, 1, 1, 1, 1, 2, 5, 300]), min_size=1, max_size=400))
    count = len(upstream_steps)
    downstream_steps = draw(st.lists(st.sampled_from([1, 1, 1, 1, 1, 1, 2]), min_size=count, max_size=count))
    upstream, downstream = draw(st.integers(0, 50)), draw(st.integers(0, 50))
    records = []
    for up_step, down_step in zip(upstream_steps, downstream_steps, strict=True):
        records.append((upstream, downstream))
        upstream += up_step
        downstream += down_step
    return records


def true_position(records: list[tuple[int, int]], group_offset: int) -> int:
    for upstream, downstream in records:
        if upstream >= group_offset:
            return downstream
    return records[-1][1] + 1


@settings(max_examples=200, deadline=None)
@given(replicated_records(), st.integers(0, 120), st.integers(1, 40), st.booleans())
def test_emitted_syncs_translate_safely_within_lag(
    records: list[tuple[int, int]], offset_lag_max: int, batch_size: int, per_batch: bool
) -> None:
    emitter = OffsetSyncEmitter(offset_lag_max)
    store = OffsetSyncStore()
    store.mark_read_to_end()
    observed: list[OffsetSync | None] = []
    if per_batch:
        for end in range(batch_size, len(records) + batch_size, batch_size):
            observed.append(emitter.observe_batch(TP, *records[min(end, len(records)) - 1]))
    else:
        observed.extend(emitter.observe_record(TP, u, d) for u, d in records)
    emitted = [sync for sync in observed if sync is not None]
    for sync in emitted:
        store.update(sync)

    first_synced = emitted[0].upstream_offset  # the first observation always emits
    caught_up = records[-1][0] + 1
    for group_offset in range(records[0][0], caught_up + 2):
        translated = store.translate_downstream(TP, group_offset)
        if group_offset < first_synced:
            assert translated is None  # nothing is known before the first sync
            continue
        assert translated is not None
        assert translated <= true_position(records, group_offset)  # never skips a record
    # A caught-up group re-reads at most offset_lag_max records before the delayed sync is written...
    translated = store.translate_downstream(TP, caught_up)
    assert translated is not None
    assert true_position(records, caught_up) - translated <= offset_lag_max
    # ...and none after the periodic commit writes it.
    for delayed in emitter.take_delayed():
        store.update(delayed)
    assert store.translate_downstream(TP, caught_up) == true_position(records, caught_up)
