"""Exact cutover translation (`reconciler.core.offsets.exact`): hand-built logs, then a property against an ideal.

A "log" here is what a read_committed consumer returns: records with their offsets, gaps where compaction
removed records or transaction markers and aborted records sit. The job copies the committed records in order;
the target's offsets may have gaps of their own (its transaction markers in exactly-once mode).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.mm2.wire import OffsetSync, TopicPartition
from reconciler.core.offsets.exact import (
    ExactRequest,
    ExactTranslation,
    ExactTranslator,
    Record,
    conservative,
    exact_requests,
    match_exact,
    same_record,
)
from reconciler.core.offsets.history import SyncHistory

pytestmark = pytest.mark.unit

T, P = "orders", 0


def rec(offset: int, n: int, *, headers: tuple[tuple[str, bytes | None], ...] = (), ts: int | None = None) -> Record:
    return Record(offset, f"k{n}".encode(), f"v{n}".encode(), headers, 1000 + n if ts is None else ts)


def log(offsets: Sequence[int], first: int = 0) -> list[Record]:
    """Records numbered first, first + 1, ... at the given offsets."""
    return [rec(o, first + i) for i, o in enumerate(offsets)]


def copy(records: Sequence[Record], offsets: Sequence[int]) -> list[Record]:
    """The same records at other offsets (as the job writes them to the target)."""
    return [Record(o, r.key, r.value, r.headers, r.timestamp) for r, o in zip(records, offsets, strict=True)]


def answer(
    source: Sequence[Record], target: Sequence[Record], sync: tuple[int, int] | None, g: int, limit: int = 1000
) -> ExactTranslation:
    """What the adapter hands `match_exact`: the source from U to the first record >= G, the target from D."""
    s = None if sync is None else OffsetSync(T, P, *sync)
    request = ExactRequest(T, P, g, s)
    if s is None:
        return match_exact(request, (), None, ())
    run = [r for r in source if r.offset >= s.upstream_offset]
    before = [r for r in run if r.offset < g][: limit + 1]
    after = next((r for r in run if r.offset >= g), None)
    complete = len(before) <= limit
    copies = [r for r in target if r.offset >= s.downstream_offset][: len(before) + 1]
    return match_exact(request, before[:limit], after if complete else None, copies, complete=complete)


def test_plain_topic_mid_partition_is_exact_where_mm2_re_reads() -> None:
    source = log(range(300))
    target = copy(source, range(300))
    got = answer(source, target, (200, 200), 250)
    assert got.is_exact and got.exact == 250 and got.conservative == 201
    assert got.rereads_avoided == 49 and got.offset == 250


def test_sync_at_the_committed_offset_is_exact_and_equal_to_mm2() -> None:
    source = log(range(10))
    got = answer(source, copy(source, range(5, 15)), (4, 9), 4)
    assert (got.exact, got.conservative) == (9, 9) and "at the committed offset" in got.reason


def test_group_at_the_end_lands_at_the_target_end() -> None:
    source = log(range(10))
    got = answer(source, copy(source, range(10)), (7, 7), 10)
    assert (got.exact, got.conservative) == (10, 8)


def test_compaction_gaps_on_the_source_are_counted_as_records_not_offsets() -> None:
    # even offsets compacted away on the source; the target holds the survivors contiguously
    offsets = list(range(1, 60, 2)) + list(range(60, 80))
    source = log(offsets)
    target = copy(source, range(len(source)))
    # a group committed at 42, a compacted-away offset: the next record is 43, the 22nd survivor (index 21)
    got = answer(source, target, (31, 15), 42)
    assert got.exact == 21 and got.conservative == 16
    assert target[21].value == next(r for r in source if r.offset >= 42).value


def test_transaction_markers_and_aborted_records_on_both_sides() -> None:
    # source: committed transactions of 5 records with a marker after each (and an aborted run of 5 + marker)
    offsets = [*range(0, 5), *range(6, 11), *range(18, 23), *range(24, 29)]
    source = log(offsets)
    # target written in transactions of its own (exactly-once): a marker after every 3 records
    t_offsets = [i + i // 3 for i in range(len(source))]
    target = copy(source, t_offsets)
    got = answer(source, target, (6, t_offsets[5]), 11)  # committed on the marker of round 1
    assert got.is_exact and got.exact == t_offsets[9] + 1
    got = answer(source, target, (6, t_offsets[5]), 20)  # inside a transaction, after an aborted one
    assert got.exact == t_offsets[11] + 1 and got.conservative == t_offsets[5] + 1


def test_a_record_written_twice_on_the_target_falls_back_to_mm2() -> None:
    source = log(range(20))
    # an at-least-once retry wrote records 12..14 again after 14
    dup = [*source[:15], *source[12:15], *source[15:]]
    target = copy(dup, range(len(dup)))
    got = answer(source, target, (10, 10), 15)  # the range [10, 15) matches; the next record is a duplicate
    assert not got.is_exact and got.offset == 11 and "written twice" in got.reason
    got = answer(source, target, (10, 10), 17)
    assert not got.is_exact and got.offset == 11 and "not the copy" in got.reason


def test_duplicates_at_the_end_of_the_target_fall_back() -> None:
    source = log(range(10))
    target = copy([*source, source[-1]], range(11))
    got = answer(source, target, (5, 5), 10)
    assert not got.is_exact and got.offset == 6 and "the source does not" in got.reason


def test_compaction_on_the_target_falls_back() -> None:
    source = log(range(10))
    target = [r for r in copy(source, range(10)) if r.offset != 7]
    got = answer(source, target, (5, 5), 9)
    assert not got.is_exact and got.offset == 6
    gone = answer(source, [r for r in copy(source, range(10)) if r.offset != 5], (5, 5), 9)
    assert not gone.is_exact and "target record 5 is gone" in gone.reason


def test_the_sync_record_compacted_on_the_source_falls_back() -> None:
    source = [r for r in log(range(10)) if r.offset != 5]
    got = answer(source, copy(log(range(10)), range(10)), (5, 5), 8)
    assert not got.is_exact and got.offset == 6 and "source record 5 is gone" in got.reason


def test_not_copied_yet_falls_back() -> None:
    source = log(range(20))
    got = answer(source, copy(source[:12], range(12)), (10, 10), 15)
    assert not got.is_exact and got.offset == 11 and "not copied yet" in got.reason
    got = answer(source, copy(source[:15], range(15)), (10, 10), 15)
    assert not got.is_exact and "not on the target yet" in got.reason


def test_no_sync_or_too_far_from_it() -> None:
    source = log(range(500))
    none = answer(source, copy(source, range(500)), None, 5)
    assert none.offset is None and not none.is_exact and "no offset-sync" in none.reason
    far = answer(source, copy(source, range(500)), (0, 0), 400, limit=200)
    assert not far.is_exact and far.offset == 1 and "more than" in far.reason


def test_differences_that_matter_and_those_that_do_not() -> None:
    a = rec(0, 1, headers=(("trace", b"x"),))
    assert same_record(a, Record(7, a.key, a.value, (*a.headers, ("__kmirror.source", b"1,0,t")), a.timestamp))
    assert not same_record(a, Record(7, a.key, a.value, (), a.timestamp))  # a user header lost
    assert not same_record(a, Record(7, a.key, b"other", a.headers, a.timestamp))
    assert not same_record(a, Record(7, a.key, a.value, a.headers, a.timestamp + 1))
    assert same_record(a, Record(7, a.key, a.value, a.headers, 99, create_time=False))  # LogAppendTime target
    assert not same_record(Record(0, None, None), Record(0, b"", None))  # a tombstone with no key is not b""


def test_exact_translator_answers_exact_offsets_and_defers_the_rest() -> None:
    history = SyncHistory()
    history.update(OffsetSync(T, P, 100, 100))
    history.update(OffsetSync(T, P, 150, 150))
    history.mark_read_to_end()
    assert history.sync_at_or_before(TopicPartition(T, P), 149) == OffsetSync(T, P, 100, 100)
    assert history.sync_at_or_before(TopicPartition(T, P), 99) is None
    requests = exact_requests([(T, P, 120), (T, P, 120), (T, P, 170), (T, 1, 5), (T, P, -1)], history)
    assert [(r.partition, r.group_offset, r.sync) for r in requests] == [
        (0, 120, OffsetSync(T, P, 100, 100)),
        (0, 170, OffsetSync(T, P, 150, 150)),
        (1, 5, None),
    ]
    exact = ExactTranslation(T, P, 120, 101, 120, "matched")
    fallen = ExactTranslation(T, P, 170, 151, None, "written twice")
    translator = ExactTranslator(history, [exact, fallen])
    assert translator.translate_downstream(TopicPartition(T, P), 120) == 120
    assert (
        translator.translate_downstream(TopicPartition(T, P), 170)
        == 151
        == conservative(OffsetSync(T, P, 150, 150), 170)
    )
    assert translator.translate_downstream(TopicPartition(T, P), 130) == 101  # not asked: MM2's rule
    assert translator.syncs_for(TopicPartition(T, P)) == history.syncs_for(TopicPartition(T, P))


@st.composite
def copied_logs(draw: st.DrawFn) -> tuple[list[Record], list[Record], tuple[int, int], int]:
    """A source log with gaps, its copy with gaps of its own, a sync on a copied record, a committed offset."""
    steps = draw(st.lists(st.integers(1, 4), min_size=1, max_size=60))
    offsets = [sum(steps[: i + 1]) for i in range(len(steps))]
    source = log(offsets)
    t_steps = draw(st.lists(st.integers(1, 3), min_size=len(source), max_size=len(source)))
    target = copy(source, [sum(t_steps[: i + 1]) for i in range(len(source))])
    i = draw(st.integers(0, len(source) - 1))
    g = draw(st.integers(source[i].offset, offsets[-1] + 3))
    return source, target, (source[i].offset, target[i].offset), g


@settings(max_examples=300, deadline=None)
@given(copied_logs())
def test_a_faithful_copy_always_translates_exactly_to_the_next_record(
    case: tuple[list[Record], list[Record], tuple[int, int], int],
) -> None:
    source, target, sync, g = case
    got = answer(source, target, sync, g)
    following = next((i for i, r in enumerate(source) if r.offset >= g), len(source))
    consumed_before = target[:following]
    # the exact offset: past the copy of the last record before G, at or before the copy of the next one
    assert got.is_exact, got.reason
    assert got.exact is not None and got.conservative is not None and got.exact >= got.conservative
    resumes = [r for r in target if r.offset >= got.exact]
    assert resumes == target[following:]
    assert all(r.offset < got.exact for r in consumed_before)


@settings(max_examples=300, deadline=None)
@given(copied_logs(), st.data())
def test_a_copy_with_a_record_written_twice_never_skips(
    case: tuple[list[Record], list[Record], tuple[int, int], int], data: st.DataObject
) -> None:
    source, target, sync, g = case
    j = data.draw(st.integers(0, len(target) - 1))
    # record j written again right after itself; the later copies shift by one
    twice = [*target[: j + 1], Record(target[j].offset + 1, target[j].key, target[j].value, (), target[j].timestamp)]
    twice += [Record(r.offset + 1, r.key, r.value, r.headers, r.timestamp) for r in target[j + 1 :]]
    d = sync[1] + (1 if target.index(next(r for r in target if r.offset == sync[1])) > j else 0)
    got = answer(source, twice, (sync[0], d), g)
    following = next((i for i, r in enumerate(source) if r.offset >= g), len(source))
    if got.offset is None:
        return
    read = [r for r in twice if r.offset >= got.offset]
    wanted = source[following:]
    # whatever the answer, the consumer reads every record from the next one on (none skipped)
    values = [r.value for r in read]
    assert all(w.value in values for w in wanted)
    if got.is_exact:  # exact: nothing the group consumed is read again, and it starts at the next record
        consumed = {r.value for r in source[:following]}
        assert not [r for r in read if r.value in consumed]
        assert not wanted or read[0].value == wanted[0].value
