"""Replication lag of a flow per source partition: committed source records the offset-syncs do not show as copied.

The replication job writes an exact offset-sync for the last record it copied of every partition (its delayed
syncs, every few seconds), so a partition is caught up when no committed record follows its newest sync's
upstream offset. Transaction markers and compaction gaps at the end are not records, so a short read
(read_committed) confirms the remainder before calling it lag. `kmirror cutover` waits for lag 0 (its step 1);
`kmirror plan` and the cutover's exact translation leave a partition with lag conservative.

Must not: write anything or commit an offset (its consumer never joins or commits a group).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping

from confluent_kafka import Consumer, TopicPartition

from reconciler.core.mm2.wire import TopicPartition as Tp
from reconciler.core.offsets.checkpoints import Translator
from reconciler.kafka_clients.admin import KafkaAdmin
from reconciler.spec.client_config import ClientConfig
from reconciler.spec.models import DesiredState, FlowSpec

__all__ = ["replication_lag"]


def replication_lag(
    desired: DesiredState,
    flow: FlowSpec,
    admin: KafkaAdmin,
    store: Translator | None,
    timeout: float = 10.0,
    partitions: Iterable[tuple[str, int]] | None = None,
) -> dict[tuple[str, int], int]:
    """Source records not yet copied, per replicated source partition (heartbeats left out), or per partition of
    `partitions` when given."""
    if partitions is None:
        heartbeats = flow.policy().heartbeats_topic()
        partitions = [
            (t, p)
            for t, meta in admin.topics().items()
            if t != heartbeats and flow.topic_matches(t)
            for p in range(meta.partitions)
        ]
    partitions = sorted(set(partitions))
    if not partitions:
        return {}
    start, end = admin.start_offsets(partitions), admin.end_offsets(partitions)
    lag: dict[tuple[str, int], int] = {}
    suspect: dict[tuple[str, int], int] = {}
    for tp in partitions:
        newest = store.syncs_for(Tp(*tp)) if store is not None else ()
        copied_to = max(start[tp], newest[0].upstream_offset + 1 if newest else start[tp])
        lag[tp] = 0
        if end[tp] > copied_to:
            suspect[tp] = copied_to
    if suspect:
        has_records = _committed_records_after(desired.client_config(flow.source), suspect, end, timeout)
        for tp, first in suspect.items():
            lag[tp] = end[tp] - first if tp in has_records else 0
    return lag


def _committed_records_after(
    config: ClientConfig,
    starts: Mapping[tuple[str, int], int],
    ends: Mapping[tuple[str, int], int],
    timeout: float,
) -> set[tuple[str, int]]:
    """The partitions that hold a committed record in [start, end) (read_committed; markers are not records)."""
    consumer = Consumer(
        {
            **config,
            "group.id": f"kmirror-lag-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "log_level": 0,
        }
    )
    found: set[tuple[str, int]] = set()
    pending = set(starts)
    try:
        consumer.assign([TopicPartition(t, p, o) for (t, p), o in starts.items()])
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                if msg.error():
                    continue
                tp = (msg.topic(), msg.partition())
                if tp in pending and msg.offset() < ends[tp]:
                    found.add(tp)
                    pending.discard(tp)
            positions = consumer.position([TopicPartition(t, p) for t, p in pending])
            for pos in positions:
                if pos.offset >= ends[(pos.topic, pos.partition)]:
                    pending.discard((pos.topic, pos.partition))
        return found | pending  # undecided (an open transaction): still lag
    finally:
        consumer.close()
