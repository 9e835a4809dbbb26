"""Reading and writing MM2's offset-syncs and checkpoints topics: the consumer/producer side of offset translation.

`InternalTopicReader` reads a one-partition internal topic from its start and, on every `read_to_end()`, up to
the end offset it had when asked (compaction gaps and a topic that does not exist yet are handled).
`OffsetSyncReader` feeds a `SyncHistory` (MM2's `OffsetSyncStore` plus every sync since the last rewind, for
precise translation of groups far behind) with the offset-syncs topic (MM2's `OffsetSyncStore.start()`:
nothing is translated until the first read reached the end); `read_checkpoints` loads the latest checkpoint per
group and partition from `<source>.checkpoints.internal`; `CheckpointWriter` produces checkpoints in MM2's
wire format. Records that do not decode are skipped and counted, never acted on.

Must not: decide what to translate, emit or write (that is `reconciler.core.offsets`), or commit consumer offsets.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from reconciler.core.mm2.wire import Checkpoint, OffsetSync
from reconciler.core.offsets.checkpoints import CheckpointStore
from reconciler.core.offsets.history import SyncHistory
from reconciler.core.offsets.translation import OffsetSyncStore
from reconciler.errors import ClusterUnreachableError, WireFormatError
from reconciler.spec.client_config import ClientConfig

log = logging.getLogger(__name__)

_PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}


@dataclass(frozen=True)
class RawRecord:
    key: bytes | None
    value: bytes | None
    timestamp: int


class InternalTopicReader:
    """Reads partition 0 of `topic` incrementally; `read_to_end()` returns the records it had not returned."""

    def __init__(self, config: ClientConfig, topic: str, *, timeout: float = 30.0, cluster: str = "") -> None:
        self.topic = topic
        self.timeout = timeout
        self.cluster = cluster or str(config.get("bootstrap.servers", "?"))
        self._consumer = Consumer(
            {
                **config,
                "group.id": f"kmirror-reader-{uuid.uuid4().hex[:8]}",  # never committed: offsets are not stored
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": False,
                "isolation.level": "read_committed",
                "log_level": 0,
            }
        )
        self._assigned = False
        self._position = 0

    @property
    def exists(self) -> bool:
        return self._assigned

    def read_to_end(self) -> list[RawRecord]:
        """Records from the last position to the end offset as of now; [] while the topic does not exist."""
        tp = TopicPartition(self.topic, 0)
        if not self._assigned:
            try:
                meta = self._consumer.list_topics(self.topic, timeout=self.timeout)
            except KafkaException as exc:
                raise ClusterUnreachableError(f"cannot read {self.topic} on {self.cluster}: {exc}") from exc
            topic = meta.topics.get(self.topic)
            if topic is None or topic.error is not None or 0 not in topic.partitions:
                return []
            self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            self._assigned = True
        try:
            low, high = self._consumer.get_watermark_offsets(tp, timeout=self.timeout, cached=False)
        except KafkaException as exc:
            raise ClusterUnreachableError(f"cannot read {self.topic} on {self.cluster}: {exc}") from exc
        out: list[RawRecord] = []
        if high <= max(low, self._position):
            return out
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for msg in self._consumer.consume(num_messages=10_000, timeout=0.2):
                if msg.error():
                    log.warning("reading %s on %s: %s", self.topic, self.cluster, msg.error())
                    continue
                out.append(RawRecord(msg.key(), msg.value(), msg.timestamp()[1]))
                self._position = msg.offset() + 1
            if self._position >= high:
                return out
            position = self._consumer.position([tp])[0].offset
            if position >= high:  # compaction or transaction markers left no record at the end
                self._position = position
                return out
        raise ClusterUnreachableError(
            f"reading {self.topic} on {self.cluster} did not reach offset {high} within {self.timeout:.0f}s "
            f"(at {self._position})"
        )

    def close(self) -> None:
        self._consumer.close()


class OffsetSyncReader:
    """The offset-syncs topic, kept read into an `OffsetSyncStore` (call `refresh()` before translating)."""

    def __init__(
        self,
        config: ClientConfig,
        topic: str,
        *,
        initialization_must_read_to_end: bool = True,
        timeout: float = 30.0,
        cluster: str = "",
    ) -> None:
        self.store = SyncHistory(OffsetSyncStore(initialization_must_read_to_end=initialization_must_read_to_end))
        self._reader = InternalTopicReader(config, topic, timeout=timeout, cluster=cluster)
        self.undecodable = 0
        self.read = 0

    @property
    def topic(self) -> str:
        return self._reader.topic

    @property
    def exists(self) -> bool:
        return self._reader.exists

    def refresh(self) -> SyncHistory:
        for r in self._reader.read_to_end():
            if r.key is None or r.value is None:
                continue
            try:
                self.store.update(OffsetSync.from_record(r.key, r.value))
                self.read += 1
            except WireFormatError as exc:
                self.undecodable += 1
                log.warning("skipping an offset-sync of %s that does not decode: %s", self.topic, exc)
        self.store.mark_read_to_end()
        return self.store

    def close(self) -> None:
        self._reader.close()


def read_offset_syncs(config: ClientConfig, topic: str, *, timeout: float = 30.0) -> SyncHistory | None:
    """The whole offset-syncs topic in a store (MM2's startup read); None when the topic does not exist."""
    reader = OffsetSyncReader(config, topic, initialization_must_read_to_end=False, timeout=timeout)
    try:
        store = reader.refresh()
        return store if reader.exists else None
    finally:
        reader.close()


@dataclass(frozen=True)
class StoredCheckpoint:
    checkpoint: Checkpoint
    timestamp: int


def read_checkpoints(
    config: ClientConfig, topic: str, *, timeout: float = 30.0
) -> tuple[CheckpointStore, dict[tuple[str, str, int], StoredCheckpoint], bool]:
    """The latest checkpoint per (group, topic, partition) of a checkpoints topic, with record timestamps.

    The last item says whether the topic exists and was read (MM2 loads its offset-syncs more cautiously when
    it could not load its checkpoints).
    """
    reader = InternalTopicReader(config, topic, timeout=timeout)
    latest: dict[tuple[str, str, int], StoredCheckpoint] = {}
    try:
        records = reader.read_to_end()
        exists = reader.exists
    finally:
        reader.close()
    for r in records:
        if r.key is None:
            continue
        try:
            if r.value is None:
                continue
            cp = Checkpoint.from_record(r.key, r.value)
        except WireFormatError as exc:
            log.warning("skipping a checkpoint of %s that does not decode: %s", topic, exc)
            continue
        latest[(cp.group, cp.topic, cp.partition)] = StoredCheckpoint(cp, r.timestamp)
    return CheckpointStore(s.checkpoint for s in latest.values()), latest, exists


class CheckpointWriter:
    """Produces checkpoints (MM2's wire format) into the checkpoints topic; `write` returns once delivered."""

    def __init__(self, config: ClientConfig, topic: str, *, client_id: str = "kmirror-checkpoints") -> None:
        self.topic = topic
        self._producer = Producer({**_PRODUCER, **config, "client.id": client_id, "log_level": 0})
        self._errors: list[str] = []

    def write(self, checkpoints: Iterable[Checkpoint], timestamp: int | None = None) -> int:
        n = 0
        for cp in checkpoints:
            kwargs: dict[str, int] = {"timestamp": timestamp} if timestamp is not None else {}
            while True:
                try:
                    self._producer.produce(
                        self.topic, key=cp.key_bytes(), value=cp.value_bytes(), on_delivery=self._delivered, **kwargs
                    )
                    break
                except BufferError:  # local queue full: let deliveries drain
                    self._producer.poll(0.1)
            n += 1
        remaining = self._producer.flush(30)
        errors, self._errors = self._errors, []
        if remaining or errors:
            raise ClusterUnreachableError(
                f"checkpoints to {self.topic}: {remaining} undelivered, errors: {'; '.join(errors[:3])}"
            )
        return n

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._errors.append(str(err))

    def close(self) -> None:
        self._producer.flush(10)
