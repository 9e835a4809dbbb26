"""The job's driver-side writer of MM2's internal topics: heartbeats on a timer (offset-syncs are written by the
sink producer's interceptor, see `interceptor.py`).

`Heartbeater` is a daemon thread producing `Heartbeat(source, target, now)` into the source's
`heartbeats` topic; the job's own subscription replicates it, so `<source>.heartbeats` on the target proves
the path end to end.

`ensure_internal_topics` creates the topics these write to when they are missing (one partition, compacted:
the planner's rule), so a job deployed by hand works too.

Must not: write anything else.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Producer

from reconciler.core.mm2.wire import Heartbeat
from reconciler.core.topic_rules import COMPACT, durable_configs, internal_replication_factor
from reconciler.errors import KmirrorError
from reconciler.kafka_clients.admin import KafkaAdmin
from reconciler.spec.client_config import ClientConfig

log = logging.getLogger(__name__)

_PRODUCER_DEFAULTS = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}


def ensure_internal_topics(admin: KafkaAdmin, names: Iterable[str]) -> None:
    """Create each topic unless it exists, as the planner does: 1 partition, compacted, min(3, brokers) replicas
    and min.insync.replicas to match (losing one broker of three loses nothing)."""
    existing = admin.topics()
    rf = internal_replication_factor(admin.brokers)
    configs = {**COMPACT, **durable_configs(rf)}
    missing = [(n, 1, rf, configs) for n in sorted(set(names)) if n not in existing]
    for outcome in admin.create_topics(missing):
        if not outcome.ok:
            raise KmirrorError(f"cannot create internal topic {outcome.key} on {admin.cluster}: {outcome.message}")
        log.info("created internal topic %s on %s", outcome.key, admin.cluster)
    # Listed from here on (the job sizes its task slots from the topics it lists next): wait for the metadata.
    deadline = time.monotonic() + 15
    while missing and time.monotonic() < deadline and not {n for n, *_ in missing} <= set(admin.topics()):
        time.sleep(0.2)


def _producer(config: ClientConfig, client_id: str) -> Any:
    return Producer({**_PRODUCER_DEFAULTS, **config, "client.id": client_id})


class Heartbeater(threading.Thread):
    """Produces a heartbeat every `interval` seconds until `stop()`."""

    def __init__(self, config: ClientConfig, topic: str, source: str, target: str, interval: float) -> None:
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
