"""Hand-built desired, live and recorded states for planner tests (no broker anywhere)."""

from __future__ import annotations

import textwrap
from typing import Any

from reconciler.live.model import AclEntry, ClusterState, LiveState, TopicInfo
from reconciler.plan.builder import build_plan
from reconciler.plan.definition import Plan
from reconciler.resources.job_status import JobInfo, JobStatus
from reconciler.resources.recorded import RecordedResource, RecordedState
from reconciler.spec.loader import load_text
from reconciler.spec.models import DesiredState


def desired(flow_yaml: str = "", prune: str = "", extra_flows: str = "") -> DesiredState:
    flow = textwrap.indent(textwrap.dedent(flow_yaml).strip(), "    ") if flow_yaml.strip() else ""
    text = f"""
version: 1
clusters:
  src: {{bootstrap_servers: "127.0.0.1:1"}}
  dst: {{bootstrap_servers: "127.0.0.1:2"}}
state: {{cluster: dst}}
flows:
  - name: f
    source: src
    target: dst
{flow}
{textwrap.dedent(extra_flows)}
{prune}
"""
    return load_text(text).state


def topic(name: str, partitions: int = 1, rf: int = 1, **configs: str) -> TopicInfo:
    return TopicInfo(name, partitions, rf, {k.replace("_", "."): v for k, v in configs.items()})


def live(
    src: list[TopicInfo] | None = None,
    dst: list[TopicInfo] | None = None,
    src_acls: list[AclEntry] | None = None,
    dst_acls: list[AclEntry] | None = None,
    internal: bool = True,
) -> LiveState:
    dst = list(dst or [])
    src = list(src or [])
    if internal:  # the internal topics as a previous apply left them
        src += [
            topic("heartbeats", cleanup_policy="compact"),
            topic("mm2-offset-syncs.dst.internal", cleanup_policy="compact"),
        ]
        dst += [
            topic("src.checkpoints.internal", cleanup_policy="compact"),
            topic("_kmirror.state", cleanup_policy="compact"),
        ]
        if not any(t.name == "src.heartbeats" for t in dst):
            dst.append(topic("src.heartbeats", cleanup_policy="compact"))
    return LiveState(
        clusters={
            "src": ClusterState("src", {t.name: t for t in src}, tuple(src_acls) if src_acls is not None else None),
            "dst": ClusterState("dst", {t.name: t for t in dst}, tuple(dst_acls) if dst_acls is not None else None),
        }
    )


def recorded(*forms: tuple[str, str, dict[str, Any]], serial: int = 1) -> RecordedState:
    return RecordedState(
        lineage="lin-1",
        serial=serial,
        resources={addr: RecordedResource(addr, kind, attrs) for addr, kind, attrs in forms},
    )


def owned_topics(*names: str, cluster: str = "dst") -> list[tuple[str, str, dict[str, Any]]]:
    return [(f"topic/{cluster}/{n}", "topic", {"cluster": cluster, "name": n}) for n in names]


def running(ds: DesiredState, *flows: str) -> JobStatus:
    return JobStatus({f: JobInfo(f, True, ds.flow_digest(f)) for f in flows})


def acl(topic: str, principal: str, operation: str, permission: str = "ALLOW", *, host: str = "*",
        resource_type: str = "TOPIC", pattern: str = "LITERAL") -> AclEntry:  # fmt: skip
    return AclEntry(resource_type, pattern, topic, principal, host, operation, permission)  # type: ignore[arg-type]


def plan(
    ds: DesiredState,
    lv: LiveState,
    rec: RecordedState | None = None,
    jobs: JobStatus | None = None,
    targets: tuple[str, ...] = (),
) -> Plan:
    return build_plan(
        ds,
        lv,
        rec if rec is not None else owned(),
        jobs if jobs is not None else running(ds, *(f.name for f in ds.enabled_flows)),
        plan_id="p-1",
        created_at="2026-01-01T00:00:00Z",
        targets=targets,
    )


def by_address(p: Plan) -> dict[str, Any]:
    return {c.address: c for c in p.changes}


def owned(*names: str, extra: tuple[tuple[str, str, dict[str, Any]], ...] = ()) -> RecordedState:
    """Recorded state owning the remote heartbeats topic and the named remote topics on `dst`."""
    return recorded(*owned_topics("src.heartbeats", *names), *extra)
