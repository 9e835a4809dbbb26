"""OffsetSyncStore: ports of apache/kafka OffsetSyncStoreTest, plus properties against a brute-force reference."""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from itertools import repeat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.mm2.wire import OffsetSync, TopicPartition
from reconciler.core.offsets.translation import SYNCS_PER_PARTITION, OffsetSyncStore

pytestmark = pytest.mark.unit

TP = TopicPartition("topic1", 2)
LONG_MAX = 2**63 - 1


def started_store() -> OffsetSyncStore:
    store = OffsetSyncStore()
    store.mark_read_to_end()
    return store


def sync(store: OffsetSyncStore, upstream: int, downstream: int, tp: TopicPartition = TP) -> None:
    """Like MM2's FakeOffsetSyncStore.sync: through the record bytes, as the adapter will feed it."""
    record = OffsetSync(tp.topic, tp.partition, upstream, downstream)
    store.update(OffsetSync.from_record(record.key_bytes(), record.value_bytes()))


def distinct_stored_syncs(store: OffsetSyncStore, tp: TopicPartition = TP) -> int:
    """MM2's countDistinctStoredSyncs: adjacent slots compared by identity."""
    slots = store.syncs_for(tp)
    return 1 + sum(1 for i in range(1, len(slots)) if slots[i - 1] is not slots[i])


def assert_sparse_sync_invariant(store: OffsetSyncStore, tp: TopicPartition = TP) -> None:
    """MM2's assertSparseSyncInvariant: invariants B and C for every pair of distinct slots."""
    slots = store.syncs_for(tp)
    assert len(slots) == SYNCS_PER_PARTITION
    for j in range(SYNCS_PER_PARTITION):
        for i in range(j):
            j_up, i_up = slots[j].upstream_offset, slots[i].upstream_offset
            if j_up == i_up:
                continue
            lower = j_up + (1 << max(i - 2, 0))
            if lower > LONG_MAX:
                continue
            assert i_up >= lower, f"Invariant C({i},{j}): {i_up} at {i} should be at least {lower}"
            upper = j_up + (1 << j) - (1 << i)
            if upper > LONG_MAX:
                continue
            assert i_up <= upper, f"Invariant B({i},{j}): {i_up} at {i} should be at most {upper}"


def assert_sparse_sync(store: OffsetSyncStore, sync_offset: int, previous_offset: int) -> None:
    """MM2's assertSparseSync, with MM2's -1 ("cannot translate") as None."""
    before = None if previous_offset == -1 else previous_offset + 1
    assert store.translate_downstream(TP, sync_offset - 1) == before
    assert store.translate_downstream(TP, sync_offset) == sync_offset
    assert store.translate_downstream(TP, sync_offset + 1) == sync_offset + 1
    assert store.translate_downstream(TP, sync_offset + 2) == sync_offset + 1


# --- ports of OffsetSyncStoreTest ----------------------------------------------------------------------------


def test_offset_translation() -> None:
    store = started_store()
    # Emit synced downstream offset without dead-reckoning
    sync(store, 100, 200)
    assert store.translate_downstream(TP, 150) == 201
    # Translate exact offsets
    sync(store, 150, 251)
    assert store.translate_downstream(TP, 150) == 251
    # Use old offset (5) prior to any sync -> can't translate (MM2: -1)
    assert store.translate_downstream(TP, 5) is None
    # Downstream offsets reset
    sync(store, 200, 10)
    assert store.translate_downstream(TP, 200) == 10
    # Upstream offsets reset
    sync(store, 20, 20)
    assert store.translate_downstream(TP, 20) == 20


def test_no_translation_if_store_not_started() -> None:
    store = OffsetSyncStore()
    # no offsets exist and store is not started
    for offset in (0, 100, 200):
        assert store.translate_downstream(TP, offset) is None
    # read a sync during startup
    sync(store, 100, 200)
    for offset in (0, 100, 200):
        assert store.translate_downstream(TP, offset) is None
    # After the store is started all offsets are visible
    store.mark_read_to_end()
    assert store.read_to_end
    assert store.translate_downstream(TP, 0) is None  # MM2: -1
    assert store.translate_downstream(TP, 100) == 200
    assert store.translate_downstream(TP, 200) == 201


def test_no_translation_if_no_offset_sync() -> None:
    store = started_store()
    assert store.translate_downstream(TP, 0) is None
    assert store.syncs_for(TP) == ()


def test_past_offset_translation() -> None:
    store = OffsetSyncStore()
    max_offset_lag = 10
    offset = 0
    while offset <= 1000:
        sync(store, offset, offset)
        assert_sparse_sync_invariant(store)
        offset += max_offset_lag
    store.mark_read_to_end()

    # After starting but before seeing new offsets, only the latest startup offset can be translated
    assert_sparse_sync(store, 1000, -1)

    while offset <= 10000:
        sync(store, offset, offset)
        assert_sparse_sync_invariant(store)
        offset += max_offset_lag

    # After seeing new offsets, we still cannot translate earlier than the latest startup offset
    # Invariant D: the last sync from the initial read-to-end is still stored
    assert_sparse_sync(store, 1000, -1)

    # Offsets between the latest startup offset and the latest offset translate with variable precision;
    # older offsets are less precise.
    assert_sparse_sync(store, 4840, 1000)
    assert_sparse_sync(store, 6760, 4840)
    assert_sparse_sync(store, 8680, 6760)
    assert_sparse_sync(store, 9160, 8680)
    assert_sparse_sync(store, 9640, 9160)
    assert_sparse_sync(store, 9880, 9640)
    assert_sparse_sync(store, 9940, 9880)
    assert_sparse_sync(store, 9970, 9940)
    assert_sparse_sync(store, 9990, 9970)
    assert_sparse_sync(store, 10000, 9990)

    # Rewinding upstream offsets should clear all historical syncs
    sync(store, 1500, 11000)
    assert_sparse_sync_invariant(store)
    assert store.translate_downstream(TP, 1499) is None
    assert store.translate_downstream(TP, 1500) == 11000
    assert store.translate_downstream(TP, 2000) == 11001


def assert_sync_spacing_has_bounded_expirations(
    first_offset: int, steps: Iterable[int], maximum_expirations: int
) -> None:
    """MM2's assertSyncSpacingHasBoundedExpirations."""
    store = started_store()
    store.update(OffsetSync(TP.topic, TP.partition, first_offset, first_offset))
    offset = first_offset
    last_count = 1
    for step in steps:
        offset += step
        assert offset <= LONG_MAX, "Test is invalid, offset overflowed"
        store.update(OffsetSync(TP.topic, TP.partition, offset, offset))
        slots = store.syncs_for(TP)
        # Invariant A: the latest sync is present
        assert slots[0].upstream_offset == offset
        # Invariant D: the earliest sync is present
        assert slots[63].upstream_offset == first_offset
        count = 1 + sum(1 for i in range(1, SYNCS_PER_PARTITION) if slots[i - 1] is not slots[i])
        # We are adding one sync, so if the count didn't change, then exactly one sync expired.
        expired = last_count - count + 1
        assert expired <= maximum_expirations, f"expired {expired} > {maximum_expirations} after {offset}"
        last_count = count


def consistently_spaced_syncs(first_offsets: Iterable[int]) -> None:
    # Regularly spaced syncs (offset.lag.max steps): each new sync expires at most one other.
    iterations = 100
    max_step = LONG_MAX // iterations
    first_offsets = list(first_offsets)
    step = 1
    while step < max_step:
        for first_offset in first_offsets:
            assert_sync_spacing_has_bounded_expirations(first_offset, repeat(step, iterations), 1)
        step = step * 2 + 1


def randomly_spaced_syncs(iteration_bits: int) -> None:
    # MM2 uses java.util.Random(0); the property must hold for any stream, so a seeded Python RNG stands in.
    rng = random.Random(0)
    iterations = 1 << iteration_bits
    for n in range(1, 64 - iteration_bits):
        # At most n bits of difference between steps expires at most n + 2 syncs at once.
        maximum_difference = 1 << n
        maximum_expirations = n + 2
        steps = [rng.randrange(0, maximum_difference) for _ in range(iterations)]
        assert_sync_spacing_has_bounded_expirations(0, steps, maximum_expirations)
        # Also with a larger minimum step, as offset.lag.max causes
        offset_lag_max = 1 << 16
        steps = [rng.randrange(offset_lag_max, offset_lag_max + maximum_difference) for _ in range(iterations)]
        assert_sync_spacing_has_bounded_expirations(0, steps, maximum_expirations)


def test_consistently_spaced_syncs() -> None:
    # MM2 sweeps first offsets 0..29 (see the slow variant); a spread of them keeps this test quick.
    consistently_spaced_syncs([0, 1, 2, 5, 17, 29])


def test_randomly_spaced_syncs() -> None:
    # MM2 uses 2^10 syncs per stream (see the slow variant); the bound must hold for any stream length.
    randomly_spaced_syncs(iteration_bits=8)


@pytest.mark.slow
def test_consistently_spaced_syncs_mm2_parameters() -> None:
    consistently_spaced_syncs(range(30))


@pytest.mark.slow
def test_randomly_spaced_syncs_mm2_parameters() -> None:
    randomly_spaced_syncs(iteration_bits=10)


def test_dropped_syncs_spacing() -> None:
    # Half the gaps are offset.lag.max, half double that (one intervening sync dropped): at most 2 expire.
    rng = random.Random(0)
    offset_lag_max = 100
    steps = [(2 if rng.random() < 0.5 else 1) * offset_lag_max for _ in range(10000)]
    assert_sync_spacing_has_bounded_expirations(0, steps, 2)


# --- kmirror additions ---------------------------------------------------------------------------------------


def test_initial_read_keeps_history_when_not_required_to_read_to_end() -> None:
    # MM2 start(false): checkpoints loaded, so the initial read builds the full sparse history.
    store = OffsetSyncStore(initialization_must_read_to_end=False)
    for offset in range(0, 1001, 10):
        sync(store, offset, offset)
        assert_sparse_sync_invariant(store)
    assert store.translate_downstream(TP, 500) is None  # still not read to end
    store.mark_read_to_end()
    assert store.translate_downstream(TP, 0) == 0  # Invariant D: the very first sync is kept
    assert store.translate_downstream(TP, 1000) == 1000
    assert store.translate_downstream(TP, 995) == 991  # 990 is still stored
    # With the default (must read to end), the same read leaves only the last sync.
    strict = OffsetSyncStore()
    for offset in range(0, 1001, 10):
        sync(strict, offset, offset)
    strict.mark_read_to_end()
    assert strict.translate_downstream(TP, 995) is None
    assert distinct_stored_syncs(strict) == 1


def test_partitions_are_independent() -> None:
    store = started_store()
    other = TopicPartition("topic1", 3)
    sync(store, 10, 20)
    sync(store, 5, 7, other)  # would be an upstream rewind if partitions were mixed
    assert store.translate_downstream(TP, 10) == 20
    assert store.translate_downstream(other, 6) == 8
    assert store.translate_downstream(TopicPartition("topic2", 2), 10) is None
    assert store.topic_partitions() == {TP, other}


def test_repeated_sync_is_not_a_rewind() -> None:
    # A restarted source task re-sends the sync for the record it resumes at: equal upstream, no rewind.
    store = started_store()
    sync(store, 0, 0)
    sync(store, 8, 8)
    sync(store, 8, 8)
    assert distinct_stored_syncs(store) == 3  # two equal records are two slots, like two Java objects
    assert store.translate_downstream(TP, 8) == 8
    assert store.translate_downstream(TP, 3) == 1
    assert store.translate_downstream(TP, 0) == 0
    assert_sparse_sync_invariant(store)


def test_huge_offsets_do_not_break_the_invariants() -> None:
    # Java long overflow makes bounds negative; the port must wrap the same way and keep working.
    store = started_store()
    base = LONG_MAX - 1000
    for offset in range(base, LONG_MAX - 1, 7):
        sync(store, offset, offset - base)
        assert_sparse_sync_invariant(store)
    assert store.translate_downstream(TP, base) == 0
    assert store.translate_downstream(TP, LONG_MAX) is not None


def test_translation_overflowing_long_is_not_an_answer() -> None:
    # MM2 would compute Long.MAX_VALUE + 1 (negative) and MirrorCheckpointTask drops offsets < 0.
    store = started_store()
    sync(store, 5, LONG_MAX)
    assert store.translate_downstream(TP, 5) == LONG_MAX
    assert store.translate_downstream(TP, 6) is None


# --- properties against a brute-force reference --------------------------------------------------------------


def reference_translate(history: list[tuple[int, int]], group_offset: int) -> int | None:
    """The rule over the whole usable history: latest sync with upstream <= G; equal -> d, else d + 1."""
    index = bisect_right(history, group_offset, key=lambda pair: pair[0]) - 1
    if index < 0:
        return None
    upstream, downstream = history[index]
    return downstream if upstream == group_offset else downstream + 1


@st.composite
def replications(draw: st.DrawFn) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """A replicated partition: records (upstream, downstream), strictly increasing on both sides with gaps
    (compaction/aborted records upstream, foreign writes downstream), and the subset of them that got a
    sync, in order."""
    upstream_steps = draw(st.lists(st.sampled_from([1, 1, 1, 1, 2, 7, 1000]), min_size=1, max_size=200))
    count = len(upstream_steps)
    downstream_steps = draw(st.lists(st.sampled_from([1, 1, 1, 1, 1, 3]), min_size=count, max_size=count))
    upstream = draw(st.integers(0, 1000))
    downstream = draw(st.integers(0, 1000))
    records = []
    for up_step, down_step in zip(upstream_steps, downstream_steps, strict=True):
        records.append((upstream, downstream))
        upstream += up_step
        downstream += down_step
    chosen = draw(st.lists(st.booleans(), min_size=count, max_size=count))
    syncs = [r for r, keep in zip(records, chosen, strict=True) if keep] or [records[-1]]
    return records, syncs


def true_position(records: list[tuple[int, int]], group_offset: int) -> int:
    """Where a group at G must resume downstream so it neither skips nor re-reads a copied record."""
    index = bisect_left(records, group_offset, key=lambda pair: pair[0])
    return records[index][1] if index < len(records) else records[-1][1] + 1


def queries(records: list[tuple[int, int]]) -> Iterator[int]:
    first, last = records[0][0], records[-1][0]
    yield from range(max(first - 2, 0), min(last + 3, first + 400))
    yield from (u + d for u, _ in records[-20:] for d in (-1, 0, 1))
    yield last + 1000


@settings(max_examples=150, deadline=None)
@given(replications())
def test_translation_is_safe_monotonic_and_bounded_by_reference(
    replication: tuple[list[tuple[int, int]], list[tuple[int, int]]],
) -> None:
    records, syncs = replication
    store = started_store()
    for upstream, downstream in syncs:
        sync(store, upstream, downstream)
    latest = syncs[-1][0]
    previous: int | None = None
    for group_offset in sorted(set(queries(records))):
        got = store.translate_downstream(TP, group_offset)
        expected = reference_translate(syncs, group_offset)
        # Invariant D: the oldest sync is kept, so the store answers exactly when the reference does.
        assert (got is None) == (expected is None)
        if got is None or expected is None:
            continue
        # Never ahead of where the group really is: no record is skipped.
        assert got <= true_position(records, group_offset)
        # Never better than the full history allows; exact at and after the newest sync.
        assert got <= expected
        if group_offset >= latest:
            assert got == expected
        # For a fixed store, translation is monotonic in the group offset.
        if previous is not None:
            assert got >= previous
        previous = got


@settings(max_examples=100, deadline=None)
@given(replications())
def test_matches_reference_when_history_fits(
    replication: tuple[list[tuple[int, int]], list[tuple[int, int]]],
) -> None:
    # Two syncs are never evicted (invariant D keeps the oldest, A the newest): exact for every query.
    records, syncs = replication
    store = started_store()
    for upstream, downstream in syncs[-2:]:
        sync(store, upstream, downstream)
    for group_offset in queries(records):
        assert store.translate_downstream(TP, group_offset) == reference_translate(syncs[-2:], group_offset)


@settings(max_examples=100, deadline=None)
@given(replications(), st.integers(0, 10_000))
def test_every_stored_sync_translates_exactly(
    replication: tuple[list[tuple[int, int]], list[tuple[int, int]]], rewind_to: int
) -> None:
    _, syncs = replication
    store = started_store()
    for upstream, downstream in syncs:
        sync(store, upstream, downstream)
    assert_sparse_sync_invariant(store)
    for slot in store.syncs_for(TP):
        assert store.translate_downstream(TP, slot.upstream_offset) == slot.downstream_offset
    # An upstream rewind forgets everything before it.
    if rewind_to < syncs[-1][0]:
        sync(store, rewind_to, 5)
        assert distinct_stored_syncs(store) == 1
        assert store.translate_downstream(TP, rewind_to - 1) is None
        assert store.translate_downstream(TP, syncs[-1][0]) == 6
