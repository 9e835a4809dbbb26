"""LiveState: topics, explicitly set configs, ACLs, consumer groups and client quotas of every cluster the spec names.

Plain frozen dataclasses, cheap to build for 10,000 topics, with no client objects inside: the planner takes
these values and never a Kafka client. `None` means "could not be read" (for ACLs: no authorizer), which the
planner reports as a warning instead of planning deletes or creates from a blind spot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from reconciler.errors import Diagnostic

if TYPE_CHECKING:
    from reconciler.core.offsets.checkpoints import Translator
    from reconciler.core.offsets.exact import ExactTranslation
    from reconciler.live.schemas import RegistryState

Permission = Literal["ALLOW", "DENY"]

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class TopicInfo:
    """A topic: partition count, replication factor, and only the configs set explicitly on it."""

    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    #: True when the log holds records (some partition's end offset is above its start offset); None: not read.
    has_records: bool | None = None


@dataclass(frozen=True, order=True)
class AclEntry:
    """One ACL binding, in the shape kmirror compares: always a resource of some type and pattern."""

    resource_type: str  # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ...
    pattern_type: str  # LITERAL, PREFIXED
    resource_name: str
    principal: str
    host: str
    operation: str  # READ, WRITE, DESCRIBE, ALL, ...
    permission: Permission


@dataclass(frozen=True)
class GroupInfo:
    """A consumer group: its state (EMPTY, STABLE, ...) and committed offsets per (topic, partition)."""

    group_id: str
    state: str
    offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)
    #: The committed offsets' metadata strings (OffsetAndMetadata.metadata), only the non-empty ones.
    metadata: Mapping[tuple[str, int], str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterState:
    name: str
    topics: Mapping[str, TopicInfo]
    acls: tuple[AclEntry, ...] | None  # None: the cluster has no authorizer (or denied us DESCRIBE)
    groups: Mapping[str, GroupInfo] = field(default_factory=dict)
    #: Brokers in the cluster's metadata; None: not read.
    brokers: int | None = None
    #: Client quotas per client id ({quota name: value}), read only for the client ids a throttled flow names or
    #: kmirror recorded; an id without quotas is absent. None: not read (no such id here, or the read failed).
    quotas: Mapping[str, Mapping[str, float]] | None = None


@dataclass(frozen=True)
class LiveState:
    clusters: Mapping[str, ClusterState]
    #: What could not be read, each about its resource when it has one (a `Diagnostic` with its address).
    warnings: tuple[Diagnostic, ...] = ()
    #: Admin round trips it took to read, per cluster (for the scale benchmark and --debug).
    round_trips: Mapping[str, int] = field(default_factory=dict)
    #: Per flow name, its offset-syncs read to the end (only for flows that sync group offsets). A flow that is
    #: missing here has no offset-syncs topic yet: nothing can be translated.
    offset_syncs: Mapping[str, Translator] = field(default_factory=dict)
    #: Per flow name, each committed source offset's exact or conservative translation and why (the records read
    #: by `reconciler.adapters.group_offsets.with_exact_offsets`). A flow missing here was not read.
    exact_offsets: Mapping[str, tuple[ExactTranslation, ...]] = field(default_factory=dict)
    #: Per cluster, what its schema registry holds (only clusters a flow with sync.schemas names, and only the
    #: subjects of its topics). A cluster missing here was not read.
    schemas: Mapping[str, RegistryState] = field(default_factory=dict)

    def cluster(self, name: str) -> ClusterState:
        return self.clusters[name]
