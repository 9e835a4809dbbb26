"""The job's writers of MM2's internal topics: offset-syncs after each batch, heartbeats on a timer.

`OffsetSyncPublisher` feeds `OffsetSyncEmitter` (MM2's emission rule) with, per source partition a batch
touched, the offset of the last copied source record and the target offset it landed at, and produces the
syncs it returns (plus, every `delayed_interval`, the held ones) into the flow's offset-syncs topic in MM2's
wire format. `Heartbeater` is a daemon thread producing `Heartbeat(source, target, now)` into the source's
`heartbeats` topic; the job's own subscription replicates it, so `<source>.heartbeats` on the target proves
the path end to end.

`ensure_internal_topics` creates the topics these write to when they are missing (one partition, compacted:
the planner's rule), so a job deployed by hand works too.

Must not: decide which offsets map to which (the job computes the pairs), or write anything else.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import Producer

from reconciler.adapters.kafka_admin import KafkaAdmin
from reconciler.errors import KmirrorError
from reconciler.mm2.wire import Heartbeat, OffsetSync, TopicPartition
from reconciler.offsets.emitter import OffsetSyncEmitter
from reconciler.plan.topics import COMPACT

log = logging.getLogger(__name__)

_PRODUCER_DEFAULTS = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}


def ensure_internal_topics(admin: KafkaAdmin, names: Iterable[str]) -> None:
    """Create each topic (1 partition, compacted, broker replication factor) unless it exists."""
    existing = admin.topics()
    missing = [(n, 1, -1, COMPACT) for n in sorted(set(names)) if n not in existing]
    for outcome in admin.create_topics(missing):
        if not outcome.ok:
            raise KmirrorError(f"cannot create internal topic {outcome.key} on {admin.cluster}: {outcome.message}")
        log.info("created internal topic %s on %s", outcome.key, admin.cluster)


def _producer(config: Mapping[str, Any], client_id: str) -> Any:
    return Producer({**_PRODUCER_DEFAULTS, **config, "client.id": client_id})


class OffsetSyncPublisher:
    """Offset-syncs of one flow: MM2's emission rule, produced into `topic` on the cluster `config` names."""

    def __init__(
        self,
        config: Mapping[str, Any],
        topic: str,
        *,
        offset_lag_max: int,
        delayed_interval: float = 5.0,
        client_id: str = "kmirror-offset-syncs",
    ) -> None:
        self.topic = topic
        self.delayed_interval = delayed_interval
        self._emitter = OffsetSyncEmitter(offset_lag_max)
        self._producer = _producer(config, client_id)
        self._lock = threading.Lock()
        self._delayed_at = time.monotonic()
        self._errors: list[str] = []
        self.emitted = 0

    def observe(self, pairs: Mapping[tuple[str, int], Sequence[tuple[int, int]]]) -> int:
        """Per source partition, in order: (copied source record's offset, the target offset it landed at).

        Returns the number of syncs produced.
        """
        with self._lock:
            syncs: list[OffsetSync] = []
            for (topic, partition), landed in sorted(pairs.items()):
                tp = TopicPartition(topic, partition)
                syncs.extend(s for up, down in landed if (s := self._emitter.observe_batch(tp, up, down)))
            self._send(syncs)
            return len(syncs)

    def flush_delayed(self, *, force: bool = False) -> int:
        """Produce the held syncs (MM2's periodic promotion) if `delayed_interval` passed, or now with `force`."""
        with self._lock:
            if not force and time.monotonic() - self._delayed_at < self.delayed_interval:
                return 0
            self._delayed_at = time.monotonic()
            syncs = self._emitter.take_delayed()
            self._send(syncs)
            return len(syncs)

    def close(self) -> None:
        self.flush_delayed(force=True)
        with self._lock:
            self._producer.flush(30)

    def _send(self, syncs: list[OffsetSync]) -> None:
        if not syncs:
            return
        for s in syncs:
            self._producer.produce(self.topic, key=s.key_bytes(), value=s.value_bytes(), on_delivery=self._delivered)
        remaining = self._producer.flush(30)
        errors, self._errors = self._errors, []
        if remaining or errors:
            # A lost sync only makes translation coarser until the next one; it must not stop replication.
            log.warning("offset-syncs to %s: %d undelivered, errors: %s", self.topic, remaining, errors[:3])
        self.emitted += len(syncs) - remaining - len(errors)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._errors.append(str(err))


class Heartbeater(threading.Thread):
    """Produces a heartbeat every `interval` seconds until `stop()`."""

    def __init__(self, config: Mapping[str, Any], topic: str, source: str, target: str, interval: float) -> None:
        super().__init__(name="kmirror-heartbeats", daemon=True)
        self.topic = topic
        self.source = source
        self.target = target
        self.interval = interval
        self._producer = _producer(config, "kmirror-heartbeats")
        self._stopped = threading.Event()
        self.sent = 0

    def run(self) -> None:
        while not self._stopped.is_set():
            beat = Heartbeat(self.source, self.target, int(time.time() * 1000))
            try:
                self._producer.produce(
                    self.topic, key=beat.key_bytes(), value=beat.value_bytes(), timestamp=beat.timestamp
                )
                self._producer.poll(0)
                self.sent += 1
            except Exception as exc:  # a full queue or a broker hiccup: the next beat tries again
                log.warning("heartbeat to %s failed: %s", self.topic, exc)
            self._stopped.wait(self.interval)

    def stop(self) -> None:
        self._stopped.set()
        self.join(timeout=self.interval + 5)
        self._producer.flush(10)
