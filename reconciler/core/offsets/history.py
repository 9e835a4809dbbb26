"""Precise translation: every offset-sync since a partition's last rewind, beside MM2's bounded store.

Why: MM2's `OffsetSyncStore` keeps 64 exponentially spaced syncs per partition, spaced from the newest one, so
a group far behind the replication head translates coarsely. During a migration's catch-up the job copies a
large backlog in a few batches, and a group that stopped half-way through it would restart on the target up
to half the backlog early (measured: a group at offset 50 of 200 translated to 2 with MM2's store, and with
kmirror's dense history to 49). Every offset-sync is a true (copied source offset, target offset) pair, so MM2's
conservative rule applied to all of them is just as safe, and exact to within `offset_lag_max`.

`SyncHistory` keeps, per source partition, the syncs since the last rewind (an upstream offset below the
previous one: the source was recreated or truncated; or a downstream offset below the previous one: the target
was, where MM2 keeps the older syncs), up to `max_per_partition` newest ones. It feeds MM2's store with every
sync too; within the dense window the dense history answers (it holds every sync the store holds since the
last rewind, and more); below the window (trimmed for size) the store answers; below a rewind nothing does.

What this module must not do: import a Kafka or Spark client or do I/O.
"""

from __future__ import annotations

from bisect import bisect_right

from reconciler.core.mm2.wire import OffsetSync, TopicPartition
from reconciler.core.offsets.translation import OffsetSyncStore

__all__ = ["DEFAULT_MAX_PER_PARTITION", "SyncHistory"]

DEFAULT_MAX_PER_PARTITION = 50_000
"""At one sync per `offset_lag_max` (100) records: the last 5 million records of each partition."""


class _Dense:
    __slots__ = ("downstream", "trimmed", "upstream")

    def __init__(self) -> None:
        self.upstream: list[int] = []
        self.downstream: list[int] = []
        self.trimmed = False  # older syncs were dropped for size (MM2's store may still answer for them)


class SyncHistory:
    """MM2's `OffsetSyncStore` plus a dense history; the same `update` / `mark_read_to_end` / translate API."""

    def __init__(
        self, store: OffsetSyncStore | None = None, *, max_per_partition: int = DEFAULT_MAX_PER_PARTITION
    ) -> None:
        self.store = store if store is not None else OffsetSyncStore()
        self.max_per_partition = max_per_partition
        self._dense: dict[TopicPartition, _Dense] = {}

    @property
    def read_to_end(self) -> bool:
        return self.store.read_to_end

    def mark_read_to_end(self) -> None:
        self.store.mark_read_to_end()

    def update(self, sync: OffsetSync) -> None:
        self.store.update(sync)
        tp = sync.topic_partition
        d = self._dense.get(tp)
        if d is None:
            d = self._dense[tp] = _Dense()
        up, down = sync.upstream_offset, sync.downstream_offset
        if d.upstream and (up < d.upstream[-1] or down < d.downstream[-1]):
            d.upstream.clear()
            d.downstream.clear()
            d.trimmed = False
        if d.upstream and d.upstream[-1] == up:
            d.downstream[-1] = max(d.downstream[-1], down)
        else:
            d.upstream.append(up)
            d.downstream.append(down)
        if len(d.upstream) > self.max_per_partition:
            cut = len(d.upstream) - self.max_per_partition
            del d.upstream[:cut], d.downstream[:cut]
            d.trimmed = True

    def translate_downstream(self, topic_partition: TopicPartition, upstream_offset: int) -> int | None:
        """MM2's conservative rule over the dense history (MM2's store below a trimmed window)."""
        if not self.read_to_end:
            return None
        tp = TopicPartition(*topic_partition)
        d = self._dense.get(tp)
        if d is not None and d.upstream:
            i = bisect_right(d.upstream, upstream_offset) - 1
            if i >= 0:
                # Within the window the dense history holds every sync MM2's store has, and more.
                answer = d.downstream[i] + (0 if d.upstream[i] == upstream_offset else 1)
                return answer if answer >= 0 else None
            if not d.trimmed:
                return None  # before the first sync since the last rewind: nothing safe to say
        return self.store.translate_downstream(tp, upstream_offset)

    def sync_at_or_before(self, topic_partition: TopicPartition, upstream_offset: int) -> OffsetSync | None:
        """The sync `translate_downstream` answers from (newest with upstream <= the offset), or None.

        For the exact cutover (`reconciler.core.offsets.exact`), which reads the records from that sync on.
        """
        if not self.read_to_end:
            return None
        tp = TopicPartition(*topic_partition)
        d = self._dense.get(tp)
        if d is not None and d.upstream:
            i = bisect_right(d.upstream, upstream_offset) - 1
            if i >= 0:
                return OffsetSync(tp.topic, tp.partition, d.upstream[i], d.downstream[i])
            if not d.trimmed:
                return None
        older = [s for s in self.store.syncs_for(tp) if s.upstream_offset <= upstream_offset]
        return max(older, key=lambda s: s.upstream_offset) if older else None

    def syncs_since_rewind(self, topic_partition: TopicPartition) -> tuple[tuple[int, int], ...]:
        """Every (upstream, downstream) sync of the partition since its last rewind, oldest first (the dense
        window; MM2's sparser store adds the older ones when the window was trimmed). For `kmirror verify`, which
        walks the records between consecutive syncs."""
        if not self.read_to_end:
            return ()
        tp = TopicPartition(*topic_partition)
        d = self._dense.get(tp)
        dense = tuple(zip(d.upstream, d.downstream, strict=True)) if d is not None else ()
        if d is not None and d.upstream and not d.trimmed:
            return dense
        first = dense[0][0] if dense else None
        older = sorted(
            (s.upstream_offset, s.downstream_offset)
            for s in self.store.syncs_for(tp)
            if first is None or s.upstream_offset < first
        )
        return tuple(older) + dense

    def syncs_for(self, topic_partition: TopicPartition) -> tuple[OffsetSync, ...]:
        """The newest sync first (then MM2's stored ones), like `OffsetSyncStore.syncs_for`."""
        tp = TopicPartition(*topic_partition)
        d = self._dense.get(tp)
        newest = (OffsetSync(tp.topic, tp.partition, d.upstream[-1], d.downstream[-1]),) if d and d.upstream else ()
        return newest + self.store.syncs_for(tp)

    def topic_partitions(self) -> frozenset[TopicPartition]:
        return self.store.topic_partitions()
