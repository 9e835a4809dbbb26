"""Which live things a desired state concerns: the source groups a flow translates, the client ids a throttle sets.

Both the live-state reader (what to read) and the planner (what to plan) ask these questions; the answers live
here, below both, so that the reader never imports the planner.

Pure: values in, values out. Must not: import a client, the planner or an adapter.
"""

from __future__ import annotations

from typing import NamedTuple

from reconciler.live.model import GroupInfo, LiveState
from reconciler.spec.models import DesiredState, FlowSpec

#: The Kafka quota names kmirror sets: the source consumer's fetch rate and the target producer's produce rate.
CONSUMER_BYTE_RATE = "consumer_byte_rate"
PRODUCER_BYTE_RATE = "producer_byte_rate"


class ThrottledClient(NamedTuple):
    """One client id a throttled flow's job uses, on one cluster, and the quota that throttles it."""

    cluster: str
    client_id: str
    quota: str


def flow_source_groups(flow: FlowSpec, live: LiveState) -> dict[str, GroupInfo]:
    """Source groups passing the flow's group filter that have committed offsets on topics it replicates."""
    heartbeats = flow.policy().heartbeats_topic()
    groups = live.clusters[flow.source].groups
    return {
        g: info
        for g, info in sorted(groups.items())
        if flow.group_matches(g) and any(flow.topic_matches(t) and t != heartbeats for t, _ in info.offsets)
    }


def throttled_clients(desired: DesiredState, flow: FlowSpec) -> list[ThrottledClient]:
    """The client ids a throttled flow's job uses (none when the flow has no throttle): the same ids the job is told."""
    if flow.replication.throttle is None:
        return []
    ids = desired.flow_effective_spec(flow.name)["client_ids"]
    return [
        ThrottledClient(flow.source, str(ids["source"]), CONSUMER_BYTE_RATE),
        ThrottledClient(flow.target, str(ids["target"]), PRODUCER_BYTE_RATE),
    ]
