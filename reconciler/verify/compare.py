"""The record-by-record comparison of `kmirror verify`: which ranges to read, and what each record is.

What this is for: a flow copies every committed record of a source partition, in order, to its remote partition.
Its offset-syncs say exactly where some source records landed (a sync (U, D): the record at source offset U is at
target offset D). `plan_partition` turns a source range and the partition's syncs into walks: a source start and
a target start known to be aligned (a sync; where the syncs do not reach, the target's first record, searched
for in the source), the offset from which records count, and where each side ends (the source end and the
target's committed end as read when the verify started). `Walker` then reads both sides in
order and compares pairwise (`differing_field`: key, value, headers less kmirror's own, the timestamp when the
target keeps CreateTime, the same rule as `reconciler.core.offsets.exact.same_record`). When a pair differs it looks at
a window of both sides (`WINDOW` records) for where they agree again (a run of at least two matching records) and
classifies what lies between:

  - reordered: the source record's copy is in the window, but not at its place;
  - duplicated: a target record equal to a source record already matched (an at-least-once retry), reported at
    that source offset;
  - different: a source record and a target record at the same place that differ; the field that differs is
    reported with a digest of each side's content (`digest`), never the content;
  - missing: a source record with no copy where the target has records after it (or, at the target's end, a
    record the syncs prove was copied);
  - unexpected: a target record that is none of the above (no source record for it);
  - unverifiable: counted, not guessed: records past the newest offset-sync that the target does not hold yet (in
    flight), before the oldest sync and not on the target (never copied, or deleted there), or gone by compaction
    on a compacted side.

Sampling (`sample` < 1) is per segment between two consecutive syncs, chosen by a hash of (topic, partition,
first source offset): the same segments every run, and only those are read.

Must not: import a Kafka or Spark client, or do any I/O; hold more than a window of either side and a bounded history
(`HISTORY`) of matched source records in memory; ever put a record's key, value or header values in a result.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from itertools import islice
from typing import Literal

from reconciler.core.offsets.exact import KMIRROR_HEADER_PREFIX, Record

__all__ = [
    "FIELDS",
    "HISTORY",
    "MAX_LISTED",
    "WINDOW",
    "Difference",
    "PartitionPlan",
    "PartitionTally",
    "Uncovered",
    "Walk",
    "Walker",
    "differing_field",
    "digest",
    "plan_partition",
    "sampled",
    "tally_uncovered",
]

WINDOW = 2000
"""Records of each side looked at to find where they agree again after a difference (> 2 x offset_lag_max)."""

HISTORY = 10_000
"""Digests of the last matched source records kept to recognise a record written twice."""

MAX_LISTED = 10
"""Offsets and differences listed per partition (the counts are complete)."""

FIELDS = ("key", "value", "headers", "timestamp")

Field = Literal["key", "value", "headers", "timestamp"]


def _user_headers(r: Record) -> tuple[tuple[str, bytes | None], ...]:
    return tuple(h for h in r.headers if not h[0].startswith(KMIRROR_HEADER_PREFIX))


def _field(r: Record, name: str) -> object:
    if name == "key":
        return r.key
    if name == "value":
        return r.value
    if name == "headers":
        return _user_headers(r)
    return r.timestamp


def differing_field(source: Record, target: Record, *, timestamps: bool = True) -> Field | None:
    """The first of key, value, headers, timestamp in which `target` is not a copy of `source`; None: a copy.

    `timestamps` False: the target topic stamps its own times (LogAppendTime), so timestamps are not compared.
    """
    if source.key != target.key:
        return "key"
    if source.value != target.value:
        return "value"
    if _user_headers(source) != _user_headers(target):
        return "headers"
    if timestamps and source.timestamp != target.timestamp:
        return "timestamp"
    return None


def _encode(value: object) -> bytes:
    if value is None:
        return b"\x00"
    if isinstance(value, bytes):
        return b"\x01" + len(value).to_bytes(8, "big") + value
    if isinstance(value, int):
        return b"\x02" + value.to_bytes(8, "big", signed=True)
    if isinstance(value, tuple):
        return b"\x03" + len(value).to_bytes(8, "big") + b"".join(_encode(v) for v in value)
    if isinstance(value, str):
        return _encode(value.encode())
    raise TypeError(f"cannot encode {type(value).__name__}")


_DIGEST_KEY = secrets.token_bytes(16)
"""Keys the digests of one verify run: within a report equal content has equal digests, but a digest cannot be
looked up in a table of likely values (a flag, a country code), and says nothing outside the run."""


def digest(value: object) -> str:
    """A short digest of one field's content for the report: says "these differ", reveals nothing (keyed per run)."""
    return hmac.new(_DIGEST_KEY, _encode(value), hashlib.sha256).hexdigest()[:16]


def _fingerprint(r: Record, timestamps: bool) -> bytes:
    """A digest of what `differing_field` compares: equal for a record and its copy, and (all but) only then."""
    h = hashlib.blake2b(digest_size=16)
    for part in (r.key, r.value):
        h.update(b"\x00" if part is None else b"\x01" + len(part).to_bytes(8, "big") + part)
    for name, value in _user_headers(r):
        raw = name.encode()
        h.update(b"\x02" + len(raw).to_bytes(8, "big") + raw)
        h.update(b"\x00" if value is None else b"\x01" + len(value).to_bytes(8, "big") + value)
    h.update(b"\x03" + (r.timestamp.to_bytes(8, "big", signed=True) if timestamps else b""))
    return h.digest()


def sampled(topic: str, partition: int, offset: int, fraction: float) -> bool:
    """Whether the segment starting at `offset` is checked at `fraction`: a hash, the same on every run."""
    if fraction >= 1.0:
        return True
    h = hashlib.blake2b(f"{topic}\x00{partition}\x00{offset}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") < fraction * 2**64


# -- planning ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Walk:
    """One aligned read of both sides: source records in [source_start, source_end), counted from
    `checked_from`; target records in [target_start, target_end).

    `lead`: the walk's start is not aligned by a sync but by the target's first record, so the source records
    before the first one found on the target count as `lead` ("missing": they were copied below the target's
    log start, deleted there; "unverifiable": they come before the oldest offset-sync, so they may never have
    been copied), for `lead_reason`. Such a walk searches the source for the target's first record however far.
    """

    source_start: int
    source_end: int
    target_start: int
    target_end: int
    checked_from: int
    lead: Literal["missing", "unverifiable"] | None = None
    lead_reason: str = ""


@dataclass(frozen=True, slots=True)
class Uncovered:
    """Source records in [start, end) that no walk checks, with the class they count as and why."""

    start: int
    end: int
    classification: Literal["missing", "unverifiable"]
    reason: str


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    """What to read of one source partition and its remote partition. `proven_up_to`: the newest source offset
    whose copy the syncs place below the target's end (-1: none), so a record up to it absent on the target is
    missing, not in flight."""

    topic: str
    partition: int
    remote_topic: str
    range_start: int
    range_end: int
    walks: tuple[Walk, ...]
    uncovered: tuple[Uncovered, ...]
    proven_up_to: int


def plan_partition(
    topic: str,
    partition: int,
    remote_topic: str,
    *,
    range_start: int,
    range_end: int,
    syncs: Iterable[tuple[int, int]],
    target_start: int,
    target_end: int,
    sample: float = 1.0,
) -> PartitionPlan:
    """The walks and uncovered ranges for source offsets [range_start, range_end).

    `syncs`: the partition's offset-syncs as (upstream, downstream) pairs since its last rewind
    (`SyncHistory`); `target_start`/`target_end`: the remote partition's log start and committed end.
    """
    usable = sorted({(u, d) for u, d in syncs if d < target_end})
    proven = max((u for u, _ in usable), default=-1)

    def plan(walks: Sequence[Walk] = (), uncovered: Sequence[Uncovered] = ()) -> PartitionPlan:
        return PartitionPlan(
            topic, partition, remote_topic, range_start, range_end, tuple(walks), tuple(uncovered), proven
        )

    if range_start >= range_end:
        return plan()
    if not usable:
        why = "no offset-sync for this partition yet (has the flow copied it?)"
        return plan(uncovered=[Uncovered(range_start, range_end, "unverifiable", why)])
    uncovered: list[Uncovered] = []
    walks: list[Walk] = []
    start = range_start
    at_or_before = [s for s in usable if s[0] <= start]
    if at_or_before:
        anchor = at_or_before[-1]
    else:
        # Before the oldest sync (the offset-syncs topic is compacted: old syncs go): the target's records below
        # that sync's copy are copies of the source records before it, in order, from the target's log start on.
        anchor = usable[0]
        why = f"before the oldest offset-sync of the partition (source offset {anchor[0]}): not copied, or deleted"
        end = min(anchor[0], range_end)
        if anchor[1] < target_start:
            uncovered.append(Uncovered(start, end, "unverifiable", why))
        elif sampled(topic, partition, start, sample):
            walks.append(Walk(start, end, target_start, anchor[1], start, "unverifiable", why))
        start = anchor[0]
        if start >= range_end:
            return plan(walks, uncovered)
    lead: Literal["missing"] | None = None
    why = f"deleted on the target (below its log start offset {target_start})"
    if anchor[1] < target_start:
        # The newest sync whose copy is below the target's log start: every source record before it was copied
        # below that start, so it is gone from the target.
        lead = "missing"
        anchor = [s for s in usable if s[1] < target_start][-1]
        if anchor[0] > start:
            uncovered.append(Uncovered(start, min(anchor[0], range_end), "missing", why))
            start = anchor[0]
            if start >= range_end:
                return plan(walks, uncovered)
    first_target = target_start if lead else anchor[1]
    if sample >= 1.0:
        walks.append(Walk(anchor[0], range_end, first_target, target_end, start, lead, why if lead else ""))
        return plan(walks, uncovered)
    # Segments between consecutive syncs, from the anchor on; each read only when its hash selects it.
    bounds = [s for s in usable if s[0] > anchor[0] and s[0] < range_end]
    heads = [(anchor[0], first_target), *bounds]
    tails = [*bounds, (range_end, target_end)]
    for i, ((u, d), (u_next, d_next)) in enumerate(zip(heads, tails, strict=True)):
        checked_from = max(u, start)
        if sampled(topic, partition, checked_from, sample):
            first = i == 0 and lead is not None
            walks.append(Walk(u, u_next, d, d_next, checked_from, lead if first else None, why if first else ""))
    return plan(walks, uncovered)


# -- the tally of one partition ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Difference:
    """A target record at a source record's place that differs in `field` (digests only, never content)."""

    source_offset: int
    target_offset: int
    field: str
    source_digest: str
    target_digest: str

    def to_json(self) -> dict[str, object]:
        return {
            "source_offset": self.source_offset,
            "target_offset": self.target_offset,
            "field": self.field,
            "source_digest": self.source_digest,
            "target_digest": self.target_digest,
        }


@dataclass
class PartitionTally:
    """The counts of one source partition (and its remote partition) as the walks go."""

    topic: str
    partition: int
    remote_topic: str = ""
    checked: int = 0
    missing: int = 0
    duplicated: int = 0
    reordered: int = 0
    different: int = 0
    unexpected: int = 0
    unverifiable: int = 0
    first_bad_source_offsets: list[int] = field(default_factory=list)
    first_bad_target_offsets: list[int] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Every checked record matches (unverifiable records do not count against it)."""
        bad = self.missing + self.duplicated + self.reordered + self.different + self.unexpected
        return self.error is None and bad == 0

    def _bad_source(self, offset: int) -> None:
        if len(self.first_bad_source_offsets) < MAX_LISTED and offset not in self.first_bad_source_offsets:
            self.first_bad_source_offsets.append(offset)
            self.first_bad_source_offsets.sort()

    def _bad_target(self, offset: int) -> None:
        if len(self.first_bad_target_offsets) < MAX_LISTED and offset not in self.first_bad_target_offsets:
            self.first_bad_target_offsets.append(offset)
            self.first_bad_target_offsets.sort()

    def match(self) -> None:
        self.checked += 1

    def add_missing(self, source_offset: int, reason: str = "") -> None:
        self.checked += 1
        self.missing += 1
        self._bad_source(source_offset)
        if reason:
            self.reasons[f"missing: {reason}"] += 1

    def add_reordered(self, source_offset: int, target_offset: int) -> None:
        self.checked += 1
        self.reordered += 1
        self._bad_source(source_offset)
        self._bad_target(target_offset)

    def add_different(self, source: Record, target: Record, name: str) -> None:
        self.checked += 1
        self.different += 1
        self._bad_source(source.offset)
        self._bad_target(target.offset)
        if len(self.differences) < MAX_LISTED:
            self.differences.append(
                Difference(
                    source.offset, target.offset, name, digest(_field(source, name)), digest(_field(target, name))
                )
            )

    def add_duplicated(self, source_offset: int | None, target_offset: int) -> None:
        self.duplicated += 1
        if source_offset is not None:
            self._bad_source(source_offset)
        self._bad_target(target_offset)

    def add_unexpected(self, target_offset: int) -> None:
        self.unexpected += 1
        self._bad_target(target_offset)

    def add_unverifiable(self, reason: str, n: int = 1) -> None:
        self.unverifiable += n
        self.reasons[reason] += n


def tally_uncovered(tally: PartitionTally, uncovered: Uncovered, records: Iterable[Record]) -> None:
    """Count the committed source records of an uncovered range (`records`: those in [start, end))."""
    for r in records:
        if not uncovered.start <= r.offset < uncovered.end:
            continue
        if uncovered.classification == "missing":
            tally.add_missing(r.offset, uncovered.reason)
        else:
            tally.add_unverifiable(uncovered.reason)


# -- the walk ---------------------------------------------------------------------------------------------------


class _Side:
    __slots__ = ("buf", "done", "it")

    def __init__(self, records: Iterable[Record]) -> None:
        self.it: Iterator[Record] = iter(records)
        self.buf: deque[Record] = deque()
        self.done = False

    def fill(self, n: int) -> None:
        while len(self.buf) < n and not self.done:
            nxt = next(self.it, None)
            if nxt is None:
                self.done = True
            else:
                self.buf.append(nxt)


IN_FLIGHT = "in flight: past the newest offset-sync and not on the target yet"
COMPACTED_TARGET = "compaction on the target (a compacted topic)"
COMPACTED_SOURCE = "compaction on the source after the copy (a compacted topic)"


class Walker:
    """Walks one `Walk` of a partition: both sides in order, each source record classified into `tally`.

    `source` must yield the committed source records in [walk.source_start, walk.source_end), `target` those of
    the remote partition in [walk.target_start, walk.target_end), both in offset order (read_committed).
    `source_compacted`/`target_compacted`: the topic's cleanup.policy includes compact on that side, so a record
    gone there is unverifiable, not missing or unexpected.
    """

    def __init__(
        self,
        tally: PartitionTally,
        walk: Walk,
        *,
        proven_up_to: int,
        source_compacted: bool = False,
        target_compacted: bool = False,
        window: int = WINDOW,
        history: int = HISTORY,
    ) -> None:
        self.tally = tally
        self.walk = walk
        self.proven_up_to = proven_up_to
        self.source_compacted = source_compacted
        self.target_compacted = target_compacted
        self.window = max(2, window)
        self.history_size = history
        self.timestamps = True
        self._history: OrderedDict[bytes, int] = OrderedDict()
        # Matched source records not digested yet: digests are taken only when a difference needs the history,
        # so a clean copy compares by equality alone.
        self._pending: deque[Record] = deque(maxlen=history)
        self._resynced = False  # a pair matched since the walk started (a gap before it is a truncated start)
        self._skip_source: Counter[bytes] = Counter()  # moved records counted already, passed over when reached
        self._skip_target: Counter[bytes] = Counter()

    def _fp(self, r: Record) -> bytes:
        return _fingerprint(r, self.timestamps)

    def _counted(self, offset: int) -> bool:
        return offset >= self.walk.checked_from

    def _remember(self, s: Record) -> None:
        self._pending.append(s)

    def _digested(self) -> OrderedDict[bytes, int]:
        """The digests of the last `history` matched source records, to their source offsets."""
        h = self._history
        while self._pending:
            s = self._pending.popleft()
            f = self._fp(s)
            h[f] = s.offset
            h.move_to_end(f)
        while len(h) > self.history_size:
            h.popitem(last=False)
        return h

    def _same(self, s: Record, t: Record) -> bool:
        if s.key != t.key or s.value != t.value:
            return False
        if s.headers != t.headers and _user_headers(s) != _user_headers(t):
            return False
        return not self.timestamps or s.timestamp == t.timestamp

    def _matched(self, s: Record) -> None:
        self._resynced = True
        self._remember(s)
        if self._counted(s.offset):
            self.tally.match()

    def run(
        self, source: Iterable[Record], target: Iterable[Record], later: Iterable[Record] | None = None
    ) -> PartitionTally:
        """Walk both sides. `later`: the source records after `walk.source_end` (read only if the target holds
        records after the copies of the range), to tell the copies of later records from records that are none."""
        src, tgt = _Side(source), _Side(target)
        tgt.fill(1)
        if tgt.buf:
            self.timestamps = tgt.buf[0].create_time
        while True:
            src.fill(1)
            tgt.fill(1)
            if not src.buf:
                self._target_tail(tgt, later)
                return self.tally
            if not tgt.buf:
                self._source_tail(src)
                return self.tally
            s, t = src.buf[0], tgt.buf[0]
            if self._same(s, t):
                self._matched(s)
                src.buf.popleft()
                tgt.buf.popleft()
                continue
            src.fill(self.window)
            tgt.fill(self.window)
            self._resync(src, tgt)

    def _resync(self, src: _Side, tgt: _Side) -> None:
        sl = list(islice(src.buf, self.window))
        tl = list(islice(tgt.buf, self.window))
        fs, ft = [self._fp(x) for x in sl], [self._fp(x) for x in tl]
        both_end = src.done and tgt.done and len(sl) == len(src.buf) and len(tl) == len(tgt.buf)
        block = None
        for a, b, size in SequenceMatcher(None, fs, ft, autojunk=False).get_matching_blocks():
            if size == 0:
                break
            if size >= 2 or (both_end and a + size == len(sl) and b + size == len(tl)):
                block = (a, b)
                break
        if block is not None:
            ns, nt, at_end = block[0], block[1], False
        elif self.walk.lead is not None and not self._resynced and not both_end:
            # Still looking for the target's first record in the source: this source window is not on the target.
            ns, nt, at_end = len(sl), 0, False
        elif both_end:
            ns, nt, at_end = len(sl), len(tl), True
        else:
            # No agreement within the window: take it place for place, as far as both sides go.
            ns = nt = min(len(sl), len(tl))
            at_end = False
        self._classify(
            sl[:ns],
            tl[:nt],
            at_end=at_end,
            later_s=list(zip(fs[ns:], sl[ns:], strict=True)),
            later_t=list(zip(ft[nt:], tl[nt:], strict=True)),
            gap_fps=(fs[:ns], ft[:nt]),
        )
        for _ in range(ns):
            src.buf.popleft()
        for _ in range(nt):
            tgt.buf.popleft()

    def _classify(
        self,
        sg: Sequence[Record],
        tg: Sequence[Record],
        *,
        at_end: bool,
        later_s: Sequence[tuple[bytes, Record]] = (),
        later_t: Sequence[tuple[bytes, Record]] = (),
        gap_fps: tuple[Sequence[bytes], Sequence[bytes]] | None = None,
    ) -> None:
        """Classify a gap: source records `sg` and target records `tg` between two places where both agree.

        `later_s`/`later_t`: digests of the records after the gap in the window, where a record of the gap may have
        moved to (reordered, counted now; its other occurrence is passed over when the walk reaches it).
        """
        if gap_fps is None:
            gap_fps = ([self._fp(x) for x in sg], [self._fp(x) for x in tg])
        fs, ft = list(gap_fps[0]), list(gap_fps[1])
        leading = self.walk.lead is not None and not self._resynced
        s_done: set[int] = set()
        t_done: set[int] = set()
        for i, f in enumerate(fs):  # source records already counted as moved earlier on the target
            if self._skip_source[f] > 0:
                self._skip_source[f] -= 1
                s_done.add(i)
        for j, f in enumerate(ft):  # copies already counted as moved later on the target
            if self._skip_target[f] > 0:
                self._skip_target[f] -= 1
                t_done.add(j)
        fs = [f if i not in s_done else b"" for i, f in enumerate(fs)]
        ft = [f if j not in t_done else b"\x00" for j, f in enumerate(ft)]
        # Records in order on both sides, however short the run (a lone record between compacted ones).
        for a, b, size in SequenceMatcher(None, fs, ft, autojunk=False).get_matching_blocks():
            for k in range(size):
                s_done.add(a + k)
                t_done.add(b + k)
                self._matched(sg[a + k])
        first_match = min(s_done, default=len(sg))
        where: dict[bytes, list[int]] = {}
        for j, f in enumerate(ft):
            if j not in t_done:
                where.setdefault(f, []).append(j)
        for i, s in enumerate(sg):
            if i in s_done:
                continue
            places = where.get(fs[i])
            if places:
                j = places.pop(0)
                s_done.add(i)
                t_done.add(j)
                self._remember(s)
                if self._counted(s.offset):
                    self.tally.add_reordered(s.offset, tg[j].offset)
        in_gap = {fs[i]: sg[i].offset for i in s_done}
        for j, t in enumerate(tg):
            if j in t_done:
                continue
            original = self._digested().get(ft[j], in_gap.get(ft[j]))
            if original is not None:
                t_done.add(j)
                self.tally.add_duplicated(original if self._counted(original) else None, t.offset)
        # A record of the gap found later in the other side's window: moved (reordered), not missing/unexpected.
        later_targets: dict[bytes, deque[Record]] = {}
        for f, t in later_t:
            later_targets.setdefault(f, deque()).append(t)
        for i, s in enumerate(sg):
            if i not in s_done and later_targets.get(fs[i]):
                t = later_targets[fs[i]].popleft()
                self._skip_target[fs[i]] += 1
                s_done.add(i)
                self._remember(s)
                if self._counted(s.offset):
                    self.tally.add_reordered(s.offset, t.offset)
        later_sources: dict[bytes, deque[Record]] = {}
        for f, r in later_s:
            later_sources.setdefault(f, deque()).append(r)
        for j, t in enumerate(tg):
            if j not in t_done and later_sources.get(ft[j]):
                r = later_sources[ft[j]].popleft()
                self._skip_source[ft[j]] += 1
                t_done.add(j)
                if self._counted(r.offset):
                    self.tally.add_reordered(r.offset, t.offset)
        rest_s = [(i, s) for i, s in enumerate(sg) if i not in s_done]
        rest_t = [t for j, t in enumerate(tg) if j not in t_done]
        for (_, s), t in zip(rest_s, rest_t, strict=False):
            name = differing_field(s, t, timestamps=self.timestamps) or "value"
            self._remember(s)
            if self._counted(s.offset):
                self.tally.add_different(s, t, name)
        for i, s in rest_s[len(rest_t) :]:
            self._gone_from_target(s, at_end=at_end, leading=leading and i < first_match)
        for t in rest_t[len(rest_s) :]:
            if self.source_compacted:
                self.tally.add_unverifiable(COMPACTED_SOURCE)
            else:
                self.tally.add_unexpected(t.offset)

    def _gone_from_target(self, s: Record, *, at_end: bool, leading: bool) -> None:
        """A source record with no copy: `leading`, before the first record found on the target of a lead walk."""
        if not self._counted(s.offset):
            return
        if leading and self.walk.lead is not None:
            if self.walk.lead == "missing":
                self.tally.add_missing(s.offset, self.walk.lead_reason)
            else:
                self.tally.add_unverifiable(self.walk.lead_reason)
        elif self.target_compacted:
            self.tally.add_unverifiable(COMPACTED_TARGET)
        elif at_end and s.offset > self.proven_up_to:
            self.tally.add_unverifiable(IN_FLIGHT)
        else:
            self.tally.add_missing(s.offset)

    def _source_tail(self, src: _Side) -> None:
        """The target's range is read to its end: what is left of the source is in flight or missing."""
        while True:
            src.fill(1)
            if not src.buf:
                return
            s = src.buf.popleft()
            if self._skip_source and self._skip_source[self._fp(s)] > 0:  # its copy was counted as moved
                self._skip_source[self._fp(s)] -= 1
                continue
            self._gone_from_target(s, at_end=True, leading=not self._resynced)

    def _target_tail(self, tgt: _Side, later: Iterable[Record] | None) -> None:
        """The source's range is read to its end; the target's records left are classified up to the first that is
        the copy of the next source record after the range (`later`: those records, read on demand; the rest are
        copies of later records, not checked): a copy of a record already matched is duplicated, any other record
        is unexpected. Without `later` the first record that is not a duplicate ends the tail (not checked)."""
        following = None if later is None else iter(later)
        nxt: Record | None = None
        for _ in range(self.window):
            tgt.fill(1)
            if not tgt.buf:
                return
            t = tgt.buf.popleft()
            f = self._fp(t)
            if self._skip_target[f] > 0:  # a moved copy, counted as reordered already
                self._skip_target[f] -= 1
                continue
            original = self._digested().get(f)
            if original is not None:
                self.tally.add_duplicated(original if self._counted(original) else None, t.offset)
                continue
            if following is None:
                return
            if nxt is None:
                nxt = next(following, None)
            if nxt is not None and self._same(nxt, t):
                return
            if self.source_compacted:
                self.tally.add_unverifiable(COMPACTED_SOURCE)
            else:
                self.tally.add_unexpected(t.offset)
