"""Reading the records after an offset-sync on both clusters, for the exact cutover.

For each committed source offset G of a flow's groups and its newest offset-sync (U, D) with U <= G
(`reconciler.core.offsets.exact.exact_requests`), `translate_exactly` reads, read_committed:
  - on the source, the records of the partition from U up to and including the first one at or after G;
  - on the target, as many records of the remote partition from D, plus one;
and hands them to `reconciler.core.offsets.exact.match_exact`, which says whether the copy matches record for record
and what the exact offset is. Reads are bounded: at most `offset_lag_max + EXACT_MARGIN` records per range are
kept and compared (a sync is written at least every `offset_lag_max` records, so more means syncs are missing:
conservative); the consumer's prefetch may fetch a little more, within its fetch size settings. Requests sharing
a partition and a sync share one read, and the ranges of all partitions are read together, one round per sync
(a partition whose groups sit after two different syncs takes two rounds). Pausing a finished partition was
tried and dropped: it stalled the other partitions' reads until the timeout.

Must not: decide the answer (that is `reconciler.core.offsets.exact`), write anything, commit an offset (its
consumers never join or commit a group), or read more than the bound per range.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, KafkaError, KafkaException, Message, TopicPartition

from reconciler.core.offsets.exact import (
    ExactRequest,
    ExactTranslation,
    Record,
    SyncLookup,
    exact_requests,
    match_exact,
    still_copying,
    unknown,
)
from reconciler.spec.client_config import ClientConfig

__all__ = ["EXACT_MARGIN", "Range", "RangeRead", "RangeReader", "translate_exactly"]

EXACT_MARGIN = 100
"""Records read per range beyond `offset_lag_max` (held syncs, a sync written one record late)."""


@dataclass(frozen=True, slots=True)
class Range:
    """Committed records of one partition from `start`: stop after `count` records, after the first at or past
    offset `until` (when given), or at the end of the partition."""

    topic: str
    partition: int
    start: int
    count: int
    until: int | None = None


@dataclass(slots=True)
class RangeRead:
    """What was read of a `Range`; `at_end`: the partition's end was reached; `error`: it could not be read."""

    records: list[Record] = field(default_factory=list)
    at_end: bool = False
    error: str | None = None


def _record(msg: Message) -> Record:
    ts_type, ts = msg.timestamp()
    headers = tuple((k, v) for k, v in (msg.headers() or ()))
    return Record(int(msg.offset()), msg.key(), msg.value(), headers, int(ts), ts_type == TIMESTAMP_CREATE_TIME)


class RangeReader:
    """A read_committed consumer reading bounded runs of records, of many partitions at once."""

    def __init__(self, config: ClientConfig, *, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self._consumer = Consumer(
            {
                **config,
                "group.id": f"kmirror-exact-{uuid.uuid4().hex[:8]}",  # never joined, never committed
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "log_level": 0,
            }
        )

    def read(self, ranges: Sequence[Range]) -> list[RangeRead]:
        """Read `ranges` (one per partition at most) together; a range not done within the timeout has `error`."""
        keys = [(r.topic, r.partition) for r in ranges]
        if len(set(keys)) != len(keys):
            raise ValueError("one range per partition per read")
        wanted = dict(zip(keys, ranges, strict=True))
        reads = {k: RangeRead() for k in keys}
        pending = set(keys)
        if not pending:
            return []
        self._consumer.assign([TopicPartition(r.topic, r.partition, r.start) for r in ranges])
        highs: dict[tuple[str, int], int] = {}
        try:
            deadline = time.monotonic() + self.timeout
            while pending and time.monotonic() < deadline:
                msgs = self._consumer.consume(num_messages=10_000, timeout=0.05)
                for msg in msgs:
                    key = (msg.topic(), msg.partition())
                    if key not in pending:
                        continue
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            reads[key].at_end = True
                            pending.discard(key)
                        continue
                    r, got = wanted[key], reads[key].records
                    if msg.offset() < r.start or (got and msg.offset() <= got[-1].offset):
                        continue
                    got.append(_record(msg))
                    if len(got) >= r.count or (r.until is not None and msg.offset() >= r.until):
                        pending.discard(key)
                if not msgs and pending:  # idle: a partition whose end holds no record (markers) may send no EOF
                    self._check_ends(pending, reads, highs)
        finally:
            self._consumer.unassign()
        for key in pending:
            reads[key].error = f"{key[0]}/{key[1]}: not read to its end within {self.timeout:.0f}s"
        return [reads[k] for k in keys]

    def _check_ends(
        self, pending: set[tuple[str, int]], reads: dict[tuple[str, int], RangeRead], highs: dict[tuple[str, int], int]
    ) -> None:
        for key in list(pending):
            tp = TopicPartition(*key)
            try:
                if key not in highs:
                    highs[key] = self._consumer.get_watermark_offsets(tp, timeout=self.timeout, cached=False)[1]
                position = self._consumer.position([tp])[0].offset
            except KafkaException as exc:
                reads[key].error = f"{key[0]}/{key[1]}: {exc}"
                pending.discard(key)
                continue
            if position >= highs[key]:
                reads[key].at_end = True
                pending.discard(key)

    def close(self) -> None:
        self._consumer.close()


def translate_exactly(
    offsets: Iterable[tuple[str, int, int]],
    syncs: SyncLookup,
    *,
    remote_topic: Callable[[str], str],
    source_config: ClientConfig,
    target_config: ClientConfig,
    offset_lag_max: int,
    timeout: float = 30.0,
    lag: Mapping[tuple[str, int], int] | None = None,
    budget: float | None = None,
) -> list[ExactTranslation]:
    """Exact (or conservative, with the reason) translations of committed source offsets (topic, partition, G).

    `remote_topic`: the flow's naming (source topic -> remote topic); `syncs`: the flow's offset-syncs; `lag`:
    per source partition, records not replicated yet (`replication_lag.replication_lag`): a partition with lag is
    not read and stays conservative (`exact.still_copying`). `budget`: seconds for all the reads; the rounds it
    leaves unread, and any read that fails, answer "exactness unknown" (`exact.unknown`) with the reason.
    """
    requests = exact_requests(offsets, syncs)
    limit = offset_lag_max + EXACT_MARGIN
    shared: dict[tuple[str, int, int, int], list[ExactRequest]] = {}
    out: list[ExactTranslation] = []
    lag = lag or {}
    for r in requests:
        behind = lag.get((r.topic, r.partition), 0)
        if r.sync is None:
            out.append(match_exact(r, (), None, ()))
        elif behind > 0:
            out.append(still_copying(r, behind))
        else:
            shared.setdefault((r.topic, r.partition, r.sync.upstream_offset, r.sync.downstream_offset), []).append(r)
    if not shared:
        return sorted(out, key=lambda x: (x.topic, x.partition, x.group_offset))
    # One read per round: the i-th sync of every partition (requests sharing a partition and a sync share it).
    by_partition: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for topic, partition, u, d in sorted(shared):
        by_partition.setdefault((topic, partition), []).append((u, d))
    rounds = max(len(v) for v in by_partition.values())
    deadline = None if budget is None else time.monotonic() + budget
    source, target = RangeReader(source_config, timeout=timeout), RangeReader(target_config, timeout=timeout)
    try:
        for i in range(rounds):
            keys = [(t, p, *syncs[i]) for (t, p), syncs in by_partition.items() if i < len(syncs)]
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                why = f"not read: the time budget of {budget:g}s for reading records was spent"
                out += [unknown(r, why) for k in keys for r in shared[k]]
                continue
            source.timeout = target.timeout = timeout if left is None else min(timeout, left)
            tops = [max(r.group_offset for r in shared[k]) for k in keys]
            reads = source.read([Range(t, p, u, limit + 1, top) for (t, p, u, _), top in zip(keys, tops, strict=True)])
            counts = [
                max(sum(1 for x in read.records if x.offset < r.group_offset) for r in shared[k])
                for k, read in zip(keys, reads, strict=True)
            ]
            if deadline is not None:
                target.timeout = max(0.1, min(timeout, deadline - time.monotonic()))
            copies = target.read(
                [Range(remote_topic(t), p, d, min(n, limit) + 1) for (t, p, _, d), n in zip(keys, counts, strict=True)]
            )
            for k, read, copy in zip(keys, reads, copies, strict=True):
                for r in shared[k]:
                    error = read.error or copy.error
                    if error:
                        out.append(unknown(r, f"could not read the records: {error}"))
                    else:
                        out.append(_match(r, read.records, read.at_end, copy.records))
    finally:
        source.close()
        target.close()
    return sorted(out, key=lambda x: (x.topic, x.partition, x.group_offset))


def _match(r: ExactRequest, records: Sequence[Record], at_end: bool, copies: Sequence[Record]) -> ExactTranslation:
    before = [x for x in records if x.offset < r.group_offset]
    after = next((x for x in records if x.offset >= r.group_offset), None)
    complete = after is not None or at_end
    return match_exact(r, before, after, copies, complete=complete)
