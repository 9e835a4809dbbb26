"""Consumer-group offset translation between clusters, MM2-compatible.

`translation` answers "where on the target should this group resume?" from offset-syncs (MM2's
OffsetSyncStore); `emitter` decides when the replication job writes an offset-sync (MM2's OffsetSyncWriter).
Both are pure: no Kafka or Spark client, no I/O.
"""

from reconciler.core.offsets.emitter import (
    OffsetSyncEmitter,
    PartitionSyncState,
    SyncDecision,
    SyncTrigger,
    decide_sync,
)
from reconciler.core.offsets.translation import SYNCS_PER_PARTITION, OffsetSyncStore

__all__ = [
    "SYNCS_PER_PARTITION",
    "OffsetSyncEmitter",
    "OffsetSyncStore",
    "PartitionSyncState",
    "SyncDecision",
    "SyncTrigger",
    "decide_sync",
]
