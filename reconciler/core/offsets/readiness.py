"""Failover readiness of a consumer group: how many records it would re-read on the target if it moved now.

A group committed at source offset G moves to the target at its translated offset, MM2's conservative answer:
with s the newest offset-sync at or below G, `s.downstream` when `s.upstream == G`, else `s.downstream + 1`.
Its exact position on the target is where the record at G landed. Offset-syncs are written at least every
`offset_lag_max` records and at every gap, so between s and G the source offsets map one to one onto the
target's: the exact position is `s.downstream + (G - s.upstream)`, and the group re-reads
`G - s.upstream - 1` records (0 when `s.upstream == G`), those at source offsets s.upstream + 1 .. G - 1.
None when G does not translate at all (no sync at or below it yet): the group cannot move without a guess.

Pure: values in, values out.

Must not: import a Kafka client, read a cluster, or guess a position the syncs do not prove.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from reconciler.core.mm2.wire import OffsetSync, TopicPartition


class SyncLookup(Protocol):
    def sync_at_or_before(self, topic_partition: TopicPartition, upstream_offset: int) -> OffsetSync | None: ...


@dataclass(frozen=True, slots=True)
class FailoverReadiness:
    """One group partition: its committed source offset, where it would resume on the target, what it re-reads."""

    group: str
    topic: str  # the source topic the group committed on
    partition: int
    source_offset: int
    target_topic: str
    target_offset: int | None  # the translated offset; None: not translatable
    rereads: int | None  # records re-read on the target after moving now; None: not translatable

    @property
    def translatable(self) -> bool:
        return self.target_offset is not None


def failover_readiness(
    group: str,
    offsets: Mapping[tuple[str, int], int],
    syncs: SyncLookup,
    *,
    remote_topic: Callable[[str], str],
    replicated: Callable[[str], bool],
) -> list[FailoverReadiness]:
    """Every committed offset of `group` on a replicated topic, with its translation and re-reads; sorted."""
    out = []
    for (topic, partition), offset in sorted(offsets.items()):
        if offset < 0 or not replicated(topic):
            continue
        sync = syncs.sync_at_or_before(TopicPartition(topic, partition), offset)
        if sync is None:
            out.append(FailoverReadiness(group, topic, partition, offset, remote_topic(topic), None, None))
            continue
        exact = sync.upstream_offset == offset
        target = sync.downstream_offset + (0 if exact else 1)
        rereads = 0 if exact else offset - sync.upstream_offset - 1
        out.append(FailoverReadiness(group, topic, partition, offset, remote_topic(topic), target, rereads))
    return out
