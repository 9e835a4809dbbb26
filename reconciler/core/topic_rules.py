"""The rules every internal topic follows, wherever it is created: by the planner, the state store or the job.

kmirror's internal topics (state, heartbeats, checkpoints, offset-syncs) get min(3, brokers) replicas and, from 3
replicas up, `min.insync.replicas` RF - 1, so losing one broker of three loses nothing; MM2's compacted topics
(checkpoints, offset-syncs) are compacted here too. The rules that need a flow (which topics it replicates, which
configs it syncs, where its offset-syncs live) are methods of the flow (`reconciler.spec.models.FlowSpec`).

Must not: import a client, the planner, the job or the spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: The config of a compacted internal topic (MM2's checkpoints and offset-syncs).
COMPACT: Mapping[str, str] = MappingProxyType({"cleanup.policy": "compact"})

#: Replicas of kmirror's internal topics (state, heartbeats, checkpoints, offset-syncs) when the cluster has the
#: brokers: losing one broker of three loses nothing (and MM2's own internal topics default to 3 too).
INTERNAL_REPLICATION_FACTOR = 3


def internal_replication_factor(brokers: int | None) -> int:
    """min(3, brokers); -1 (the broker's default) when the broker count is not known."""
    return -1 if not brokers else min(INTERNAL_REPLICATION_FACTOR, brokers)


def durable_configs(replication_factor: int) -> dict[str, str]:
    """`min.insync.replicas` for an internal topic: RF - 1 from 3 replicas up (RF 3: 2), so acks=all writes survive
    one broker down and are never acknowledged by one replica alone; nothing for fewer replicas."""
    return {"min.insync.replicas": str(replication_factor - 1)} if replication_factor >= 3 else {}
