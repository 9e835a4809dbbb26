"""Canonical dumps and sha256 digests of the desired state, for redeploy detection and stale-plan checks.

The canonical form is `model_dump(mode="json")` with every default filled in, keys sorted, no whitespace.
Secrets appear as the references the user wrote (`${env:X}`), never resolved, so a digest changes when a
reference changes, not when a password rotates (rotation is the runner's concern, not the plan's).

`flow_effective_spec` is everything a flow's replication job runs with: the flow, its source and target
cluster specs and the Spark settings. Its digest changing means the job must be redeployed; `deepdiff` on two
effective specs names the fields that changed. A flow's `replication.throttle` value is left out of the digest:
brokers enforce it (client quotas), so changing it must not restart the job. What the job needs of it is
`client_ids`, present only when the flow is throttled: the ids its clients take so that the quotas name them
(`policy.client_ids`). Adding or removing a throttle therefore redeploys the job once; an unthrottled flow's spec
has no such key. A throttled flow's spec also carries the rate as `throttle` (bytes per second), outside the digest
(`effective_digest`): the job sizes its fetches from it when it starts (`spec.fetch_sizing`), so a changed rate
reaches the job at its next start and never causes one.

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reconciler.core.policy.client_ids import flow_client_ids

if TYPE_CHECKING:
    from reconciler.spec.models import DesiredState

DIGEST_PREFIX = "sha256:"


def canonical_json(value: Any) -> str:
    """Stable JSON text: sorted keys, compact separators, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest_of(value: Any) -> str:
    return DIGEST_PREFIX + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def flow_effective_spec(state: DesiredState, name: str) -> dict[str, Any]:
    """The job-relevant spec of flow `name`: the flow, the clusters it references, and `spark`."""
    flow = state.flow(name)
    clusters = {
        alias: state.clusters[alias].model_dump(mode="json")
        for alias in sorted({flow.source, flow.target})
        if alias in state.clusters
    }
    flow_form = flow.model_dump(mode="json", exclude={"replication": {"throttle"}})
    if not flow.sync.schemas:
        # Schema registries matter to a flow only when it syncs schemas: a flow that does not keeps the digest it had
        # before registries existed (and is not redeployed when one is added to its clusters).
        for form in clusters.values():
            form.pop("schema_registry", None)
        for key in ("schemas", "schema_subjects_exclude"):
            flow_form["sync"].pop(key, None)
    # The application a flow runs in is the job's (its digest changes when the flow moves), written into the Spark
    # settings as the effective one; a flow in its own application (the default) keeps the digest it had before
    # applications existed, so an upgrade redeploys nothing.
    flow_form.pop("spark", None)
    spark_form = state.spark.model_dump(mode="json")
    spark_form.pop("application", None)
    application = state.application_of(flow)
    if application is not None:
        spark_form["application"] = application
    effective: dict[str, Any] = {
        "flow": flow_form,
        "clusters": clusters,
        "spark": spark_form,
    }
    if flow.replication.throttle is not None:
        consumer_id, producer_id = (
            flow.replication.consumer.get("client.id"),
            flow.replication.producer.get("client.id"),
        )
        effective["client_ids"] = flow_client_ids(state.state.topic, flow.name, consumer_id, producer_id)
        effective[THROTTLE_KEY] = int(flow.replication.throttle)
    return effective


#: The effective spec's key for a throttled flow's rate (bytes per second): what the job sizes its fetches by,
#: left out of the digest.
THROTTLE_KEY = "throttle"


def effective_digest(effective: Mapping[str, Any]) -> str:
    """`sha256:<hex>` of an effective spec without its `throttle` rate (a changed rate redeploys nothing)."""
    return digest_of({key: value for key, value in effective.items() if key != THROTTLE_KEY})


def flow_digest(state: DesiredState, name: str) -> str:
    """`sha256:<hex>` of `flow_effective_spec(state, name)`, its throttle rate left out (`effective_digest`)."""
    return effective_digest(flow_effective_spec(state, name))


def spec_digest(state: DesiredState) -> str:
    """`sha256:<hex>` of the whole desired state (defaults filled in, secrets as references)."""
    return digest_of(state.model_dump(mode="json"))
