"""Reads the LiveState the planner needs from every cluster the desired state names, with few round trips.

Two phases, each run on all clusters at once: (1) topic metadata (one request per cluster); a topic kmirror
recorded that the metadata does not show is checked with the controller, and when the controller has it (a
burst of creates that the broker has not published yet) the reader waits for the metadata to show it instead
of reporting it deleted; (2) with the topic lists known, the explicit configs of exactly the topics that
matter (replicated source topics, their remote topics, internal and recorded topics) in batched
describe-configs requests, the ACLs where a flow syncs them, and whether unowned target topics already hold
records, and the client quotas of the client ids a throttled flow names or kmirror recorded (Kafka's Java Admin
client, so only when there is such an id: a quota that cannot be read is a warning, and the planner plans against
what kmirror recorded). Then the consumer groups and offset-syncs of the flows that sync group offsets, and whether
each committed offset translates exactly (records read within `exact_budget` seconds, `with_exact_offsets`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TypeVar

from reconciler.adapters.group_offsets import EXACT_BUDGET, with_exact_offsets, with_group_offsets
from reconciler.errors import Diagnostic
from reconciler.kafka_clients.admin import KafkaAdmin, TopicMeta
from reconciler.kafka_clients.client_quotas import ClientQuotaError
from reconciler.live.model import ClusterState, LiveState, TopicInfo
from reconciler.live.selection import throttled_clients
from reconciler.resources.addresses import Kind, topic_address
from reconciler.resources.recorded import RecordedState
from reconciler.spec.client_config import java_client_properties
from reconciler.spec.models import DesiredState

K = TypeVar("K")
V = TypeVar("V")


def clusters_in_use(desired: DesiredState) -> list[str]:
    names = {desired.state.cluster}
    for flow in desired.enabled_flows:
        names.update((flow.source, flow.target))
    return sorted(names)


def admins_for(desired: DesiredState, timeout: float) -> dict[str, KafkaAdmin]:
    return {
        name: KafkaAdmin(name, desired.client_config(name), timeout, java_properties=_java_properties(desired, name))
        for name in clusters_in_use(desired)
    }


def _java_properties(desired: DesiredState, name: str) -> Callable[[], dict[str, str]]:
    """The cluster's Java client properties, resolved when a client quota is read or set (secrets in memory only)."""
    return lambda: java_client_properties(desired.clusters[name], alias=name, base_dir=desired.base_dir)


def quota_client_ids(desired: DesiredState, recorded: RecordedState) -> dict[str, set[str]]:
    """Per cluster, the client ids whose quotas the planner compares: those of throttled flows, and recorded ones."""
    ids: dict[str, set[str]] = {}
    for flow in desired.enabled_flows:
        for client in throttled_clients(desired, flow):
            ids.setdefault(client.cluster, set()).add(client.client_id)
    for res in recorded.of_kind(Kind.QUOTA):
        ids.setdefault(str(res.attributes.get("cluster")), set()).add(str(res.attributes.get("client_id")))
    return ids


def read_live_state(
    desired: DesiredState,
    recorded: RecordedState,
    admins: dict[str, KafkaAdmin] | None = None,
    timeout: float = 30.0,
    exact_budget: float | None = EXACT_BUDGET,
) -> LiveState:
    admins = admins or admins_for(desired, timeout)
    metadata = _parallel(admins, lambda a: a.topics())
    metadata, warnings = _catch_up(admins, metadata, recorded)
    bare = {
        name: ClusterState(name, {t: TopicInfo(t, m.partitions, m.replication_factor) for t, m in meta.items()}, None)
        for name, meta in metadata.items()
    }

    quota_ids = quota_client_ids(desired, recorded)
    describe: dict[str, set[str]] = {name: set() for name in admins}
    unowned_targets: dict[str, set[str]] = {name: set() for name in admins}
    read_acls: set[str] = set()
    for flow in desired.enabled_flows:
        remote_of = flow.remote_topics(bare[flow.source].topics)
        describe[flow.source].update(t for t in remote_of if t in bare[flow.source].topics)
        target_topics = bare[flow.target].topics
        for remote in remote_of.values():
            if remote in target_topics:
                describe[flow.target].add(remote)
                if not recorded.owns(topic_address(flow.target, remote)):
                    unowned_targets[flow.target].add(remote)
        if flow.sync.acls:
            read_acls.update((flow.source, flow.target))
    for name, state in bare.items():
        # Internal topics (heartbeats, checkpoints, offset-syncs, state) and whatever kmirror recorded.
        describe[name].update(t for t in state.topics if _maybe_internal(t, desired))
    for res in recorded.resources.values():
        cluster, topic = str(res.attributes.get("cluster")), str(res.attributes.get("name"))
        if cluster in describe and topic in bare[cluster].topics:
            describe[cluster].add(topic)

    def phase2(name: str) -> ClusterState:
        admin = admins[name]
        configs = admin.explicit_topic_configs(describe[name])
        unowned = unowned_targets[name]
        holding = _topics_with_records(admin, bare[name], unowned)

        def has_records(topic: str) -> bool | None:
            return (topic in holding) if topic in unowned else None

        topics = {  # built directly: dataclasses.replace() costs ~3 us a topic
            t: TopicInfo(t, info.partitions, info.replication_factor, configs.get(t, {}), has_records(t))
            for t, info in bare[name].topics.items()
        }
        acls = admin.acls() if name in read_acls else None
        quotas, problem = _quotas(admin, quota_ids.get(name, set()))
        if problem:
            quota_warnings[name] = Diagnostic.warning(None, problem)
        return ClusterState(name, topics, acls, brokers=admin.brokers, quotas=quotas)

    quota_warnings: dict[str, Diagnostic] = {}
    with ThreadPoolExecutor(max_workers=max(1, len(admins))) as pool:
        states = dict(zip(admins, pool.map(phase2, admins), strict=True))
    warnings += tuple(quota_warnings[n] for n in sorted(quota_warnings))
    live = with_group_offsets(desired, LiveState(clusters=states, warnings=warnings), admins, timeout=timeout)
    live = with_exact_offsets(desired, live, admins, timeout=timeout, budget=exact_budget)
    return replace(live, round_trips={n: a.round_trips for n, a in admins.items()})


def _catch_up(
    admins: dict[str, KafkaAdmin], metadata: dict[str, dict[str, TopicMeta]], recorded: RecordedState
) -> tuple[dict[str, dict[str, TopicMeta]], tuple[Diagnostic, ...]]:
    """Metadata that shows every recorded topic the controller has: waits for a broker that is behind.

    Without this, a plan made while the broker still publishes a burst of creates (an apply of thousands of
    topics that just finished) reports the topics it has not published as "deleted outside kmirror".
    """
    absent: dict[str, set[str]] = {}
    for res in recorded.resources.values():
        if res.kind not in (Kind.TOPIC, Kind.INTERNAL_TOPIC):
            continue
        cluster, topic = str(res.attributes.get("cluster")), str(res.attributes.get("name"))
        if cluster in metadata and topic not in metadata[cluster]:
            absent.setdefault(cluster, set()).add(topic)
    if not absent:
        return metadata, ()

    def catch_up(cluster: str) -> tuple[dict[str, TopicMeta], set[str]]:
        admin = admins[cluster]
        lagging = admin.exist_on_controller(absent[cluster])
        if not lagging:
            return metadata[cluster], set()
        still = admin.wait_visible(lagging)
        return admin.topics(), still

    with ThreadPoolExecutor(max_workers=len(absent)) as pool:
        results = dict(zip(absent, pool.map(catch_up, absent), strict=True))
    warnings: list[Diagnostic] = []
    for cluster, (topics, still) in sorted(results.items()):
        metadata = {**metadata, cluster: topics}
        if still:
            names = ", ".join(sorted(still)[:5]) + (f" and {len(still) - 5} more" if len(still) > 5 else "")
            warnings.append(
                Diagnostic.warning(
                    None,
                    f"cluster '{cluster}': {len(still)} recorded topic{'s' if len(still) != 1 else ''} ({names}) "
                    "exist on the controller but not yet in the brokers' metadata; the plan shows them as missing. "
                    "Plan again once the brokers have caught up.",
                )
            )
    return metadata, tuple(warnings)


def _quotas(admin: KafkaAdmin, client_ids: set[str]) -> tuple[dict[str, dict[str, float]] | None, str]:
    """The client quotas on `client_ids` (None when there are none to read), or None and why they could not be read."""
    if not client_ids:
        return None, ""
    try:
        return admin.describe_client_quotas(client_ids), ""
    except ClientQuotaError as exc:
        return None, (
            f"client quotas could not be read: {exc}. Each quota/ row on cluster '{admin.cluster}' is planned "
            "against what kmirror recorded, and apply cannot set them until this is fixed."
        )


def _topics_with_records(admin: KafkaAdmin, state: ClusterState, topics: Iterable[str]) -> set[str]:
    partitions = [(t, p) for t in topics for p in range(state.topics[t].partitions)]
    if not partitions:
        return set()
    start, end = admin.start_offsets(partitions), admin.end_offsets(partitions)
    return {t for (t, p), e in end.items() if e > start.get((t, p), 0)}


def _maybe_internal(topic: str, desired: DesiredState) -> bool:
    return topic == desired.state.topic or topic.endswith((".internal", "heartbeats"))


def _parallel(items: dict[K, KafkaAdmin], fn: Callable[[KafkaAdmin], V]) -> dict[K, V]:
    with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
        return dict(zip(items, pool.map(fn, items.values()), strict=True))
