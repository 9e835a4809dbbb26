"""Offset translation from offset-syncs, with the semantics of MM2's `OffsetSyncStore`.

What this is for: turning a consumer group's committed offset on the source cluster into a safe offset on the
target cluster, exactly as MirrorMaker 2 would, so that checkpoints written by kmirror and by MM2 agree and a
consumer that moves to the target never skips a record. It ports apache/kafka
`connect/mirror/src/main/java/org/apache/kafka/connect/mirror/OffsetSyncStore.java` in its current form (the
bounded, exponentially spaced history with invariants A-D, and the `initializationMustReadToEnd` switch that
`MirrorCheckpointTask` passes to `start()` since it gained a `CheckpointStore`), and the translation rule as
`MirrorCheckpointTask.checkpoint()` and `checkpointsForGroup()` apply it.

How it is fed: every record of the offset-syncs topic, in log order, through `update()`; then
`mark_read_to_end()` once the first read has reached the end offset of that topic (MM2's `start()` returning);
only then does `translate_downstream()` answer. Later syncs keep flowing through `update()`.

Per source partition the store keeps MM2's 64 slots (`syncs[0]` newest, `syncs[63]` oldest usable) under
MM2's invariants:
  A  syncs[0] is the latest sync;
  B  for i < j, syncs[i] is not syncs[j]: syncs[i].upstream <= syncs[j].upstream + 2^j - 2^i;
  C  for i < j, syncs[i] is not syncs[j]: syncs[i].upstream >= syncs[j].upstream + 2^max(i-2, 0);
  D  syncs[63] is the earliest sync usable for translation.
A sync whose upstream offset is below the latest one (the source topic was recreated or truncated) clears the
history. A downstream offset going backwards does not, exactly as in MM2; the job side emits a sync at once
in that case (see `emitter`), so the newest slot is correct again. The slots are compared by identity, like
the Java array of objects, and 64-bit arithmetic wraps like Java's `long`, so results match MM2 exactly.

What this module must not do: import a Kafka or Spark client, read a topic, or do any other I/O. It is a pure
value-in, value-out class; the adapter that consumes the offset-syncs topic feeds it.
"""

from __future__ import annotations

from reconciler.core.mm2.wire import OffsetSync, TopicPartition

__all__ = ["SYNCS_PER_PARTITION", "OffsetSyncStore"]

SYNCS_PER_PARTITION = 64
"""MM2's `OffsetSyncStore.SYNCS_PER_PARTITION` (`Long.SIZE`): one slot per bit of an offset."""

_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
_LONG_SPAN = 1 << 64
_POW2 = tuple(1 << n for n in range(SYNCS_PER_PARTITION))


def _as_java_long(value: int) -> int:
    """Wrap like Java `long` arithmetic; MM2's invariant checks rely on overflow turning bounds negative."""
    if _LONG_MIN <= value <= _LONG_MAX:
        return value
    return (value - _LONG_MIN) % _LONG_SPAN + _LONG_MIN


class _Slot:
    """One sync as stored in the array; identity matters (two equal syncs read twice are two slots)."""

    __slots__ = ("downstream", "sync", "upstream")

    def __init__(self, sync: OffsetSync) -> None:
        self.sync = sync
        self.upstream = sync.upstream_offset
        self.downstream = sync.downstream_offset


def _invariant_b(i_sync: _Slot, j_sync: _Slot, i: int, j: int) -> bool:
    if i_sync is j_sync:
        return True
    bound = _as_java_long(j_sync.upstream + _POW2[j] - _POW2[i])
    return bound < 0 or i_sync.upstream <= bound


def _invariant_c(i_sync: _Slot, j_sync: _Slot, i: int) -> bool:
    if i_sync is j_sync:
        return True
    bound = _as_java_long(j_sync.upstream + _POW2[i - 2 if i > 2 else 0])
    return bound >= 0 and i_sync.upstream >= bound


class OffsetSyncStore:
    """MM2's in-memory offset-sync store: bounded sync history per source partition, and translation.

    `initialization_must_read_to_end` is MM2's `start(initializationMustReadToEnd)` argument. With True (MM2's
    choice when it could not load its checkpoints) every sync read before `mark_read_to_end()` replaces the
    whole history, so only the last one survives the initial read; this keeps translation monotonic across
    restarts when no earlier checkpoint guards it. With False (MM2's choice when its checkpoints loaded) the
    initial read builds the same history as live updates do.
    """

    def __init__(self, *, initialization_must_read_to_end: bool = True) -> None:
        self._initialization_must_read_to_end = initialization_must_read_to_end
        self._read_to_end = False
        self._syncs: dict[TopicPartition, list[_Slot]] = {}

    @property
    def read_to_end(self) -> bool:
        """Whether `mark_read_to_end()` was called; until then nothing is translated."""
        return self._read_to_end

    def mark_read_to_end(self) -> None:
        """Record that the first read of the offset-syncs topic reached its end (MM2's `start()` returns)."""
        self._read_to_end = True

    def update(self, sync: OffsetSync) -> None:
        """Apply one offset-sync record, in the order of the offset-syncs topic (MM2's `handleRecord`)."""
        tp = sync.topic_partition
        slot = _Slot(sync)
        current = self._syncs.get(tp)
        if current is None:
            self._syncs[tp] = [slot] * SYNCS_PER_PARTITION
            return
        updated = list(current)
        self._update_sync_array(updated, current, slot)
        self._syncs[tp] = updated

    def translate_downstream(self, topic_partition: TopicPartition, upstream_offset: int) -> int | None:
        """The target offset a group committed at `upstream_offset` on the source may safely resume from.

        MM2's conservative rule: take the newest stored sync s with s.upstream <= upstream_offset; answer
        s.downstream if they are equal, else s.downstream + 1 (records after the sync may have been dropped
        or not yet replicated, so guessing further could skip data). None when there is no answer: before
        `mark_read_to_end()`, for a partition with no sync, or when every stored sync is newer than the group
        (MM2 returns -1 for that case and `MirrorCheckpointTask` drops it; so do negative results).
        """
        if not self._read_to_end:
            return None
        syncs = self._syncs.get(topic_partition)
        if syncs is None:
            return None
        sync = self._lookup_latest_sync(syncs, upstream_offset)
        if sync.upstream > upstream_offset:
            return None
        step = 0 if sync.upstream == upstream_offset else 1
        downstream = _as_java_long(sync.downstream + step)
        return downstream if downstream >= 0 else None

    def syncs_for(self, topic_partition: TopicPartition) -> tuple[OffsetSync, ...]:
        """The 64 stored slots of a partition, newest first (MM2's test-only `syncFor`); () if none."""
        return tuple(slot.sync for slot in self._syncs.get(topic_partition, ()))

    def topic_partitions(self) -> frozenset[TopicPartition]:
        """The source partitions for which at least one sync has been seen."""
        return frozenset(self._syncs)

    # -- MM2's OffsetSyncStore.updateSyncArray / lookupLatestSync, kept line for line ---------------------

    def _update_sync_array(self, syncs: list[_Slot], original: list[_Slot], offset_sync: _Slot) -> None:
        only_load_last_offset = not self._read_to_end and self._initialization_must_read_to_end
        upstream_rewind = offset_sync.upstream < syncs[0].upstream
        if only_load_last_offset or upstream_rewind:
            syncs[:] = [offset_sync] * SYNCS_PER_PARTITION
            return
        replacement = offset_sync
        # Index into the original array of the old sync considered next for promotion.
        replacement_index = 0
        # Invariant A: the newest sync always goes first.
        syncs[0] = replacement
        for current in range(1, SYNCS_PER_PARTITION):
            previous = current - 1
            # Prefer an old sync as the replacement when it satisfies the invariants at this index: keeping
            # more distinct syncs improves translation. This is Java's do/while loop.
            while True:
                old_value = original[replacement_index]
                is_recent = _invariant_b(syncs[previous], old_value, previous, current)
                separated_from_previous = _invariant_c(syncs[previous], old_value, previous)
                following = current + 1
                separated_from_next = following >= SYNCS_PER_PARTITION or _invariant_c(
                    old_value, syncs[following], current
                )
                next_replacement = replacement_index + 1
                duplicate = next_replacement < SYNCS_PER_PARTITION and old_value is original[next_replacement]
                promote = is_recent and separated_from_previous and separated_from_next
                if promote:
                    replacement = old_value
                skip_old_value = duplicate or not separated_from_previous
                if promote or skip_old_value:
                    replacement_index += 1
                if not (replacement_index < current and skip_old_value):
                    break
            if _invariant_b(syncs[previous], syncs[current], previous, current):
                # Invariant B holds here, hence for every later index too.
                break
            syncs[current] = replacement

    @staticmethod
    def _lookup_latest_sync(syncs: list[_Slot], upstream_offset: int) -> _Slot:
        # Newest to oldest: a linear scan that is effectively a binary search over the offsets.
        for slot in syncs:
            if slot.upstream <= upstream_offset:
                return slot
        return syncs[-1]
