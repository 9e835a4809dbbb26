"""Planning of remote topics (one per replicated source topic) and of kmirror's internal topics.

A remote topic is created with the source's partition count, the flow's replication factor and the source's
explicitly set configs (minus the flow's exclusion list, plus the flow's `topic_defaults.configs`). Partitions
only grow. Configs change by incremental SET/DELETE: `after.configs` is the whole explicit config set the
target will have, including excluded keys the target keeps, so the executor derives its calls from the diff.
A replication-factor difference is reported, never acted on. A target topic kmirror does not own is an error
unless the flow adopts existing topics, or unless the flow's own replication job made it: a running job creates
the remote topic of a new source topic itself (`reconciler.replication.remote_topics`, by these same rules), so
a target topic that is, by the naming policy of the job kmirror recorded as deployed, the remote topic of a
source topic that job replicates is kmirror's and is recorded as owned (an update with no broker call, plus
whatever partitions or configs differ). A disabled flow keeps its remote topics: they are neither deleted nor
forgotten, so enabling the flow again carries on where it stopped; only a removed flow's topics are pruned
(with `prune.topics`), after its job stopped (the executor's order). Internal topics get min(3, brokers) replicas
and, from 3 replicas up, `min.insync.replicas` RF - 1, so losing one broker of three loses nothing. Pure: values
in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from reconciler.core.topic_rules import COMPACT, durable_configs, internal_replication_factor
from reconciler.errors import Diagnostic
from reconciler.live.model import LiveState, TopicInfo
from reconciler.plan.definition import Action, AnyChange, InternalTopicChange, TopicChange
from reconciler.plan.forms import TopicForm, TopicSource
from reconciler.resources.addresses import Kind, internal_topic_address, job_address, topic_address
from reconciler.resources.recorded import RecordedState
from reconciler.spec.models import DesiredState, FlowSpec

#: The reason of a change that only records, as applied, what an interrupted apply created before it died.
CONFIRM_PENDING = "created by an interrupted apply; recording it as applied"
#: The reason of a change that records, as kmirror's, a remote topic the flow's running replication job created.
CREATED_BY_JOB = "created by the flow's replication job ({job}) for a new source topic; recording it as kmirror's"


@dataclass(frozen=True)
class RemoteTopic:
    """A remote topic the desired state asks for, and where it comes from."""

    flow: str
    source_cluster: str
    source_topic: str
    target_cluster: str
    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    adopt: bool = False


@dataclass
class TopicPlan:
    changes: list[AnyChange] = field(default_factory=list)
    #: Findings with their subject's address: nothing downstream parses a message to learn what it is about.
    warnings: list[Diagnostic] = field(default_factory=list)
    errors: list[Diagnostic] = field(default_factory=list)


def desired_remote_topics(desired: DesiredState, live: LiveState) -> tuple[list[RemoteTopic], list[Diagnostic]]:
    """Every remote topic the flows ask for; two sources writing one remote topic is an error."""
    topics: list[RemoteTopic] = []
    errors: list[Diagnostic] = []
    owner: dict[tuple[str, str], RemoteTopic] = {}
    for flow in desired.enabled_flows:
        source = live.clusters[flow.source]
        for source_topic, remote in sorted(flow.remote_topics(source.topics).items()):
            info = source.topics.get(source_topic) or TopicInfo(source_topic, 1, -1, COMPACT)
            rt = RemoteTopic(
                flow=flow.name,
                source_cluster=flow.source,
                source_topic=source_topic,
                target_cluster=flow.target,
                name=remote,
                partitions=info.partitions,
                replication_factor=flow.topic_defaults.replication_factor,
                configs=flow.synced_configs(info.configs),
                adopt=flow.replication.adopt_existing,
            )
            other = owner.get((flow.target, remote))
            if other is not None:
                errors.append(
                    Diagnostic.error(
                        topic_address(flow.target, remote),
                        f"two sources would write this remote topic: "
                        f"{other.source_cluster}:{other.source_topic} (flow {other.flow}) and "
                        f"{flow.source}:{source_topic} (flow {flow.name}). {_overlap_advice(other, flow)}",
                    )
                )
                continue
            owner[(flow.target, remote)] = rt
            topics.append(rt)
    return topics, errors


def _overlap_advice(other: RemoteTopic, flow: FlowSpec) -> str:
    """What resolves two flows writing one remote topic: a naming that tells the sources apart only helps when the
    sources are different clusters; the same source topic in two flows needs one flow to leave it out."""
    if other.source_cluster == flow.source and other.source_topic:
        return (
            f"Both flows replicate it from '{flow.source}': leave it out of one of them "
            f"(`topics.exclude: ['{other.source_topic}']` on flow {flow.name} or flow {other.flow})."
        )
    return (
        "Name one flow's remote topics after their source cluster (`naming: {policy: prefix}`, or a template with "
        "{source}), or leave the topic out of one of the flows (`topics.exclude`)."
    )


def plan_remote_topics(desired: DesiredState, live: LiveState, recorded: RecordedState) -> TopicPlan:
    out = TopicPlan()
    wanted, out.errors = desired_remote_topics(desired, live)
    for flow in desired.enabled_flows:
        rf, brokers = flow.topic_defaults.replication_factor, live.clusters[flow.target].brokers
        if brokers is not None and rf > brokers:
            out.errors.append(
                Diagnostic.error(
                    job_address(flow.name),
                    f"topic_defaults.replication_factor is {rf}, but '{flow.target}' has "
                    f"{brokers} broker{'s' if brokers != 1 else ''}; no remote topic could be created. Lower it, "
                    "or use -1 for the broker's default.",
                )
            )
    wanted_addresses = set()
    deployed = {flow.name: deployed_job_flow(desired, recorded, flow) for flow in desired.enabled_flows}
    for rt in wanted:
        address = topic_address(rt.target_cluster, rt.name)
        wanted_addresses.add(address)
        current = live.clusters[rt.target_cluster].topics.get(rt.name)
        flow = desired.flow(rt.flow)
        owned = recorded.owns(address)
        by_job = not owned and current is not None and created_by_job(deployed[rt.flow], rt)
        _plan_one(out, rt, address, current, owned, flow.config_exclusion(), recorded.pending(address), by_job)
    _plan_removed(out, desired, live, recorded, wanted_addresses)
    return out


def deployed_job_flow(desired: DesiredState, recorded: RecordedState, flow: FlowSpec) -> FlowSpec | None:
    """The flow spec the replication job kmirror recorded as deployed for `flow` runs with, if that job writes to
    the same source and target clusters as `flow` does now; None when kmirror deployed no job for it.

    With `spark.deploy: none` kmirror runs no job, so no target topic can have been made by one.
    """
    if desired.spark.deploy == "none":
        return None
    spec = (recorded.get(job_address(flow.name)) or {}).get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("flow"), dict):
        return None
    try:
        job_flow = FlowSpec.model_validate(spec["flow"])
    except ValidationError:
        return None  # recorded by a kmirror whose spec no longer reads: do not guess what that job did
    if (job_flow.source, job_flow.target) != (flow.source, flow.target):
        return None
    clusters = spec.get("clusters")
    for alias in (flow.source, flow.target):
        recorded_cluster = clusters.get(alias) if isinstance(clusters, dict) else None
        if not isinstance(recorded_cluster, dict):
            return None
        if recorded_cluster.get("bootstrap_servers") != desired.clusters[alias].model_dump(mode="json").get(
            "bootstrap_servers"
        ):
            return None  # the alias points at another cluster now: that job never wrote there
    return job_flow


def created_by_job(job_flow: FlowSpec | None, rt: RemoteTopic) -> bool:
    """Whether the deployed job (`job_flow`) replicates `rt`'s source topic into exactly `rt`, so that its
    `RemoteTopicKeeper` created `rt` when the source topic appeared (the job and the planner share these rules)."""
    if job_flow is None:
        return False
    return job_flow.topic_matches(rt.source_topic) and job_flow.remote_topic(rt.source_topic) == rt.name


def _plan_one(
    out: TopicPlan,
    rt: RemoteTopic,
    address: str,
    current: TopicInfo | None,
    owned: bool,
    excluded: Any,
    pending: bool = False,
    by_job: bool = False,
) -> None:
    origin = f"{rt.source_cluster}:{rt.source_topic} (flow {rt.flow})"
    if current is None:
        out.changes.append(
            TopicChange(
                address=address,
                action=Action.CREATE,
                before=None,
                after=_form(rt.target_cluster, rt.name, rt.partitions, rt.replication_factor, rt.configs, rt),
                reason=(
                    f"mirror of {origin}"
                    if not owned
                    else f"deleted outside kmirror; recreating the mirror of {origin}"
                ),
            )
        )
        return
    if not owned and not rt.adopt and not by_job:
        holds = " and holds records" if current.has_records else ""
        out.errors.append(
            Diagnostic.error(
                address,
                f"topic '{rt.name}' already exists on '{rt.target_cluster}'{holds}, but kmirror did not create "
                f"it, so it is not a mirror kmirror owns; flow {rt.flow} would write "
                f"{rt.source_cluster}:{rt.source_topic} into it. To migrate onto pre-created topics set "
                "`replication.adopt_existing: true` on the flow; "
                "otherwise delete or rename the target topic, or exclude the source topic.",
            )
        )
        return
    reasons: list[str] = []
    partitions = current.partitions
    if rt.partitions > current.partitions:
        partitions = rt.partitions
        reasons.append(f"partitions {current.partitions} -> {rt.partitions} (source grew)")
    elif rt.partitions < current.partitions:
        out.warnings.append(
            Diagnostic.warning(
                address,
                f"has {current.partitions} partitions, more than its source {origin} "
                f"({rt.partitions}); partitions never shrink, so this is left as it is.",
            )
        )
    if rt.replication_factor not in (-1, current.replication_factor):
        out.warnings.append(
            Diagnostic.warning(
                address,
                f"replication factor is {current.replication_factor}, the flow asks for "
                f"{rt.replication_factor}; kmirror reports this and does not reassign replicas.",
            )
        )
    configs = {k: v for k, v in current.configs.items() if excluded(k)}  # excluded keys: the target's own
    configs.update(rt.configs)
    changed = sorted(k for k in configs.keys() | current.configs.keys() if configs.get(k) != current.configs.get(k))
    if changed:
        reasons.append("configs " + ", ".join(changed))
    if not owned and by_job:
        reasons.insert(0, CREATED_BY_JOB.format(job=job_address(rt.flow)))
    elif not owned:
        reasons.insert(0, "adopting the existing topic as a mirror (adopt_existing)")
        if current.has_records:
            out.warnings.append(
                Diagnostic.warning(
                    address, "adopting a topic that already holds records; replicated records are appended after them."
                )
            )
    if not reasons and pending:
        reasons.append(CONFIRM_PENDING)
    if not reasons:
        return
    out.changes.append(
        TopicChange(
            address=address,
            action=Action.UPDATE,
            before=_form(rt.target_cluster, rt.name, current.partitions, current.replication_factor, current.configs),
            after=_form(rt.target_cluster, rt.name, partitions, current.replication_factor, configs, rt),
            reason=f"{origin}: " + "; ".join(reasons),
        )
    )


def _plan_removed(
    out: TopicPlan, desired: DesiredState, live: LiveState, recorded: RecordedState, wanted: set[str]
) -> None:
    disabled = {f.name for f in desired.flows if not f.enabled}
    for res in recorded.of_kind(Kind.TOPIC):
        if res.address in wanted:
            continue
        cluster, name = res.attributes["cluster"], res.attributes["name"]
        recorded_source = res.attributes.get("source")
        origin = TopicSource.model_validate(recorded_source) if isinstance(recorded_source, dict) else None
        flow = origin.flow if origin is not None else None
        if flow in disabled or cluster not in live.clusters:
            # A disabled flow keeps its topics (re-enabling it carries on); a cluster that was not read says
            # nothing about whether the topic is there. Either way: no change, and the record stays.
            continue
        current = live.clusters[cluster].topics.get(name)
        if not desired.prune.topics:
            if current is not None:
                out.warnings.append(
                    Diagnostic.warning(
                        res.address, "no flow replicates into this topic any more; kept because prune.topics is off."
                    )
                )
            continue
        out.changes.append(
            TopicChange(
                address=res.address,
                action=Action.DELETE,
                # who wrote it (`source`): the executor stops that flow's job before it deletes the topic
                before=None
                if current is None
                else _form(cluster, name, current.partitions, current.replication_factor, current.configs, origin),
                after=None,
                reason="no flow replicates into it any more (prune.topics is on)"
                if current is not None
                else "already gone; forgetting it",
            )
        )


def plan_internal_topics(desired: DesiredState, live: LiveState, recorded: RecordedState) -> TopicPlan:
    """heartbeats (source), checkpoints (target), offset-syncs (per location) and the state topic."""
    out = TopicPlan()
    wanted: dict[tuple[str, str], str] = {}
    for flow in desired.enabled_flows:
        policy = flow.policy()
        if flow.heartbeats.enabled:
            wanted[(flow.source, policy.heartbeats_topic())] = f"heartbeats of flow {flow.name}"
        if flow.offsets.emit_checkpoints:
            wanted[(flow.target, policy.checkpoints_topic(flow.source))] = f"checkpoints of flow {flow.name}"
        wanted[flow.syncs_location()] = f"offset-syncs of flow {flow.name}"
    wanted[(desired.state.cluster, desired.state.topic)] = "kmirror's state"
    for (cluster, name), purpose in sorted(wanted.items()):
        address = internal_topic_address(cluster, name)
        current = live.clusters[cluster].topics.get(name)
        if current is None:
            rf = internal_replication_factor(live.clusters[cluster].brokers)
            out.changes.append(
                InternalTopicChange(
                    address=address,
                    action=Action.CREATE,
                    after=_form(cluster, name, 1, rf, {**COMPACT, **durable_configs(rf)}),
                    reason=purpose,
                )
            )
            continue
        durable = durable_configs(current.replication_factor)
        missing = {k: v for k, v in durable.items() if k not in current.configs}
        brokers = live.clusters[cluster].brokers
        if brokers is not None and current.replication_factor < internal_replication_factor(brokers):
            out.warnings.append(
                Diagnostic.warning(
                    address,
                    f"replication factor {current.replication_factor} on a cluster of {brokers} brokers; "
                    f"losing one broker can lose {purpose}. kmirror does not reassign replicas: raise it with "
                    "kafka-reassign-partitions.",
                )
            )
        if current.configs.get("cleanup.policy") != "compact" or missing or recorded.pending(address):
            configs = {**current.configs, **COMPACT, **missing}
            rf = current.replication_factor
            why = CONFIRM_PENDING
            if current.configs.get("cleanup.policy") != "compact":
                why = "must be compacted"
            elif missing:
                why = f"min.insync.replicas {missing['min.insync.replicas']} with its {rf} replicas"
            out.changes.append(
                InternalTopicChange(
                    address=address,
                    action=Action.UPDATE,
                    before=_form(cluster, name, current.partitions, current.replication_factor, current.configs),
                    after=_form(cluster, name, current.partitions, current.replication_factor, configs),
                    reason=f"{purpose}: {why}",
                )
            )
    return out


def _form(
    cluster: str,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str],
    origin: RemoteTopic | TopicSource | None = None,
) -> TopicForm:
    source = (
        TopicSource(cluster=origin.source_cluster, topic=origin.source_topic, flow=origin.flow)
        if isinstance(origin, RemoteTopic)
        else origin
    )
    form = TopicForm(
        cluster=cluster,
        name=name,
        partitions=partitions,
        replication_factor=replication_factor,
        configs=dict(sorted(configs.items())),
    )
    return form if source is None else form.model_copy(update={"source": source})
