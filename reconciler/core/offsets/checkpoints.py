"""Checkpoints for consumer groups and the offsets to write into the target, with MM2's rules.

What this is for: the checkpointer (an adapter, `reconciler.kafka_clients.checkpointer`) lists the source groups,
reads the offset-syncs, and asks this module what to emit and what to write; `kmirror plan` and `cutover` use
the same translation. It follows apache/kafka `MirrorCheckpointTask`:

- `checkpoints_for_group` is `checkpointsForGroup`: every committed offset on a partition of a replicated
  topic is translated (`OffsetSyncStore.translate_downstream`, MM2's conservative rule); a partition without an
  answer gets no checkpoint; a checkpoint is emitted only when it is "more recent" than the last one emitted for
  that group and partition (`checkpointIsMoreRecent`): the first one, an upstream rewind (the source group was
  reset on purpose), or a downstream offset that moved forward. A repeated or backwards translation is not
  emitted, so the checkpoints of a group only move forward unless the group itself was rewound.
- A checkpoint carries the metadata string the source group committed with its offset (MM2's
  `Checkpoint.metadata`, from the source `OffsetAndMetadata`), "" when there is none; the offsets written to the
  target carry it too (`CheckpointStore.converted_metadata`).
- `offsets_to_sync` is `syncGroupOffset` with `refreshIdleConsumerGroupOffset`: translated offsets are written
  only for groups that are EMPTY on the target (or do not exist there yet), per partition only when the target
  has no offset or a lower one: a target group never moves backwards. A group with members on the target is
  never written (MM2 tries and lets the broker refuse; kmirror does not try).

What this module must not do: import a Kafka or Spark client, or do any I/O. Values in, values out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from reconciler.core.mm2.wire import Checkpoint, OffsetSync, TopicPartition

__all__ = [
    "WRITABLE_STATES",
    "CheckpointStore",
    "GroupOffsetsLike",
    "TranslatedOffset",
    "Translator",
    "checkpoints_for_group",
    "checkpoints_from",
    "is_more_recent",
    "offsets_to_sync",
    "translate_group",
]

#: Target group states in which kmirror writes offsets: EMPTY (no members), DEAD (gone, as MM2's "new
#: consumer"); a group the target does not list at all is written too.
WRITABLE_STATES = frozenset({"EMPTY", "DEAD"})

#: (topic, partition) -> committed offset, as `KafkaAdmin.groups` reads them.
Offsets = Mapping[tuple[str, int], int]


class Translator(Protocol):
    """What translation needs: `OffsetSyncStore` (MM2's) or `history.SyncHistory` (dense, kmirror's)."""

    def translate_downstream(self, topic_partition: TopicPartition, upstream_offset: int) -> int | None: ...

    def syncs_for(self, topic_partition: TopicPartition) -> tuple[OffsetSync, ...]: ...


class GroupOffsetsLike(Protocol):
    """A consumer group as read from a cluster (`reconciler.live.model.GroupInfo` fits)."""

    @property
    def state(self) -> str: ...

    @property
    def offsets(self) -> Offsets: ...


@dataclass(frozen=True, slots=True)
class TranslatedOffset:
    """One committed source offset and its translation on the target (None: no offset-sync answers yet)."""

    source_topic: str
    partition: int
    source_offset: int
    target_topic: str
    target_offset: int | None


def translate_group(
    offsets: Offsets,
    store: Translator,
    *,
    remote_topic: Callable[[str], str],
    replicated: Callable[[str], bool],
) -> list[TranslatedOffset]:
    """Every committed offset of a group on a replicated topic, translated; sorted by topic and partition."""
    out = []
    for (topic, partition), offset in sorted(offsets.items()):
        if offset < 0 or not replicated(topic):
            continue
        downstream = store.translate_downstream(TopicPartition(topic, partition), offset)
        out.append(TranslatedOffset(topic, partition, offset, remote_topic(topic), downstream))
    return out


def is_more_recent(checkpoint: Checkpoint, last: Checkpoint | None) -> bool:
    """MM2's `checkpointIsMoreRecent`: first, upstream rewind, or downstream advance."""
    if last is None:
        return True
    if checkpoint.upstream_offset < last.upstream_offset:
        return True
    return checkpoint.downstream_offset > last.downstream_offset


def checkpoints_for_group(
    group: str,
    offsets: Offsets,
    store: Translator,
    last: Mapping[TopicPartition, Checkpoint],
    *,
    remote_topic: Callable[[str], str],
    replicated: Callable[[str], bool],
    metadata: Mapping[tuple[str, int], str] | None = None,
) -> list[Checkpoint]:
    """The checkpoints to emit for one group now (MM2's `checkpointsForGroup`); `last` is what was emitted."""
    translated = translate_group(offsets, store, remote_topic=remote_topic, replicated=replicated)
    return checkpoints_from(group, translated, last, metadata)


def checkpoints_from(
    group: str,
    translated: Iterable[TranslatedOffset],
    last: Mapping[TopicPartition, Checkpoint],
    metadata: Mapping[tuple[str, int], str] | None = None,
) -> list[Checkpoint]:
    """`checkpoints_for_group` on offsets already translated: drop the unanswered, keep the more recent."""
    out = []
    for t in translated:
        if t.target_offset is None or t.target_offset < 0:
            continue
        meta = (metadata or {}).get((t.source_topic, t.partition), "")
        cp = Checkpoint(group, t.target_topic, t.partition, t.source_offset, t.target_offset, meta)
        if is_more_recent(cp, last.get(cp.topic_partition)):
            out.append(cp)
    return out


class CheckpointStore:
    """The latest checkpoint per group and target partition (MM2's `CheckpointStore`), fed in log order.

    Loaded from the checkpoints topic when the checkpointer starts, so "only forward" holds across restarts.
    Not thread-safe; one checkpointer owns it.
    """

    def __init__(self, checkpoints: Iterable[Checkpoint] = ()) -> None:
        self._latest: dict[str, dict[TopicPartition, Checkpoint]] = {}
        self.update(checkpoints)

    def update(self, checkpoints: Iterable[Checkpoint]) -> None:
        for cp in checkpoints:
            self._latest.setdefault(cp.group, {})[cp.topic_partition] = cp

    def remove_group(self, group: str) -> None:
        self._latest.pop(group, None)

    def get(self, group: str) -> Mapping[TopicPartition, Checkpoint]:
        return self._latest.get(group, {})

    def groups(self) -> frozenset[str]:
        return frozenset(self._latest)

    def __iter__(self) -> Iterator[Checkpoint]:
        for per_group in self._latest.values():
            yield from per_group.values()

    def __len__(self) -> int:
        return sum(len(v) for v in self._latest.values())

    def converted_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        """group -> {(target topic, partition): translated offset} (MM2's `computeConvertedUpstreamOffset`)."""
        return {
            g: {(tp.topic, tp.partition): cp.downstream_offset for tp, cp in per_group.items()}
            for g, per_group in self._latest.items()
        }

    def converted_metadata(self, group: str) -> dict[tuple[str, int], str]:
        """{(target topic, partition): metadata} of a group's latest checkpoints, the non-empty ones.

        MM2 writes a checkpoint's `offsetAndMetadata()` (translated offset and the source commit's metadata)
        when it syncs group offsets; this is the metadata half.
        """
        return {(tp.topic, tp.partition): cp.metadata for tp, cp in self.get(group).items() if cp.metadata}


def offsets_to_sync(
    converted: Mapping[str, Mapping[tuple[str, int], int]],
    target_groups: Mapping[str, GroupOffsetsLike],
) -> dict[str, dict[tuple[str, int], int]]:
    """Per group, the target offsets to write: only groups EMPTY (or absent) on the target, only forward."""
    result: dict[str, dict[tuple[str, int], int]] = {}
    for group, offsets in sorted(converted.items()):
        current = target_groups.get(group)
        if current is not None and current.state not in WRITABLE_STATES:
            continue  # members are consuming on the target: its offsets are theirs
        have = current.offsets if current is not None else {}
        todo = {tp: off for tp, off in offsets.items() if off >= 0 and (tp not in have or have[tp] < off)}
        if todo:
            result[group] = dict(sorted(todo.items()))
    return result
