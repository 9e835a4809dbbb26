"""The comparison of `kmirror verify` (`reconciler.verify.compare`): hand-built logs on both sides.

A log is what a read_committed consumer returns: records with offsets, gaps where compaction removed records or
transaction markers sit. A clean copy is the source's records in order at the target's own offsets; each fault is
made by hand and must be reported at exactly its source offset.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.offsets.exact import Record, same_record
from reconciler.verify.compare import (
    IN_FLIGHT,
    PartitionTally,
    Walk,
    Walker,
    differing_field,
    digest,
    plan_partition,
    sampled,
)
from reconciler.verify.report import PartitionRange, VerifyReport

pytestmark = pytest.mark.unit


def rec(
    offset: int, n: int, *, value: bytes | None = None, headers: tuple[tuple[str, bytes | None], ...] = ()
) -> Record:
    """Source record number `n` (its content depends on n only) at `offset`."""
    v = f"value-{n}".encode() if value is None else value
    return Record(offset, f"key-{n}".encode(), v, headers, 1_700_000_000_000 + n)


def at(r: Record, offset: int, **changes: object) -> Record:
    """`r` as copied to `offset` (with `changes`)."""
    fields = {
        "offset": offset,
        "key": r.key,
        "value": r.value,
        "headers": r.headers,
        "timestamp": r.timestamp,
        "create_time": r.create_time,
    }
    fields.update(changes)
    return Record(**fields)  # type: ignore[arg-type]


def source(n: int, start: int = 0) -> list[Record]:
    return [rec(start + i, i) for i in range(n)]


def copy(records: Sequence[Record], start: int = 0) -> list[Record]:
    return [at(r, start + i) for i, r in enumerate(records)]


def walk(
    src: Sequence[Record],
    tgt: Sequence[Record],
    *,
    checked_from: int | None = None,
    proven: int | None = None,
    **options: object,
) -> PartitionTally:
    s0 = src[0].offset if src else 0
    t0 = tgt[0].offset if tgt else 0
    w = Walk(
        s0,
        (src[-1].offset + 1) if src else 0,
        t0,
        (tgt[-1].offset + 1) if tgt else 0,
        s0 if checked_from is None else checked_from,
    )
    tally = PartitionTally("orders", 0, "orders")
    last = src[-1].offset if src else -1
    later: Sequence[Record] | None = options.pop("later", ())  # type: ignore[assignment]
    walker = Walker(tally, w, proven_up_to=last if proven is None else proven, **options)  # type: ignore[arg-type]
    return walker.run(src, tgt, later)


def bad(t: PartitionTally) -> dict[str, int]:
    names = ("missing", "duplicated", "reordered", "different", "unexpected", "unverifiable")
    return {n: getattr(t, n) for n in names if getattr(t, n)}


# -- fields and digests -----------------------------------------------------------------------------------------


def test_a_copy_has_no_differing_field_and_agrees_with_the_exact_cutover_rule() -> None:
    s = rec(5, 5, headers=(("trace", b"t1"),))
    assert differing_field(s, at(s, 9)) is None
    assert same_record(s, at(s, 9))
    assert differing_field(s, at(s, 9, headers=(("trace", b"t1"), ("__kmirror.source", b"1,5,x")))) is None
    for name, change in [
        ("key", {"key": b"other"}),
        ("value", {"value": None}),
        ("headers", {"headers": (("trace", b"t2"),)}),
        ("timestamp", {"timestamp": 1}),
    ]:
        t = at(s, 9, **change)
        assert differing_field(s, t) == name
        assert not same_record(s, t)


def test_timestamps_are_not_compared_when_the_target_stamps_its_own() -> None:
    s = rec(0, 0)
    assert differing_field(s, at(s, 0, timestamp=42, create_time=False), timestamps=False) is None
    t = walk(source(3), [at(r, i, timestamp=7, create_time=False) for i, r in enumerate(source(3))])
    assert t.ok and t.checked == 3


def test_digests_are_stable_short_and_never_the_content() -> None:
    assert digest(b"secret-value") == digest(b"secret-value")
    assert digest(b"secret-value") != digest(b"secret-valuf")
    assert digest(None) != digest(b"")
    assert len(digest(b"x" * 10_000)) == 16
    assert "secret" not in digest(b"secret-value")
    # keyed per run: not the plain hash a table of likely values (true/false, country codes) would look up
    assert digest(b"true") != hashlib.sha256(b"\x01" + (4).to_bytes(8, "big") + b"true").hexdigest()[:16]


# -- the walk ---------------------------------------------------------------------------------------------------


def test_a_clean_copy_matches_with_gaps_on_either_side() -> None:
    src = [rec(o, i) for i, o in enumerate([0, 1, 4, 5, 9, 10, 11])]  # compaction gaps on the source
    tgt = [at(r, o) for r, o in zip(src, [0, 2, 3, 5, 6, 8, 9], strict=True)]  # markers on the target
    t = walk(src, tgt)
    assert t.ok and t.checked == 7 and bad(t) == {} and t.first_bad_source_offsets == []


def test_a_record_missing_in_the_middle_is_reported_at_its_source_offset() -> None:
    src = source(50)
    tgt = copy(src[:20] + src[21:])
    t = walk(src, tgt)
    assert bad(t) == {"missing": 1}
    assert t.first_bad_source_offsets == [20]
    assert t.checked == 50 and not t.ok


def test_a_record_written_twice_is_duplicated_at_its_source_offset() -> None:
    src = source(30)
    tgt = copy([*src[:13], src[12], *src[13:]])
    t = walk(src, tgt)
    assert bad(t) == {"duplicated": 1}
    assert t.first_bad_source_offsets == [12]
    assert t.first_bad_target_offsets == [13]


def test_an_at_least_once_retry_duplicates_a_run() -> None:
    src = source(40)
    tgt = copy(src[:25] + src[20:])  # records 20..24 sent again after a failure
    t = walk(src, tgt)
    assert bad(t) == {"duplicated": 5}
    assert t.first_bad_source_offsets == [20, 21, 22, 23, 24]
    assert t.checked == 40


def test_a_copy_of_the_last_record_after_the_range_is_duplicated() -> None:
    src = source(10)
    t = walk(src, copy([*src, src[-1]]))
    assert bad(t) == {"duplicated": 1} and t.first_bad_source_offsets == [9]


def test_target_records_after_the_range_are_copies_of_later_records_or_unexpected() -> None:
    src = source(10)
    later = [rec(10, 10), rec(11, 11)]  # copied after the source end was read: not checked
    t = walk(src, copy(src + later), later=later)
    assert t.ok and t.checked == 10
    stranger = Record(0, b"x", b"y", (), 1)
    t = walk(src, copy([*src, stranger, *later]), later=later)
    assert bad(t) == {"unexpected": 1} and t.first_bad_target_offsets == [10]
    t = walk(src, copy([*src, stranger]), later=[])  # nothing after the range on the source
    assert bad(t) == {"unexpected": 1}
    t = walk(src, copy([*src, stranger]), later=None)  # unknown: the tail is not checked
    assert t.ok


def test_swapped_records_are_reordered() -> None:
    src = source(20)
    order = [*src[:7], src[8], src[7], *src[9:]]
    t = walk(src, copy(order))
    assert bad(t) == {"reordered": 1}  # one of the two is out of place relative to the rest
    assert t.first_bad_source_offsets in ([7], [8])
    moved = [*src[:5], *src[6:15], src[5], *src[15:]]
    t = walk(src, copy(moved))
    assert bad(t) == {"reordered": 1} and t.first_bad_source_offsets == [5]


def test_an_altered_record_is_different_with_the_field_and_digests_only() -> None:
    src = source(20)
    tgt = copy(src)
    tgt[11] = at(src[11], 11, value=b"tampered")
    t = walk(src, tgt)
    assert bad(t) == {"different": 1}
    assert t.first_bad_source_offsets == [11]
    (d,) = t.differences
    assert (d.source_offset, d.target_offset, d.field) == (11, 11, "value")
    assert d.source_digest == digest(src[11].value) and d.target_digest == digest(b"tampered")
    assert "tampered" not in json.dumps(d.to_json()) and "value-11" not in json.dumps(d.to_json())


@pytest.mark.parametrize(
    ("change", "field"),
    [({"key": b"k"}, "key"), ({"headers": (("h", b"1"),)}, "headers"), ({"timestamp": 5}, "timestamp")],
)
def test_the_differing_field_is_named(change: dict[str, object], field: str) -> None:
    src = source(8)
    tgt = copy(src)
    tgt[3] = at(src[3], 3, **change)
    t = walk(src, tgt)
    assert bad(t) == {"different": 1} and t.differences[0].field == field


def test_a_record_on_the_target_that_no_source_record_explains_is_unexpected() -> None:
    src = source(20)
    stranger = Record(0, b"x", b"y", (), 1)
    tgt = copy([*src[:6], stranger, *src[6:]])
    t = walk(src, tgt)
    assert bad(t) == {"unexpected": 1}
    assert t.first_bad_target_offsets == [6] and t.first_bad_source_offsets == []


def test_records_past_the_newest_sync_not_on_the_target_yet_are_in_flight() -> None:
    src = source(30)
    t = walk(src, copy(src[:22]), proven=19)
    assert bad(t) == {"unverifiable": 8}
    assert t.reasons[IN_FLIGHT] == 8
    assert t.ok and t.checked == 22


def test_records_the_syncs_prove_copied_but_absent_at_the_end_are_missing() -> None:
    src = source(30)
    t = walk(src, copy(src[:22]), proven=25)
    assert bad(t) == {"missing": 4, "unverifiable": 4}
    assert t.first_bad_source_offsets == [22, 23, 24, 25]


def test_compaction_on_the_target_is_unverifiable_not_missing() -> None:
    src = source(20)
    tgt = copy([*src[:5], *src[6:9], *src[10:]])
    t = walk(src, tgt, target_compacted=True)
    assert bad(t) == {"unverifiable": 2} and t.ok
    survivors = [src[i] for i in (3, 7, 8, 11, 15, 19)]  # lone survivors between compacted records
    t = walk(src, [at(r, o) for r, o in zip(survivors, (3, 7, 8, 11, 15, 19), strict=True)], target_compacted=True)
    assert bad(t) == {"unverifiable": 14} and t.checked == 6 and t.ok


def test_records_before_the_checked_start_are_read_for_alignment_only() -> None:
    src = source(30)
    tgt = copy(src)
    tgt[3] = at(src[3], 3, value=b"x")  # before the checked range
    tgt[12] = at(src[12], 12, value=b"x")
    t = walk(src, tgt, checked_from=10)
    assert t.checked == 20 and bad(t) == {"different": 1} and t.first_bad_source_offsets == [12]


def test_a_target_that_diverges_for_longer_than_the_window_is_taken_place_for_place() -> None:
    src = source(60)
    tgt = copy(src[:10] + [Record(0, b"x", str(i).encode(), (), 1) for i in range(30)] + src[40:])
    t = walk(src, tgt, window=8)
    assert t.different == 30 and t.missing == 0 and t.checked == 60


def test_a_truncated_target_start_is_missing_until_the_copies_resume() -> None:
    src = source(30)
    tgt = copy(src)[7:]  # DeleteRecords up to target offset 7
    w = Walk(0, 30, 7, 30, 0, "missing", "deleted on the target (below its log start offset 7)")
    t = Walker(PartitionTally("orders", 0), w, proven_up_to=29).run(src, tgt)
    assert bad(t) == {"missing": 7} and t.first_bad_source_offsets == [0, 1, 2, 3, 4, 5, 6]
    assert "deleted on the target" in next(iter(t.reasons))


FAULTS = ("missing", "duplicated", "different", "unexpected", "moved later", "moved earlier")


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(min_value=3, max_value=120),
    gaps=st.lists(st.integers(min_value=0, max_value=3), min_size=120, max_size=120),
    fault=st.sampled_from(FAULTS),
    where=st.floats(min_value=0, max_value=0.999),
    distance=st.integers(min_value=2, max_value=40),
)
def test_one_fault_anywhere_is_reported_exactly_there(
    n: int, gaps: list[int], fault: str, where: float, distance: int
) -> None:
    offsets, o = [], 0
    for g in gaps[:n]:
        offsets.append(o)
        o += 1 + g
    src = [rec(off, i) for i, off in enumerate(offsets)]
    k = int(where * n)
    copies = list(src)
    if fault == "missing":
        if k == n - 1:  # at the very end a missing record is indistinguishable from one in flight unless proven
            k = n - 2
        del copies[k]
    elif fault == "duplicated":
        copies.insert(k + 1, src[k])
    elif fault == "different":
        copies[k] = at(src[k], 0, value=b"changed")
    elif fault == "moved later":
        k = min(k, n - 3)  # moved at least two places, and not past the end
        d = min(distance, n - 1 - k)
        copies.insert(k + d, copies.pop(k))
    elif fault == "moved earlier":
        k = max(k, 2)
        d = min(distance, k)
        copies.insert(k - d, copies.pop(k))
    else:
        copies.insert(k + 1, Record(0, b"stranger", b"s", (), 1))
    tgt = [at(r, 3 * i) for i, r in enumerate(copies)]  # target offsets with gaps of their own
    t = walk(src, tgt)
    assert bad(t) == {"reordered" if fault.startswith("moved") else fault: 1}
    if fault == "unexpected":
        assert t.first_bad_source_offsets == []
    else:
        assert t.first_bad_source_offsets == [src[k].offset]
    assert t.checked == n


# -- planning ---------------------------------------------------------------------------------------------------


def plan(**kw: object) -> object:
    args: dict[str, object] = {"range_start": 0, "range_end": 100, "target_start": 0, "target_end": 100}
    args.update(kw)
    return plan_partition("orders", 0, "orders", **args)  # type: ignore[arg-type]


def test_without_syncs_the_whole_range_is_unverifiable() -> None:
    p = plan(syncs=[])
    assert p.walks == () and [(u.start, u.end, u.classification) for u in p.uncovered] == [(0, 100, "unverifiable")]  # type: ignore[attr-defined]


def test_a_range_starts_at_the_sync_at_or_before_it() -> None:
    p = plan(range_start=35, syncs=[(0, 0), (30, 32), (40, 43)])
    (w,) = p.walks  # type: ignore[attr-defined]
    assert (w.source_start, w.target_start, w.checked_from, w.source_end, w.target_end) == (30, 32, 35, 100, 100)
    assert p.proven_up_to == 40  # type: ignore[attr-defined]


def test_before_the_oldest_sync_the_target_is_read_from_its_log_start() -> None:
    p = plan(syncs=[(20, 25), (40, 45)], target_start=3)
    assert p.uncovered == ()  # type: ignore[attr-defined]
    lead, main = p.walks  # type: ignore[attr-defined]
    assert (lead.source_start, lead.source_end, lead.target_start, lead.target_end, lead.lead) == (
        0,
        20,
        3,
        25,
        "unverifiable",
    )
    assert (main.source_start, main.target_start, main.lead) == (20, 25, None)


def test_before_an_oldest_sync_already_below_the_target_log_start_is_unverifiable() -> None:
    p = plan(syncs=[(20, 25), (40, 45)], target_start=30)
    assert [(u.start, u.end, u.classification) for u in p.uncovered] == [(0, 20, "unverifiable")]  # type: ignore[attr-defined]
    assert p.walks[0].source_start == 20 and p.walks[0].lead == "missing"  # type: ignore[attr-defined]


def test_a_lead_walk_finds_the_targets_first_record_however_far_and_checks_from_there() -> None:
    src = source(5000)
    tgt = copy(src[3100:])  # the flow started late, or the target's older records are gone
    tgt[400] = at(src[3500], 400, value=b"x")
    w = Walk(0, 5000, 0, len(tgt), 0, "unverifiable", "before the oldest offset-sync")
    t = Walker(PartitionTally("orders", 0), w, proven_up_to=4999, window=500).run(src, tgt)
    assert t.unverifiable == 3100 and t.reasons["before the oldest offset-sync"] == 3100
    assert bad(t) == {"unverifiable": 3100, "different": 1} and t.first_bad_source_offsets == [3500]
    assert t.checked == 1900


def test_syncs_past_the_target_end_prove_nothing() -> None:
    p = plan(syncs=[(0, 0), (50, 50), (90, 120)], target_end=100)
    assert p.proven_up_to == 50  # type: ignore[attr-defined]


def test_records_copied_below_the_target_log_start_are_missing() -> None:
    p = plan(syncs=[(0, 0), (10, 10), (20, 20), (30, 30)], target_start=25)
    assert [(u.start, u.end, u.classification) for u in p.uncovered] == [(0, 20, "missing")]  # type: ignore[attr-defined]
    (w,) = p.walks  # type: ignore[attr-defined]
    assert (w.source_start, w.target_start, w.lead) == (20, 25, "missing")


def test_sampling_reads_the_same_segments_every_time_and_about_the_fraction() -> None:
    syncs = [(u, u) for u in range(0, 10_000, 10)]
    a = plan(range_end=10_000, target_end=10_000, syncs=syncs, sample=0.2)
    b = plan(range_end=10_000, target_end=10_000, syncs=syncs, sample=0.2)
    assert a == b
    walks = a.walks  # type: ignore[attr-defined]
    assert 150 < len(walks) < 250
    for w in walks:
        assert w.source_end - w.source_start == 10 and w.target_start == w.source_start
        assert sampled("orders", 0, w.source_start, 0.2)
    assert len(plan(range_end=10_000, target_end=10_000, syncs=syncs, sample=1.0).walks) == 1  # type: ignore[attr-defined]


# -- the report -------------------------------------------------------------------------------------------------


def test_report_json_shape_and_exit_codes() -> None:
    ok = PartitionTally("orders", 0, "orders", checked=10)
    partial = PartitionTally("orders", 1, "orders", checked=5)
    partial.add_unverifiable(IN_FLIGHT, 3)
    r = VerifyReport("f", "a", "b", "everything on the source", partitions=[(ok, PartitionRange(0, 10, 10))])
    assert r.exit_code() == 0 and r.exit_code(detailed=True) == 0
    r.partitions.append((partial, PartitionRange(0, 8, 5)))
    assert r.ok and r.exit_code() == 0 and r.exit_code(detailed=True) == 2
    doc = r.to_json()
    assert set(doc) >= {"ok", "flow", "partitions", "summary"}
    entry = doc["partitions"][1]
    for key in ("topic", "partition", "ok", "checked", "missing", "duplicated", "reordered", "different"):
        assert key in entry
    assert entry["unverifiable"] == 3 and entry["first_bad_source_offsets"] == []
    assert doc["summary"]["checked"] == 15 and doc["summary"]["complete"] is False
    broken = PartitionTally("orders", 2, "orders")
    broken.add_missing(7)
    r.partitions.append((broken, None))
    assert not r.ok and r.exit_code() == 1 and r.exit_code(detailed=True) == 1
    assert r.to_json()["partitions"][2]["first_bad_source_offsets"] == [7]
    assert "MISMATCH: 1 missing" in r.to_text() and "| `orders/2` | **no** |" in r.to_markdown()
