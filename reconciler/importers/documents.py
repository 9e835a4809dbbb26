"""The shape of the desired-state document an import writes: one TypedDict per section of `kmirror.yaml`.

An import writes only what the MM2 configuration says (kmirror's defaults fill in the rest when the file is
loaded), in the order the sections are written, so the sections are TypedDicts (plain dicts for the YAML writer,
checked keys for the translation), not the spec models, which would write every default. `kmirror validate` reads
the result with `reconciler.spec.models.DesiredState`.

Must not: import anything of kmirror (the spec models are the loader's; this is the importer's output).
"""

from __future__ import annotations

from typing import Literal, Required, TypedDict


class ClusterDoc(TypedDict, total=False):
    bootstrap_servers: Required[str]
    #: librdkafka/Java client properties; secrets as `${env:..}` references.
    client: dict[str, str]


class SelectorDoc(TypedDict, total=False):
    include: list[str]
    exclude: list[str]


class NamingDoc(TypedDict, total=False):
    policy: Required[Literal["prefix", "identity"]]
    separator: str


class TopicDefaultsDoc(TypedDict):
    replication_factor: int


class SyncDoc(TypedDict, total=False):
    configs: Required[bool]
    acls: Required[bool]
    group_offsets: Required[bool]
    config_exclude: list[str]


class ReplicationDoc(TypedDict, total=False):
    start_from: Literal["latest"]
    producer: dict[str, str]
    consumer: dict[str, str]


class OffsetsDoc(TypedDict, total=False):
    offset_lag_max: int
    checkpoint_interval: str
    emit_checkpoints: bool
    syncs_location: str


class HeartbeatsDoc(TypedDict, total=False):
    enabled: Required[bool]
    interval: str


class FlowDoc(TypedDict, total=False):
    name: Required[str]
    source: Required[str]
    target: Required[str]
    enabled: bool
    topics: SelectorDoc
    groups: SelectorDoc
    naming: NamingDoc
    topic_defaults: TopicDefaultsDoc
    sync: SyncDoc
    replication: ReplicationDoc
    offsets: OffsetsDoc
    heartbeats: HeartbeatsDoc


class StateDoc(TypedDict):
    cluster: str


class DesiredStateDoc(TypedDict):
    version: int
    clusters: dict[str, ClusterDoc]
    state: StateDoc
    flows: list[FlowDoc]
