"""Reading the records after an offset-sync on both clusters, for the exact cutover.

For each committed source offset G of a flow's groups and its newest offset-sync (U, D) with U <= G
(`reconciler.offsets.exact.exact_requests`), `translate_exactly` reads, read_committed:
  - on the source, the records of the partition from U up to and including the first one at or after G;
  - on the target, as many records of the remote partition from D, plus one;
and hands them to `reconciler.offsets.exact.match_exact`, which says whether the copy matches record for record
and what the exact offset is. Reads are bounded: at most `offset_lag_max + EXACT_MARGIN` records per range (a
sync is written at least every `offset_lag_max` records, so more means syncs are missing: conservative).
Requests sharing a partition and a sync share one read.

Must not: decide the answer (that is `reconciler.offsets.exact`), write anything, commit an offset (its
consumers never join or commit a group), or read more than the bound per range.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, KafkaError, KafkaException, Message, TopicPartition

from reconciler.offsets.exact import (
    ExactRequest,
    ExactTranslation,
    Record,
    SyncLookup,
    conservative,
    exact_requests,
    match_exact,
)

__all__ = ["EXACT_MARGIN", "RangeReader", "translate_exactly"]

EXACT_MARGIN = 100
"""Records read per range beyond `offset_lag_max` (held syncs, a sync written one record late)."""


class RangeUnreadable(Exception):
    """A range could not be read to its end within the timeout (an open transaction, a broker down)."""


def _record(msg: Message) -> Record:
    ts_type, ts = msg.timestamp()
    headers = tuple((k, v) for k, v in (msg.headers() or ()))
    return Record(int(msg.offset()), msg.key(), msg.value(), headers, int(ts), ts_type == TIMESTAMP_CREATE_TIME)


class RangeReader:
    """A read_committed consumer reading bounded runs of records of one partition at a time."""

    def __init__(self, config: Mapping[str, Any], *, timeout: float = 30.0) -> None:
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

    def read(
        self, topic: str, partition: int, start: int, *, until: int | None = None, count: int
    ) -> tuple[list[Record], bool]:
        """Committed records from `start`: stop after the first at or past offset `until` (when given), after
        `count` records, or at the end of the partition. Returns the records and whether the end was reached."""
        tp = TopicPartition(topic, partition)
        try:
            _, high = self._consumer.get_watermark_offsets(tp, timeout=self.timeout, cached=False)
        except KafkaException as exc:
            raise RangeUnreadable(f"{topic}/{partition}: {exc}") from exc
        out: list[Record] = []
        if start >= high:
            return out, True
        self._consumer.assign([TopicPartition(topic, partition, start)])
        try:
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline:
                for msg in self._consumer.consume(num_messages=min(count, 1000) or 1, timeout=0.2):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            return out, True
                        continue
                    if msg.topic() != topic or msg.partition() != partition or msg.offset() < start:
                        continue
                    if out and msg.offset() <= out[-1].offset:
                        continue
                    out.append(_record(msg))
                    if len(out) >= count or (until is not None and msg.offset() >= until):
                        return out, False
                position = self._consumer.position([tp])[0].offset
                if position >= high:
                    return out, True
            raise RangeUnreadable(f"{topic}/{partition}: did not read from {start} to {high} in {self.timeout:.0f}s")
        finally:
            self._consumer.unassign()

    def close(self) -> None:
        self._consumer.close()


def translate_exactly(
    offsets: Iterable[tuple[str, int, int]],
    syncs: SyncLookup,
    *,
    remote_topic: Callable[[str], str],
    source_config: Mapping[str, Any],
    target_config: Mapping[str, Any],
    offset_lag_max: int,
    timeout: float = 30.0,
) -> list[ExactTranslation]:
    """Exact (or conservative, with the reason) translations of committed source offsets (topic, partition, G).

    `remote_topic`: the flow's naming (source topic -> remote topic); `syncs`: the flow's offset-syncs.
    """
    requests = exact_requests(offsets, syncs)
    limit = offset_lag_max + EXACT_MARGIN
    shared: dict[tuple[str, int, int, int], list[ExactRequest]] = {}
    out: list[ExactTranslation] = []
    for r in requests:
        if r.sync is None:
            out.append(match_exact(r, (), None, ()))
        else:
            shared.setdefault((r.topic, r.partition, r.sync.upstream_offset, r.sync.downstream_offset), []).append(r)
    if not shared:
        return out
    source, target = RangeReader(source_config, timeout=timeout), RangeReader(target_config, timeout=timeout)
    try:
        for (topic, partition, u, d), group in shared.items():
            last = max(r.group_offset for r in group)
            try:
                records, at_end = source.read(topic, partition, u, until=last, count=limit + 1)
                n = max(sum(1 for x in records if x.offset < r.group_offset) for r in group)
                copies, _ = target.read(remote_topic(topic), partition, d, count=min(n, limit) + 1)
            except RangeUnreadable as exc:
                out += [_unreadable(r, str(exc)) for r in group]
                continue
            for r in group:
                out.append(_match(r, records, at_end, copies))
    finally:
        source.close()
        target.close()
    return sorted(out, key=lambda x: (x.topic, x.partition, x.group_offset))


def _match(r: ExactRequest, records: Sequence[Record], at_end: bool, copies: Sequence[Record]) -> ExactTranslation:
    before = [x for x in records if x.offset < r.group_offset]
    after = next((x for x in records if x.offset >= r.group_offset), None)
    complete = after is not None or at_end
    return match_exact(r, before, after, copies, complete=complete)


def _unreadable(r: ExactRequest, why: str) -> ExactTranslation:
    answer = None if r.sync is None else conservative(r.sync, r.group_offset)
    return ExactTranslation(r.topic, r.partition, r.group_offset, answer, None, f"could not read the records: {why}")
