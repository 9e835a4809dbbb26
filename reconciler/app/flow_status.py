"""`kmirror status`: per flow, how its replication job runs and how far behind the target is.

Gathers, for each enabled flow: the job's state from its runner (and the job's own status file: records,
bytes, batches, last batch time), replication lag per source partition (source end offset minus the position
the offset-syncs prove copied, as the cutover readiness check computes it), the age of the newest heartbeat
that reached the target (proof the whole path works, and how late it is), and the cutover verdict.
Reads only; nothing here changes a cluster or a job.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from reconciler.app.cutover import readiness
from reconciler.app.operations import recorded_deployments, state_store
from reconciler.core.mm2.wire import Heartbeat
from reconciler.core.offsets.readiness import FailoverReadiness
from reconciler.errors import KmirrorError
from reconciler.jobcontract.job_report import read_report
from reconciler.spec.models import DesiredState, FlowSpec


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
    #: Per consumer group: the records it would re-read on the target if it moved now (None: not translatable,
    #: it cannot move yet), and per partition its committed offset, translated offset and re-reads.
    failover: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def flow_status(
    desired: DesiredState, flow: FlowSpec, timeout: float = 15.0, deployments: dict[str, dict[str, Any]] | None = None
) -> FlowStatus:
    """`deployments`: what the state topic recorded of each flow's job (see `operations.recorded_deployments`)."""
    job = _job_info(desired, flow.name, deployments or {})
    st = FlowStatus(flow.name, flow.source, flow.target, desired.spark.deploy, **job)
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


def failover_by_group(rows: tuple[FailoverReadiness, ...]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        g = out.setdefault(r.group, {"rereads": 0, "translatable": True, "partitions": []})
        g["partitions"].append(
            {
                "topic": r.topic,
                "partition": r.partition,
                "source_offset": r.source_offset,
                "target_topic": r.target_topic,
                "target_offset": r.target_offset,
                "rereads": r.rereads,
            }
        )
        if r.rereads is None:
            g["translatable"], g["rereads"] = False, None
        elif g["translatable"]:
            g["rereads"] += r.rereads
    return out


def status_of(desired: DesiredState, flows: list[str] | None = None, timeout: float = 15.0) -> list[FlowStatus]:
    chosen = [f for f in desired.enabled_flows if not flows or f.name in flows]
    unknown = set(flows or ()) - {f.name for f in desired.enabled_flows}
    if unknown:
        raise KmirrorError(f"no enabled flow named {', '.join(sorted(unknown))} in the desired state")
    deployments: dict[str, dict[str, Any]] = {}
    if desired.spark.deploy != "none":
        # The state cluster down: the job is still found in its folder; the lag reports the outage.
        with contextlib.suppress(KmirrorError):
            deployments = recorded_deployments(state_store(desired, timeout).read().recorded())
    return [flow_status(desired, f, timeout, deployments) for f in chosen]


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


def _job_info(desired: DesiredState, flow: str, deployments: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if desired.spark.deploy == "none":
        return {"job_state": "not managed (spark.deploy: none)", "running": False}
    from reconciler.runners import runner_for

    runner = runner_for(desired, deployments)
    job = runner.job(flow)
    if job is None:
        recorded = deployments.get(flow) or {}
        if recorded.get("runner") == "local" and recorded.get("host"):
            return {"job_state": f"unknown: deploy local on host {recorded['host']}", "running": False}
        return {"job_state": "not deployed", "running": False}
    data = read_report(job.folder / "status.json")
    info: dict[str, Any] = {"job_state": job.state or ("running" if job.running else "stopped"), "running": job.running}
    if not job.running and job.state in (None, "running", "starting", "restarting"):
        info["job_state"] = "dead (not running; `kmirror apply` restarts it)"
    info["restarts"] = int(data.get("restarts") or 0)
    info["last_error"] = data.get("error")
    info["data_loss_records"] = int(data.get("data_loss_records") or 0)
    info["data_loss_last"] = data.get("data_loss_last")
    info["fenced_writers"] = int(data.get("fenced_writers") or 0)
    info["superseded_by"] = data.get("superseded_by") or None
    info["checkpoint"] = job.checkpoint
    if (deployments.get(flow) or {}).get("runner") == "yarn":
        info["application"] = job.app_id
    for key in ("mode", "mode_reason", "task_slots", "delivery"):
        if data.get(key) is not None:
            info[key] = data.get(key)
    records, started = data.get("records"), data.get("started_at")
    if isinstance(records, int):
        info["records"] = records
        if isinstance(started, int | float) and time.time() > started:
            info["records_per_s"] = round(records / (time.time() - started), 1)
    if isinstance(data.get("bytes"), int):
        info["bytes"] = data["bytes"]
    if isinstance(data.get("metrics_port"), int) and data["metrics_port"] > 0 and job.running:
        info["metrics_url"] = f"http://{job.host}:{data['metrics_port']}/metrics"
    if isinstance(data.get("last_batch_at"), int | float):
        info["seconds_since_last_batch"] = round(time.time() - data["last_batch_at"], 1)
    return info
