"""`kmirror status`: per flow, how its replication job runs and how far behind the target is.

Gathers, for each enabled flow: the job's state from its runner (and the job's own status file: records,
bytes, batches, last batch time), replication lag per source partition (source end offset minus the position
the offset-syncs prove copied, as the cutover readiness check computes it), the age of the newest heartbeat
that reached the target (proof the whole path works, and how late it is), and the cutover verdict.
Reads only; nothing here changes a cluster or a job.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from reconciler.app.cutover import readiness
from reconciler.app.operations import recorded_deployments, state_store
from reconciler.core.mm2.wire import Heartbeat
from reconciler.core.offsets.readiness import FailoverReadiness
from reconciler.errors import KmirrorError
from reconciler.jobcontract.job_report import read_report
from reconciler.jobcontract.layout import local_state_keys, state_key
from reconciler.resources.deployments import Deployment, LocalDeployment, YarnDeployment
from reconciler.spec.models import DesiredState, FlowSpec


@dataclass
class PartitionFailover:
    """One partition of a group: its committed offset, where it translates to, and the records it would re-read."""

    topic: str
    partition: int
    source_offset: int
    target_topic: str
    target_offset: int | None
    rereads: int | None


@dataclass
class GroupFailover:
    """A consumer group: the records it would re-read on the target if it moved now (None: not translatable, it
    cannot move yet), and per partition."""

    rereads: int | None = 0
    translatable: bool = True
    partitions: list[PartitionFailover] = field(default_factory=list)


@dataclass
class FlowStatus:
    flow: str
    source: str
    target: str
    runner: str
    job_state: str
    running: bool
    restarts: int = 0
    last_error: str | None = None
    data_loss_records: int = 0
    data_loss_last: str | None = None
    #: Exactly-once: times another writer of the flow's partitions fenced the job's writers; the newer generation
    #: that superseded the job (it stopped for good).
    fenced_writers: int = 0
    superseded_by: int | None = None
    checkpoint: str | None = None
    log: str | None = None  # where the job's driver output is (a path on this host, or where to look)
    #: The Spark execution mode the job runs in (realtime, microbatch), why, and its task slots.
    mode: str | None = None
    mode_reason: str | None = None
    task_slots: int | None = None
    #: The delivery guarantee the running job writes with (its own report: it may differ from the file's).
    delivery: str | None = None
    records: int | None = None
    bytes: int | None = None
    records_per_s: float | None = None
    seconds_since_last_batch: float | None = None
    heartbeat_age_ms: int | None = None
    metrics_url: str | None = None
    #: deploy yarn: the application id the ResourceManager knows the job by.
    application: str | None = None
    lag_total: int | None = None
    lag: dict[str, dict[str, int]] = field(default_factory=dict)
    verdict: str = ""
    ready: bool = False
    #: Per consumer group: how far it would move back on the target if it moved now.
    failover: dict[str, GroupFailover] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """`kmirror status --format json`: the JSON edge."""
        return asdict(self)


def flow_status(
    desired: DesiredState,
    flow: FlowSpec,
    timeout: float = 15.0,
    deployments: Mapping[str, Deployment] | None = None,
    state_key: str | None = None,
) -> FlowStatus:
    """`deployments`: what the state topic recorded of each flow's job (see `operations.recorded_deployments`);
    `state_key`: what the state's job folders are keyed by (`jobcontract.layout.state_key`)."""
    st = FlowStatus(flow.name, flow.source, flow.target, desired.spark.deploy, job_state="", running=False)
    _job_info(st, desired, deployments or {}, state_key)
    try:
        ready = readiness(desired, flow.name, timeout=timeout)
        per_topic: dict[str, dict[str, int]] = {}
        for (topic, partition), n in sorted(ready.lag.items()):
            per_topic.setdefault(topic, {})[str(partition)] = n
        st.lag, st.lag_total, st.verdict, st.ready = per_topic, ready.total_lag, ready.verdict(), ready.ready
        st.failover = failover_by_group(ready.failover)
    except KmirrorError as exc:
        st.problems.append(f"lag: {exc}")
    if flow.heartbeats.enabled:
        try:
            st.heartbeat_age_ms = newest_heartbeat_age_ms(desired, flow, timeout)
        except KmirrorError as exc:
            st.problems.append(f"heartbeats: {exc}")
    return st


def failover_by_group(rows: tuple[FailoverReadiness, ...]) -> dict[str, GroupFailover]:
    out: dict[str, GroupFailover] = {}
    for r in rows:
        g = out.setdefault(r.group, GroupFailover())
        g.partitions.append(
            PartitionFailover(r.topic, r.partition, r.source_offset, r.target_topic, r.target_offset, r.rereads)
        )
        if r.rereads is None:
            g.translatable, g.rereads = False, None
        elif g.translatable and g.rereads is not None:
            g.rereads += r.rereads
    return out


def status_of(desired: DesiredState, flows: list[str] | None = None, timeout: float = 15.0) -> list[FlowStatus]:
    chosen = [f for f in desired.enabled_flows if not flows or f.name in flows]
    unknown = set(flows or ()) - {f.name for f in desired.enabled_flows}
    if unknown:
        raise KmirrorError(f"no enabled flow named {', '.join(sorted(unknown))} in the desired state")
    deployments: dict[str, Deployment] = {}
    key: str | None = None
    if desired.spark.deploy != "none":
        try:
            recorded = state_store(desired, timeout).read().recorded()
            deployments, key = recorded_deployments(recorded), state_key(desired.state.topic, recorded.cluster_id)
        except KmirrorError:
            # The state cluster down: the job is still found in its folder on this host when only one state of
            # this topic has folders here; the lag reports the outage.
            keys = local_state_keys(desired.state.topic)
            key = keys[0] if len(keys) == 1 else None
    return [flow_status(desired, f, timeout, deployments, key) for f in chosen]


def newest_heartbeat_age_ms(desired: DesiredState, flow: FlowSpec, timeout: float) -> int | None:
    """Milliseconds since the newest heartbeat replicated to the target was emitted on the source."""
    remote = flow.remote_topic(flow.policy().heartbeats_topic())
    consumer = Consumer(
        {
            **desired.client_config(flow.target),
            "group.id": "kmirror-status",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        tp = TopicPartition(remote, 0)
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout)
        except Exception as exc:
            raise KmirrorError(f"cannot read {remote} on '{flow.target}': {exc}") from exc
        if high <= low:
            return None
        consumer.assign([TopicPartition(remote, 0, max(low, high - 5))])
        newest: int | None = None
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline and seen < min(5, high - low):
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            seen += 1
            hb = Heartbeat.from_record(msg.key() or b"", msg.value() or b"")
            if hb.source_cluster_alias == flow.source and hb.target_cluster_alias == flow.target:
                newest = max(newest or 0, hb.timestamp)
        return None if newest is None else max(0, int(time.time() * 1000) - newest)
    finally:
        consumer.close()


def _job_info(
    st: FlowStatus, desired: DesiredState, deployments: Mapping[str, Deployment], state_key: str | None
) -> None:
    """Fill in how the flow's job runs: its runner's answer and the job's own status record."""
    if desired.spark.deploy == "none":
        st.job_state = "not managed (spark.deploy: none)"
        return
    from reconciler.runners import runner_for

    runner = runner_for(desired, deployments, state_key)
    job = runner.job(st.flow)
    recorded = deployments.get(st.flow)
    if job is None:
        if isinstance(recorded, LocalDeployment) and recorded.host:
            st.job_state = f"unknown: deploy local on host {recorded.host}"
        else:
            st.job_state = "not deployed"
        return
    data = read_report(job.folder / "status.json")
    st.job_state, st.running = job.state or ("running" if job.running else "stopped"), job.running
    if not job.running and job.state in (None, "running", "starting", "restarting"):
        st.job_state = "dead (not running; `kmirror apply` restarts it)"
    st.restarts = int(data.get("restarts") or 0)
    st.last_error = data.get("error")
    st.data_loss_records = int(data.get("data_loss_records") or 0)
    st.data_loss_last = data.get("data_loss_last")
    st.fenced_writers = int(data.get("fenced_writers") or 0)
    st.superseded_by = data.get("superseded_by") or None
    st.checkpoint = job.checkpoint
    st.log = _log_location(job)
    if isinstance(recorded, YarnDeployment):
        st.application = job.app_id
    st.mode, st.mode_reason = data.get("mode"), data.get("mode_reason")
    st.task_slots, st.delivery = data.get("task_slots"), data.get("delivery")
    records, started = data.get("records"), data.get("started_at")
    if isinstance(records, int):
        st.records = records
        if isinstance(started, int | float) and time.time() > started:
            st.records_per_s = round(records / (time.time() - started), 1)
    size = data.get("bytes")
    if isinstance(size, int):
        st.bytes = size
    port = data.get("metrics_port")
    if isinstance(port, int) and port > 0 and job.running:
        st.metrics_url = f"http://{job.host}:{port}/metrics"
    last = data.get("last_batch_at")
    if isinstance(last, int | float):
        st.seconds_since_last_batch = round(time.time() - last, 1)


def _log_location(job: object) -> str:
    """Where the job's driver output is: the local or shared folder's driver.log; for side files on HDFS, the
    driver's folder on its standalone worker; on YARN, the application's aggregated logs."""
    from reconciler.runners.standalone import StandaloneJob
    from reconciler.runners.yarn import YarnJob

    if isinstance(job, StandaloneJob):
        return job.log_location
    if isinstance(job, YarnJob):
        return f"yarn logs -applicationId {job.app_id or '<the application id>'} (the driver is the AM's container)"
    return str(getattr(job, "log", "") or "") or "unknown"
