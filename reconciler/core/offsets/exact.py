"""Exact offset translation at cutover: match the records after an offset-sync on both clusters.

What this is for: MM2's rule (`translation`) answers D + 1 for a group committed at G past the newest sync
(U, D) with U <= G, so a consumer that moves to the target re-reads up to `offset_lag_max` records per
partition. Once producers are stopped and the flow has copied everything (`kmirror cutover`'s step 1), the
records themselves say where G landed: the committed source records in [U, G) were copied, in order, to the
target from D on. `match_exact` checks that pairwise (key, value, headers without kmirror's own, and the
timestamp when the target keeps CreateTime) and then answers (offset of the copy of the last source record
before G) + 1, or D when G == U. It also checks that the record after them on the target is the copy of the
first source record at or after G (or that there is none on either side), so the answer re-reads nothing and
skips nothing. Compaction gaps and transaction markers on the source are accounted for because the caller
reads committed records (read_committed), never by offset arithmetic.

Anything that does not match (a record copied twice by an at-least-once retry, compaction on the target, the
sync's record gone, more records between the sync and G than the caller may read, a missing sync) keeps the
conservative answer for that partition, with the reason.

`ExactTranslator` wraps a `Translator` with the exact answers, so the planning of group offsets
(`reconciler.plan.group_offsets`) writes them unchanged.

Must not: import a Kafka or Spark client, or do any I/O. The adapter `reconciler.adapters.record_ranges`
reads the records and calls this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Protocol

from reconciler.core.mm2.wire import OffsetSync, TopicPartition
from reconciler.core.offsets.checkpoints import Translator

__all__ = [
    "KMIRROR_HEADER_PREFIX",
    "ExactRequest",
    "ExactTranslation",
    "ExactTranslator",
    "Record",
    "SyncLookup",
    "conservative",
    "exact_requests",
    "match_exact",
    "same_record",
    "still_copying",
    "unknown",
]

KMIRROR_HEADER_PREFIX = "__kmirror."
"""Headers kmirror itself may add on the record path (the job's `__kmirror.source`); not the user's data."""


class SyncLookup(Protocol):
    """What the exact translation needs from the offset-syncs (`history.SyncHistory` fits)."""

    def sync_at_or_before(self, topic_partition: TopicPartition, upstream_offset: int) -> OffsetSync | None: ...


@dataclass(frozen=True, slots=True)
class Record:
    """A record as a consumer read it; `create_time` says whether `timestamp` is the producer's (CreateTime)."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int = -1
    create_time: bool = True


def _user_headers(r: Record) -> tuple[tuple[str, bytes | None], ...]:
    return tuple(h for h in r.headers if not h[0].startswith(KMIRROR_HEADER_PREFIX))


def same_record(source: Record, target: Record) -> bool:
    """Whether `target` is a copy of `source`: key, value, headers (kmirror's own left out), timestamp.

    The timestamp is compared when the target record carries a CreateTime (the job copies the source's); a
    target topic with LogAppendTime stamps its own.
    """
    if source.key != target.key or source.value != target.value:
        return False
    if _user_headers(source) != _user_headers(target):
        return False
    return not target.create_time or source.timestamp == target.timestamp


def conservative(sync: OffsetSync, group_offset: int) -> int:
    """MM2's rule from one sync at or before the group's offset."""
    return sync.downstream_offset + (0 if sync.upstream_offset == group_offset else 1)


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """One committed source offset to translate exactly, with the sync at or before it (None: there is none)."""

    topic: str
    partition: int
    group_offset: int
    sync: OffsetSync | None


@dataclass(frozen=True, slots=True)
class ExactTranslation:
    """The answer for one (source partition, committed offset): exact, or conservative and why."""

    topic: str
    partition: int
    group_offset: int
    conservative: int | None
    exact: int | None
    reason: str
    #: The records could not be read (an error, a timeout, the plan's time budget spent): exactness is unknown,
    #: and the conservative offset is the answer.
    unknown: bool = False

    @property
    def is_exact(self) -> bool:
        return self.exact is not None

    @property
    def verdict(self) -> str:
        """`exact`, `conservative` (the records say so, `reason` why) or `unknown` (they could not be read)."""
        return "exact" if self.is_exact else "unknown" if self.unknown else "conservative"

    @property
    def offset(self) -> int | None:
        """What to write: the exact offset when there is one, else MM2's conservative one."""
        return self.exact if self.exact is not None else self.conservative

    @property
    def rereads_avoided(self) -> int:
        """Target offsets between the conservative and the exact answer (records a consumer no longer re-reads,
        plus any markers among them)."""
        if self.exact is None or self.conservative is None:
            return 0
        return self.exact - self.conservative

    def to_json(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "source_offset": self.group_offset,
            "conservative": self.conservative,
            "exact": self.exact,
            "translation": self.verdict,
            "reason": self.reason,
        }


def exact_requests(offsets: Iterable[tuple[str, int, int]], syncs: SyncLookup) -> list[ExactRequest]:
    """One request per distinct (source topic, partition, committed offset), with its sync; sorted."""
    out = []
    for topic, partition, g in sorted(set(offsets)):
        if g < 0:
            continue
        out.append(ExactRequest(topic, partition, g, syncs.sync_at_or_before(TopicPartition(topic, partition), g)))
    return out


def still_copying(request: ExactRequest, lag: int) -> ExactTranslation:
    """The conservative answer for a partition the flow has not copied to its end yet (`lag` records behind).

    Exact answers are given only once the flow has copied everything (producers stopped, lag 0: `kmirror
    cutover`'s step 1), so `kmirror plan` and `kmirror cutover` answer the same for the same records; the records
    are not read for such a partition.
    """
    g, sync = request.group_offset, request.sync
    return ExactTranslation(
        request.topic,
        request.partition,
        g,
        None if sync is None else conservative(sync, g),
        None,
        f"the flow is still copying: {lag} record(s) of this partition on the source are not replicated yet "
        "(producers not stopped, or the job is behind)",
    )


def unknown(request: ExactRequest, why: str) -> ExactTranslation:
    """The conservative answer for a partition whose records could not be read: exactness unknown, and why."""
    g, sync = request.group_offset, request.sync
    answer = None if sync is None else conservative(sync, g)
    return ExactTranslation(request.topic, request.partition, g, answer, None, why, unknown=True)


def match_exact(
    request: ExactRequest,
    before: Sequence[Record],
    after: Record | None,
    target: Sequence[Record],
    *,
    complete: bool = True,
) -> ExactTranslation:
    """The exact target offset of `request`, or its conservative one with the reason.

    `before`: the committed source records with U <= offset < G, in offset order; `after`: the first committed
    source record at or after G (None: the source has none, the group is at the end); `target`: the committed
    records of the target partition from D on, in offset order, len(before) + 1 of them or all there are.
    `complete` False: the caller stopped reading the source before G (its bound), so `before` is not all of it.
    """
    t, p, g, sync = request.topic, request.partition, request.group_offset, request.sync

    def fallback(why: str) -> ExactTranslation:
        return ExactTranslation(t, p, g, None if sync is None else conservative(sync, g), None, why)

    if sync is None:
        return fallback("no offset-sync at or before the committed offset")
    u, d = sync.upstream_offset, sync.downstream_offset
    if not complete:
        return fallback(
            f"more than {len(before)} records between the offset-sync at {u} and {g} (beyond the compare bound)"
        )
    n = len(before)
    if any(not u <= r.offset < g for r in before) or any(a.offset >= b.offset for a, b in pairwise(before)):
        raise ValueError(f"{t}/{p}: source records outside [{u}, {g}) or out of order")
    if after is not None and after.offset < g:
        raise ValueError(f"{t}/{p}: the record after the range is at {after.offset} < {g}")
    first = before[0] if before else after
    if first is None or first.offset != u:
        return fallback(f"the offset-sync's source record {u} is gone (compacted or deleted on the source)")
    if not target or target[0].offset != d:
        return fallback(f"the offset-sync's target record {d} is gone (compacted or deleted on the target)")
    if len(target) < n:
        return fallback(f"the target holds {len(target)} of the {n} records after the offset-sync (not copied yet)")
    for s, r in zip(before, target[:n], strict=True):
        if not same_record(s, r):
            return fallback(
                f"target record {r.offset} is not the copy of source record {s.offset} "
                "(a record written twice, or compaction on the target)"
            )
    following = target[n] if len(target) > n else None
    if after is None and following is not None:
        return fallback(f"the target holds record {following.offset} that the source does not (a record written twice)")
    if after is not None and following is None:
        return fallback(f"source record {after.offset} is not on the target yet (not copied yet)")
    if after is not None and following is not None and not same_record(after, following):
        return fallback(
            f"target record {following.offset} is not the copy of source record {after.offset} "
            "(a record written twice, or compaction on the target)"
        )
    exact = target[n - 1].offset + 1 if n else d
    how = "an offset-sync at the committed offset" if n == 0 else f"{n} record(s) matched from the offset-sync"
    return ExactTranslation(t, p, g, conservative(sync, g), exact, how)


class ExactTranslator:
    """A `Translator` that answers the exact offsets found and defers to `base` (MM2's rule) for the rest."""

    def __init__(self, base: Translator, translations: Iterable[ExactTranslation]) -> None:
        self.base = base
        self.translations = {(x.topic, x.partition, x.group_offset): x for x in translations}

    def translate_downstream(self, topic_partition: TopicPartition, upstream_offset: int) -> int | None:
        found = self.translations.get((topic_partition[0], topic_partition[1], upstream_offset))
        if found is not None and found.exact is not None:
            return found.exact
        return self.base.translate_downstream(topic_partition, upstream_offset)

    def syncs_for(self, topic_partition: TopicPartition) -> tuple[OffsetSync, ...]:
        return self.base.syncs_for(topic_partition)

    def get(self, topic: str, partition: int, group_offset: int) -> ExactTranslation | None:
        return self.translations.get((topic, partition, group_offset))
