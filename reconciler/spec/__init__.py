"""The desired state: models, loading with locations, secrets, semantic validation, digests.

Entry points: `load(path) -> LoadedSpec` / `load_desired_state(path) -> DesiredState` (raise `SpecError` with
every located issue), `DesiredState` and its parts, `kafka_client_config(cluster)` for clients, and
`DesiredState.flow_digest(name)` for redeploy detection.

Pure: no Kafka or Spark imports; the loader reads the one file it is given, secrets are read only at use.
"""

from reconciler.spec.client_config import java_client_properties, kafka_client_config
from reconciler.spec.digest import flow_digest, flow_effective_spec, spec_digest
from reconciler.spec.issues import SecretResolutionError, SpecError, SpecIssue
from reconciler.spec.loader import LoadedSpec, load, load_desired_state, load_text
from reconciler.spec.models import (
    ClusterSpec,
    DesiredState,
    FlowSpec,
    GroupFilter,
    HeartbeatsSpec,
    NamingSpec,
    OffsetsSpec,
    PruneSpec,
    ReplicationSpec,
    SparkSpec,
    StateSpec,
    SyncSpec,
    TopicDefaults,
    TopicFilter,
)
from reconciler.spec.secrets import SecretRef
from reconciler.spec.validate import validate_state

__all__ = [
    "ClusterSpec",
    "DesiredState",
    "FlowSpec",
    "GroupFilter",
    "HeartbeatsSpec",
    "LoadedSpec",
    "NamingSpec",
    "OffsetsSpec",
    "PruneSpec",
    "ReplicationSpec",
    "SecretRef",
    "SecretResolutionError",
    "SparkSpec",
    "SpecError",
    "SpecIssue",
    "StateSpec",
    "SyncSpec",
    "TopicDefaults",
    "TopicFilter",
    "flow_digest",
    "flow_effective_spec",
    "java_client_properties",
    "kafka_client_config",
    "load",
    "load_desired_state",
    "load_text",
    "spec_digest",
    "validate_state",
]
