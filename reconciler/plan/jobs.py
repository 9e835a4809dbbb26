"""Planning of the replication job of each flow: deploy, redeploy, restart, stop.

The job runner reports, per flow, whether a job runs and the spec digest it runs with; the recorded state
holds the effective flow spec last deployed. A digest change is a redeploy (`replace`: graceful stop, then
start from the positions reached) whose reason names the fields that changed. A job that is not running is
restarted (`update`). A flow that is gone or disabled has its job stopped (`delete`) when `prune.jobs` allows.
`replication.delivery` changing is a redeploy whose reason says what the job does from then on (`delivery_change`).
A new flow whose `replication.start_from` is a time says where it starts; `start_from` changing on a flow that
ran is a redeploy (it is part of the spec) that moves nothing, and its reason says so (`start_from_change`).
`after.operation` says which of deploy/redeploy/restart/stop the executor runs. Pure: values in, values out.

The job status comes from the runner's own API (the Spark master, or the process on this host), keyed by what
the state topic recorded, so every checkout of the same file plans the same. A job the runner cannot see from
here (a local job on another host) gets no change, only a warning: restarting it would run two drivers. A job
that restarts after failures, has skipped records the source deleted, or lost its checkpoint is named in the
warnings; a restart of a job whose checkpoint is gone says that it resumes from the offset-syncs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.core.policy.filters import eos_group
from reconciler.errors import Diagnostic
from reconciler.jobcontract.spec import EffectiveSpec, eos_flow_for
from reconciler.live.model import LiveState
from reconciler.plan.applications import application_effect, stop_effect
from reconciler.plan.definition import Action, JobChange
from reconciler.plan.forms import EosGroup, JobForm, JobObserved, JobOperation
from reconciler.plan.topics import TopicPlan
from reconciler.resources.addresses import Kind, job_address, job_flow
from reconciler.resources.deployments import deployment_of
from reconciler.resources.job_status import JobStatus
from reconciler.resources.recorded import RecordedState
from reconciler.spec.models import Delivery, DesiredState, FlowSpec
from reconciler.spec.placement import Placement, choose_placement
from reconciler.spec.start import describe_start, is_time


def placement_of(desired: DesiredState, flow: FlowSpec, live: LiveState | None) -> Placement | None:
    """The mode and task slots the flow's job will choose, from the source partitions live now (None: unread)."""
    if live is None or flow.source not in live.clusters:
        return None
    source = live.cluster(flow.source)
    partitions = sum(source.topics[t].partitions for t in flow.remote_topics(source.topics) if t in source.topics)
    spark = desired.spark
    if desired.application_of(flow) is not None:  # a query among others: its own tasks, the application's master
        shared = choose_placement(deploy=spark.deploy, master=None, conf=dict(spark.conf), partitions=partitions)
        return Placement(shared.mode, None, shared.reason, tasks=shared.tasks)
    return choose_placement(deploy=spark.deploy, master=spark.master, conf=dict(spark.conf), partitions=partitions)


def plan_jobs(
    desired: DesiredState, recorded: RecordedState, jobs: JobStatus, live: LiveState | None = None
) -> TopicPlan:
    out = TopicPlan()
    if desired.spark.deploy == "none":
        return out  # records are copied by something else; kmirror manages no job
    if not jobs.known:
        out.warnings.append(
            Diagnostic.warning(None, "the job runner could not be asked about running jobs; no job changes planned.")
        )
        return out
    if jobs.ephemeral_host and desired.spark.deploy == "local" and desired.enabled_flows:
        out.warnings.append(
            Diagnostic.warning(
                None,
                "spark.deploy is 'local' on a CI runner: the jobs apply starts live only as long as this machine; "
                "use deploy 'standalone' with a shared checkpoint_root for jobs that outlive the run.",
            )
        )
    for name, reported in sorted(jobs.jobs.items()):
        address = job_address(name)
        if reported.restarts and reported.running:
            error = f"; last error: {reported.last_error}" if reported.last_error else ""
            out.warnings.append(
                Diagnostic.warning(address, f"the job restarted its query {reported.restarts} time(s){error}")
            )
        if reported.fenced_writers and reported.running:
            out.warnings.append(
                Diagnostic.warning(
                    address,
                    f"another writer of this flow's partitions is alive (an older deployment on another "
                    f"machine, or a stray Spark task): it fenced the job's exactly-once writers "
                    f"{reported.fenced_writers} time(s); nothing was lost, but stop it (see docs/delivery.md)",
                )
            )
        if reported.superseded_by:
            out.warnings.append(
                Diagnostic.warning(
                    address,
                    f"this job stopped for good: generation {reported.superseded_by} of the flow (a newer "
                    "deployment) writes its partitions; if that deployment is not wanted, stop it before applying here",
                )
            )
        if reported.data_loss_records:
            out.warnings.append(
                Diagnostic.warning(
                    address,
                    f"{reported.data_loss_records} record(s) were deleted on the source before the job "
                    "copied them (retention or DeleteRecords); see `kmirror status`",
                )
            )
    down = {name for name, info in jobs.jobs.items() if info.running is False}  # e.g. its application's driver died
    enabled = set()
    renamed = {m.to: m.from_ for m in desired.moved}
    moved: set[str] = set()
    for flow in desired.enabled_flows:
        enabled.add(flow.name)
        address = job_address(flow.name)
        digest = desired.flow_digest(flow.name)
        spec = desired.flow_effective_spec(flow.name)
        info = jobs.jobs.get(flow.name)
        last = recorded.get(address)
        if info is not None and info.running is None:
            out.warnings.append(
                Diagnostic.warning(address, f"{info.detail or 'its job cannot be seen from here'}; no change planned")
            )
            continue
        before = None if info is None else JobObserved(running=info.running, spec_digest=info.spec_digest)
        running_digest = info.spec_digest if info is not None and info.running else None
        known_digest = running_digest or (last or {}).get("spec_digest")

        placement = placement_of(desired, flow, live)
        where = f"; {placement.describe()}" if placement is not None else ""
        if desired.spark.deploy == "yarn":  # where the job runs: the ResourceManager of the Hadoop configuration
            where += f"; runs on YARN as a cluster-mode application, checkpoint on {desired.spark.checkpoint_root}"
        elif desired.spark.deploy == "standalone":  # the master that supervises the driver
            master = desired.spark.master
            application = desired.application_of(flow)
            driver = f"in application {application}'s supervised driver" if application else "as a supervised driver"
            where += f"; runs on the Spark standalone master {master} {driver}, checkpoint on "
            where += desired.spark.checkpoint_root

        def change(action: Action, operation: JobOperation, reason: str, moved_from: str | None = None) -> JobChange:
            after = JobForm(
                flow=flow.name,  # noqa: B023 - used at once, inside this iteration
                operation=operation,
                runner=desired.spark.deploy,
                spec_digest=digest,  # noqa: B023
                spec=EffectiveSpec.model_validate(spec),  # noqa: B023
                **({"moved_from": moved_from} if moved_from is not None else {}),
            )
            effect = application_effect(desired, flow, operation, (last or {}).get("spec"), spec, down)  # noqa: B023
            return JobChange(
                address=address,  # noqa: B023
                action=action,
                before=before,  # noqa: B023
                after=after,
                reason=reason + where + effect,  # noqa: B023
            )

        old = renamed.get(flow.name)
        if known_digest is None and old is not None and recorded.get(job_address(old)) is not None:
            moved.add(old)
            old_info = jobs.jobs.get(old)
            before = (
                None if old_info is None else JobObserved(running=old_info.running, spec_digest=old_info.spec_digest)
            )
            out.changes.append(
                change(
                    Action.UPDATE,
                    "move",
                    f"moved from {job_address(old)}: its job stops gracefully and starts as {flow.name} on the same "
                    "checkpoint, where it left off (nothing copied again)",
                    moved_from=old,
                )
            )
        elif known_digest is None:
            starts = f"; {describe_start(flow.replication.start_from)}" if is_time(flow.replication.start_from) else ""
            out.changes.append(change(Action.CREATE, "deploy", f"new flow {flow.source} -> {flow.target}{starts}"))
        elif known_digest != digest:
            fields = changed_fields((last or {}).get("spec"), spec)
            state = "running" if running_digest else "not running"
            reason = f"spec changed ({fields}); job {state}, restarts where it stopped"
            switch = delivery_change((last or {}).get("spec"), flow.replication.delivery)
            moved_start = start_from_change((last or {}).get("spec"), flow.replication.start_from)
            reason += "".join(f"; {said}" for said in (switch, moved_start) if said)
            out.changes.append(change(Action.REPLACE, "redeploy", reason))
        elif info is not None and info.mode_fallback and placement is not None and placement.mode == "realtime":
            out.changes.append(
                change(
                    Action.REPLACE,
                    "redeploy",
                    f"the job left real-time mode ({info.mode_reason}); a redeploy sizes it for the partitions "
                    "now and restarts where it stopped",
                )
            )
        elif running_digest is None:
            detail = f": {info.detail}" if info is not None and info.detail else ""
            if info is not None and info.checkpoint_missing:
                detail += (
                    f"; its checkpoint {info.checkpoint} is missing: it resumes from the offset-syncs "
                    "(at most offset_lag_max records per partition copied again), not from start_from"
                )
            out.changes.append(change(Action.UPDATE, "restart", f"job is not running{detail}"))

    gone = {r.attributes.get("flow", job_flow(r.address)) for r in recorded.of_kind(Kind.JOB)}
    gone |= {name for name, info in jobs.jobs.items() if info.running is not False}
    declared = {f.name for f in desired.flows}
    for name in sorted(gone - enabled - moved):
        address = job_address(name)
        info = jobs.jobs.get(name)
        if info is not None and info.running is None:
            out.warnings.append(Diagnostic.warning(address, f"{info.detail}; not stopped from here"))
            continue
        if not desired.prune.jobs:
            out.warnings.append(
                Diagnostic.warning(address, "the flow is gone or disabled; its job is kept because prune.jobs is off.")
            )
            continue
        removed = name not in declared
        eos = removed_flow_eos_group(desired, name, recorded.get(address)) if removed else None
        said = f" and its exactly-once group {eos.group} on {eos.cluster}" if eos and eos.exactly_once else ""
        out.changes.append(
            JobChange(
                address=address,
                action=Action.DELETE,
                before=JobObserved(
                    running=None if info is None else info.running,
                    spec_digest=None if info is None else info.spec_digest,
                    removed=removed,
                    **({"eos_group": eos} if eos is not None else {}),
                ),
                after=None,
                reason=(
                    "flow removed: stop the job gracefully and forget its checkpoint"
                    + said
                    + " (the flow added back starts afresh from start_from)"
                    if removed
                    else "flow disabled: stop the job gracefully (finishes the batch in flight); enabled again, it "
                    "resumes from its checkpoint"
                )
                + stop_effect(desired, name, (recorded.get(address) or {}).get("spec")),
            )
        )
    return out


def removed_flow_eos_group(desired: DesiredState, name: str, last: Mapping[str, Any] | None) -> EosGroup | None:
    """The exactly-once group a removed flow's job may have committed its source positions to, while its target is
    still in the file: forgotten with the checkpoint, or the flow added back with exactly-once delivery would skip,
    on its new remote topics, every record below the old positions. `exactly_once`: its last spec wrote so (the
    group is deleted either way: a flow switched back to at-least-once before its removal left one too)."""
    spec = (last or {}).get("spec") or {}
    flow = (spec.get("flow") or {}) if isinstance(spec, Mapping) else {}
    target = flow.get("target")
    if not isinstance(target, str) or target not in desired.clusters:
        return None
    deployment = (last or {}).get("deployment")
    eos_flow = eos_flow_for(name, deployment_of(deployment) if isinstance(deployment, Mapping) else None)
    exactly_once = (flow.get("replication") or {}).get("delivery") == Delivery.EXACTLY_ONCE
    return EosGroup(cluster=target, group=eos_group(desired.state.topic, eos_flow), exactly_once=exactly_once)


def delivery_change(before_spec: Any, delivery: str) -> str | None:
    """What a change of `replication.delivery` does to the running job, for the redeploy row; None if unchanged."""
    if not isinstance(before_spec, dict):
        return None
    replication = (before_spec.get("flow") or {}).get("replication") or {}
    old = replication.get("delivery", Delivery.AT_LEAST_ONCE)
    if old == delivery:
        return None
    if delivery == Delivery.EXACTLY_ONCE:
        return (
            f"delivery {old} -> {delivery}: the job restarts from its checkpoint; from then on records are written "
            "in transactions and its source positions are committed on the target (group kmirror-eos.*), so a "
            "crash re-sends nothing a read_committed consumer sees twice (records copied before the switch stay "
            "as they are)"
        )
    return (
        f"delivery {old} -> {delivery}: the job stops its transactions and restarts from its checkpoint; from then "
        "on records are written without transactions (a crash may copy records again); its kmirror-eos.* group "
        "on the target is no longer updated"
    )


def start_from_change(before_spec: Any, start_from: str) -> str | None:
    """What a change of `replication.start_from` does to a flow that ran: nothing (it applies at a first start
    only, and the job goes on from its checkpoint), for the redeploy row; None if unchanged."""
    if not isinstance(before_spec, dict):
        return None
    replication = (before_spec.get("flow") or {}).get("replication") or {}
    old = replication.get("start_from", "earliest")
    if old == start_from:
        return None
    return (
        f"start_from {old} -> {start_from} moves nothing: it applies at a flow's first start only, and the job goes "
        "on from its checkpoint (to copy from the new start, remove the flow, apply, and add it back)"
    )


def changed_fields(before: Any, after: Any) -> str:
    """`topics.include, replication.producer.linger.ms`: the field paths that differ, for a plan's reason."""
    if before is None:
        return "no record of the previous spec"
    # Imported here: deepdiff (and numpy, which it loads) is a third of every `kmirror` command's start, and only a
    # changed job spec needs it.
    from deepdiff import DeepDiff

    diff = DeepDiff(before, after, ignore_order=False, view="tree")
    paths = set()
    for items in diff.values():
        for item in items:
            path = item.path(output_format="list")
            paths.add(".".join(str(p) for p in path if not isinstance(p, int)) or "(root)")
    return ", ".join(sorted(paths)) or "digest only"
