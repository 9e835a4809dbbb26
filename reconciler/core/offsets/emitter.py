"""When the replication job should write an offset-sync, with the rule of MM2's `OffsetSyncWriter`.

What this is for: the job writes `OffsetSync(topic, partition, upstream, downstream)` records so that
translation (`translation.OffsetSyncStore`) stays precise, without writing one per record. The rule is
apache/kafka `connect/mirror/src/main/java/org/apache/kafka/connect/mirror/OffsetSyncWriter.java`
(`PartitionState.update`, `maybeQueueOffsetSyncs`, `promoteDelayedOffsetSyncs`), which `MirrorSourceTask`
calls from `commitRecord` (per record) and `commit` (periodically). A sync is emitted at once when:
  - it is the first for the partition in this emitter's lifetime;
  - the translation of the latest record would lag by `offset_lag_max` or more downstream offsets
    (`downstream - (last_sync_downstream + 1) >= offset_lag_max`; translation lands one past a sync);
  - there is a gap: upstream offsets were skipped (compacted, aborted or control records) or went backwards;
  - the downstream offset went backwards (the target topic was truncated or recreated).
Otherwise the pair is held as the partition's delayed sync, replaced by newer pairs and handed out by
`take_delayed()`, which the job calls on its periodic commit so that idle partitions end with an exact sync.

The pair fed in must be MM2's: the offset of a replicated source record and the offset it got in the target
partition, never end offsets (next offset to read/write). Translation answers `downstream + 1` for groups past
the sync, which is only safe if `upstream` is a record that was actually copied.

Per-record vs per-batch: `observe_record` is MM2's rule unchanged (a gap is `upstream - previous != 1`).
A micro-batch job that only knows the last record of each partition per batch uses `observe_batch`, where a
gap is a change of the upstream-to-downstream distance since the previous observation
(`upstream - previous_upstream != downstream - previous_downstream`). For one-record steps into a partition
only kmirror writes, the two tests agree. A batch that copied its records one-to-one into contiguous target
offsets therefore only emits on lag; a batch that skipped upstream offsets emits at once.

What this module must not do: import a Kafka or Spark client or do I/O; it returns the syncs to write.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from reconciler.core.mm2.wire import OffsetSync, TopicPartition

__all__ = [
    "DEFAULT_OFFSET_LAG_MAX",
    "OffsetSyncEmitter",
    "PartitionSyncState",
    "SyncDecision",
    "SyncTrigger",
    "decide_sync",
]

DEFAULT_OFFSET_LAG_MAX = 100
"""MM2's `offset.lag.max` default."""


class SyncTrigger(StrEnum):
    """Why a sync is emitted at once; for logs and metrics, not for decisions."""

    FIRST = "first"
    LAG = "lag"
    GAP = "gap"
    DOWNSTREAM_REWIND = "downstream_rewind"


@dataclass(frozen=True, slots=True)
class PartitionSyncState:
    """MM2's `OffsetSyncWriter.PartitionState` as a value; -1 means "none yet", as in MM2."""

    previous_upstream: int = -1
    previous_downstream: int = -1
    last_sync_downstream: int = -1


@dataclass(frozen=True, slots=True)
class SyncDecision:
    """The outcome of one observation: emit now or hold as delayed, and the partition's next state."""

    emit: bool
    triggers: frozenset[SyncTrigger]
    state: PartitionSyncState


def decide_sync(
    state: PartitionSyncState | None,
    upstream_offset: int,
    downstream_offset: int,
    offset_lag_max: int = DEFAULT_OFFSET_LAG_MAX,
    *,
    per_batch: bool = False,
) -> SyncDecision:
    """Apply MM2's `PartitionState.update` (followed by `reset`) to one (upstream, downstream) pair."""
    previous = state if state is not None else PartitionSyncState()
    triggers: set[SyncTrigger] = set()
    if previous.last_sync_downstream == -1:
        triggers.add(SyncTrigger.FIRST)
    if downstream_offset - (previous.last_sync_downstream + 1) >= offset_lag_max:
        triggers.add(SyncTrigger.LAG)
    upstream_step = upstream_offset - previous.previous_upstream
    expected_step = downstream_offset - previous.previous_downstream if per_batch else 1
    if upstream_step != expected_step:
        triggers.add(SyncTrigger.GAP)
    if downstream_offset < previous.previous_downstream:
        triggers.add(SyncTrigger.DOWNSTREAM_REWIND)
    last_sync = downstream_offset if triggers else previous.last_sync_downstream
    return SyncDecision(
        emit=bool(triggers),
        triggers=frozenset(triggers),
        state=PartitionSyncState(upstream_offset, downstream_offset, last_sync),
    )


class OffsetSyncEmitter:
    """Per-partition sync decisions plus MM2's delayed syncs, for one run of the replication job.

    Not thread-safe; the job drives it from one place (the batch callback).
    """

    def __init__(self, offset_lag_max: int = DEFAULT_OFFSET_LAG_MAX) -> None:
        if offset_lag_max < 0:
            raise ValueError(f"offset_lag_max must be >= 0, got {offset_lag_max}")
        self._offset_lag_max = offset_lag_max
        self._states: dict[TopicPartition, PartitionSyncState] = {}
        self._delayed: dict[TopicPartition, OffsetSync] = {}

    @property
    def offset_lag_max(self) -> int:
        return self._offset_lag_max

    def observe_record(
        self, topic_partition: TopicPartition, upstream_offset: int, downstream_offset: int
    ) -> OffsetSync | None:
        """One replicated record (MM2's `maybeQueueOffsetSyncs`): the sync to write now, or None (held)."""
        return self._observe(topic_partition, upstream_offset, downstream_offset, per_batch=False)

    def observe_batch(
        self, topic_partition: TopicPartition, last_upstream_offset: int, last_downstream_offset: int
    ) -> OffsetSync | None:
        """The last record a batch replicated for a partition: the sync to write now, or None (held)."""
        return self._observe(topic_partition, last_upstream_offset, last_downstream_offset, per_batch=True)

    def take_delayed(self) -> list[OffsetSync]:
        """The held syncs, in the order they were first held, and forget them (MM2's `promoteDelayedOffsetSyncs`).

        As in MM2, writing these does not restart the lag count, which runs from the last immediate sync.
        """
        delayed = list(self._delayed.values())
        self._delayed.clear()
        return delayed

    def state(self, topic_partition: TopicPartition) -> PartitionSyncState | None:
        return self._states.get(topic_partition)

    def _observe(
        self, topic_partition: TopicPartition, upstream: int, downstream: int, *, per_batch: bool
    ) -> OffsetSync | None:
        tp = TopicPartition(*topic_partition)
        state = self._states.get(tp)
        decision = decide_sync(state, upstream, downstream, self._offset_lag_max, per_batch=per_batch)
        self._states[tp] = decision.state
        sync = OffsetSync(tp.topic, tp.partition, upstream, downstream)
        if decision.emit:
            self._delayed.pop(tp, None)
            return sync
        # Like MM2's LinkedHashMap, replacing a held sync keeps the partition's place in the order.
        self._delayed[tp] = sync
        return None
