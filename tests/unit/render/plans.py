"""Hand-built plans for the renderer tests, in the exact before/after shapes the planner produces.

Every kind meets every action here (topics, internal topics, ACLs and jobs: create, update, replace, delete;
group offsets: an update), plus warnings, a no-op change and the empty plan. Values are fixed, so the golden
files only change when a renderer does.
"""

from __future__ import annotations

from typing import Any

from reconciler.plan.definition import KIND_ORDER, Action, AnyChange, Plan, StateRef, change_of, summarize
from reconciler.resources.addresses import (
    Kind,
    acl_address,
    group_offsets_address,
    internal_topic_address,
    job_address,
    topic_address,
)

SPEC_DIGEST = "sha256:" + "0123456789abcdef" * 4
OLD_JOB_DIGEST = "sha256:" + "aaaabbbbccccdddd" * 4
NEW_JOB_DIGEST = "sha256:" + "1111222233334444" * 4
FLOW = "onprem-to-cloud"
#: What the environment variable the job spec references resolves to; must never appear in any rendering.
RESOLVED_SECRET = "hunter2-resolved-Pa55"


def topic_form(
    cluster: str,
    name: str,
    partitions: int,
    configs: dict[str, str],
    *,
    rf: int = -1,
    source: str | None = None,
) -> dict[str, Any]:
    form: dict[str, Any] = {
        "cluster": cluster,
        "name": name,
        "partitions": partitions,
        "replication_factor": rf,
        "configs": dict(sorted(configs.items())),
    }
    if source is not None:
        form["source"] = {"cluster": "onprem", "topic": source, "flow": FLOW}
    return form


def acl_form(
    topic: str, principal: str, entries: list[tuple[str, str]], managed: list[tuple[str, str]] | None
) -> dict[str, Any]:
    form: dict[str, Any] = {
        "cluster": "cloud",
        "principal": principal,
        "operation": "READ",
        "topic": topic,
        "pattern_type": "LITERAL",
        "entries": [{"host": h, "permission": p} for h, p in sorted(entries)],
    }
    if managed is not None:
        form["managed"] = [{"host": h, "permission": p} for h, p in sorted(managed)]
    return form


def job_spec() -> dict[str, Any]:
    """An effective flow spec as the planner puts it in `after.spec`: secrets as references only."""
    return {
        "flow": {"name": FLOW, "source": "onprem", "target": "cloud", "topics": {"include": ["orders\\..*"]}},
        "clusters": {
            "cloud": {
                "bootstrap_servers": "cloud:9092",
                "client": {"sasl.username": "mirror", "sasl.password": "${env:PASS}"},
            },
            "onprem": {"bootstrap_servers": "onprem:9092", "client": {"security.protocol": "PLAINTEXT"}},
        },
        "spark": {"deploy": "local", "master": "local[2]"},
    }


def job_after(flow: str, operation: str, digest: str) -> dict[str, Any]:
    return {"flow": flow, "operation": operation, "runner": "local", "spec_digest": digest, "spec": job_spec()}


def make_plan(changes: list[AnyChange], warnings: tuple[str, ...] = (), serial: int = 7) -> Plan:
    ordered = tuple(sorted(changes, key=lambda c: (KIND_ORDER.index(c.kind), c.address)))
    return Plan(
        plan_id="5f0c6d1e-8a3b-4c2d-9e7f-0a1b2c3d4e5f",
        created_at="2025-06-01T12:00:00Z",
        spec_digest=SPEC_DIGEST,
        state=StateRef(lineage="3c9e2b7a-1d4f-4a6b-8c0d-2e5f7a9b1c3d", serial=serial) if serial else StateRef(),
        changes=ordered,
        warnings=warnings,
        summary=summarize(ordered),
    )


def _topic_changes() -> list[AnyChange]:
    t = Kind.TOPIC
    retention = {"retention.ms": "604800000"}
    return [
        change_of(
            address=topic_address("cloud", "orders.eu"),
            kind=t,
            action=Action.CREATE,
            after=topic_form("cloud", "orders.eu", 6, {**retention, "cleanup.policy": "delete"}, source="orders.eu"),
            reason=f"mirror of onprem:orders.eu (flow {FLOW})",
        ),
        change_of(
            address=topic_address("cloud", "orders.us"),
            kind=t,
            action=Action.CREATE,
            after=topic_form("cloud", "orders.us", 3, {}, rf=3, source="orders.us"),
            reason=f"mirror of onprem:orders.us (flow {FLOW})",
        ),
        change_of(
            address=topic_address("cloud", "payments"),
            kind=t,
            action=Action.UPDATE,
            before=topic_form(
                "cloud",
                "payments",
                3,
                {"retention.ms": "86400000", "segment.bytes": "1073741824", "cleanup.policy": "delete"},
                rf=3,
            ),
            after=topic_form(
                "cloud",
                "payments",
                6,
                {"retention.ms": "604800000", "max.message.bytes": "2097152", "cleanup.policy": "delete"},
                rf=3,
                source="payments",
            ),
            reason=(
                f"onprem:payments (flow {FLOW}): partitions 3 -> 6 (source grew); "
                "configs max.message.bytes, retention.ms, segment.bytes"
            ),
        ),
        change_of(
            # Created by the flow's running job for a new source topic: recorded as kmirror's, no broker call.
            address=topic_address("cloud", "orders.apac"),
            kind=t,
            action=Action.UPDATE,
            before=topic_form("cloud", "orders.apac", 2, retention, rf=3),
            after=topic_form("cloud", "orders.apac", 2, retention, rf=3, source="orders.apac"),
            reason=(
                f"onprem:orders.apac (flow {FLOW}): created by the flow's replication job (job/{FLOW}) for a new "
                "source topic; recording it as kmirror's"
            ),
        ),
        change_of(
            address=topic_address("cloud", "ledger"),
            kind=t,
            action=Action.REPLACE,
            before=topic_form("cloud", "ledger", 12, {"cleanup.policy": "delete"}, rf=3),
            after=topic_form("cloud", "ledger", 4, {"cleanup.policy": "compact"}, rf=3, source="ledger"),
            reason="partition count can only shrink by re-creating the topic",
        ),
        change_of(
            address=topic_address("cloud", "legacy.audit"),
            kind=t,
            action=Action.DELETE,
            before=topic_form("cloud", "legacy.audit", 2, {"retention.ms": "-1"}, rf=3),
            reason="no flow replicates into it any more (prune.topics is on)",
        ),
        change_of(
            address=topic_address("cloud", "legacy.gone"),
            kind=t,
            action=Action.DELETE,
            reason="already gone; forgetting it",
        ),
        change_of(
            address=topic_address("cloud", "unchanged"),
            kind=t,
            action=Action.NOOP,
            before=topic_form("cloud", "unchanged", 1, {}),
            after=topic_form("cloud", "unchanged", 1, {}),
        ),
    ]


def _internal_topic_changes() -> list[AnyChange]:
    it = Kind.INTERNAL_TOPIC
    compact = {"cleanup.policy": "compact"}
    return [
        change_of(
            address=internal_topic_address("cloud", "onprem.checkpoints.internal"),
            kind=it,
            action=Action.CREATE,
            after=topic_form("cloud", "onprem.checkpoints.internal", 1, compact),
            reason=f"checkpoints of flow {FLOW}",
        ),
        change_of(
            address=internal_topic_address("onprem", "heartbeats"),
            kind=it,
            action=Action.UPDATE,
            before=topic_form("onprem", "heartbeats", 1, {"cleanup.policy": "delete", "retention.ms": "3600000"}),
            after=topic_form("onprem", "heartbeats", 1, {"cleanup.policy": "compact", "retention.ms": "3600000"}),
            reason=f"heartbeats of flow {FLOW}: must be compacted",
        ),
        change_of(
            address=internal_topic_address("onprem", "mm2-offset-syncs.cloud.internal"),
            kind=it,
            action=Action.REPLACE,
            before=topic_form("onprem", "mm2-offset-syncs.cloud.internal", 3, compact),
            after=topic_form("onprem", "mm2-offset-syncs.cloud.internal", 1, compact),
            reason=f"offset-syncs of flow {FLOW}: must have exactly 1 partition",
        ),
        change_of(
            address=internal_topic_address("cloud", "old.checkpoints.internal"),
            kind=it,
            action=Action.DELETE,
            before=topic_form("cloud", "old.checkpoints.internal", 1, compact),
            reason="checkpoints of a removed flow",
        ),
    ]


def _acl_changes() -> list[AnyChange]:
    a = Kind.ACL
    alice, bob, carol = "User:alice", "User:bob", "User:carol"
    return [
        change_of(
            address=acl_address("cloud", alice, "READ", "orders.eu"),
            kind=a,
            action=Action.CREATE,
            after=acl_form("orders.eu", alice, [("*", "ALLOW")], [("*", "ALLOW")]),
            reason="ACL sync from the source topic (+1 ALLOW)",
        ),
        change_of(
            address=acl_address("cloud", bob, "READ", "payments"),
            kind=a,
            action=Action.UPDATE,
            before=acl_form("payments", bob, [("10.0.0.1", "ALLOW"), ("10.0.0.9", "DENY"), ("*", "ALLOW")], None),
            after=acl_form(
                "payments",
                bob,
                [("*", "ALLOW"), ("10.0.0.2", "ALLOW"), ("10.0.0.9", "DENY")],
                [("10.0.0.2", "ALLOW"), ("10.0.0.9", "DENY")],
            ),
            reason="ACL sync from the source topic (+1 ALLOW, -1)",
        ),
        change_of(
            address=acl_address("cloud", carol, "READ", "ledger"),
            kind=a,
            action=Action.REPLACE,
            before=acl_form("ledger", carol, [("*", "ALLOW")], None),
            after={**acl_form("ledger", carol, [("*", "DENY")], [("*", "DENY")]), "pattern_type": "LITERAL"},
            reason="ACL sync from the source topic (+1 DENY, -1)",
        ),
        change_of(
            address=acl_address("cloud", carol, "READ", "legacy.audit"),
            kind=a,
            action=Action.DELETE,
            before=acl_form("legacy.audit", carol, [("*", "DENY")], None),
            reason="ACL sync from the source topic (-1)",
        ),
    ]


def _job_changes() -> list[AnyChange]:
    j = Kind.JOB
    return [
        change_of(
            address=job_address("eu-to-cloud"),
            kind=j,
            action=Action.CREATE,
            after=job_after("eu-to-cloud", "deploy", NEW_JOB_DIGEST),
            reason="new flow eu -> cloud",
        ),
        change_of(
            address=job_address(FLOW),
            kind=j,
            action=Action.REPLACE,
            before={"running": True, "spec_digest": OLD_JOB_DIGEST},
            after=job_after(FLOW, "redeploy", NEW_JOB_DIGEST),
            reason=(
                "spec changed (clusters.cloud.client.sasl.password, flow.topics.include); "
                "job running, restarts where it stopped"
            ),
        ),
        change_of(
            address=job_address("us-to-cloud"),
            kind=j,
            action=Action.UPDATE,
            before={"running": False, "spec_digest": NEW_JOB_DIGEST},
            after=job_after("us-to-cloud", "restart", NEW_JOB_DIGEST),
            reason="job is not running: spark-submit exited with code 1",
        ),
        change_of(
            address=job_address("old-flow"),
            kind=j,
            action=Action.DELETE,
            before={"running": True, "spec_digest": OLD_JOB_DIGEST},
            reason="flow removed or disabled: stop the job gracefully (finishes the batch in flight)",
        ),
    ]


def _group_offsets_changes() -> list[AnyChange]:
    return [
        change_of(
            address=group_offsets_address("cloud", "billing"),
            kind=Kind.GROUP_OFFSETS,
            action=Action.UPDATE,
            after={
                "cluster": "cloud",
                "group": "billing",
                "translation": "mixed",
                "partitions": [
                    {
                        "topic": "orders.eu",
                        "partition": 1,
                        "source_offset": 500,
                        "target_offset": 498,
                        "current_offset": None,
                        "translation": "conservative",
                        "conservative_offset": 498,
                        "why": "the target holds record 498 that the source does not (a record written twice)",
                    },
                    {
                        "topic": "orders.eu",
                        "partition": 0,
                        "source_offset": 1200,
                        "target_offset": 1187,
                        "current_offset": 1100,
                        "translation": "exact",
                        "conservative_offset": 1181,
                    },
                    {
                        "topic": "payments",
                        "partition": 0,
                        "source_offset": 42,
                        "target_offset": 40,
                        "current_offset": 40,
                        "translation": "unknown",
                        "conservative_offset": 40,
                        "why": "could not read the records: payments/0: not read to its end within 10s",
                    },
                ],
            },
            reason="translated from onprem's committed offsets (group is EMPTY on cloud)",
        )
    ]


WARNINGS = (
    "topic/cloud/clicks: has 12 partitions, more than its source onprem:clicks (flow onprem-to-cloud) (6); "
    "partitions never shrink, so this is left as it is.",
    "flow onprem-to-cloud: the ACLs of 'onprem' cannot be read (no authorizer, or no DESCRIBE permission on the "
    "cluster); ACL sync skipped.",
    "topic/cloud/__weird_*name*: replication factor is 1, the flow asks for 3; kmirror reports this and does not "
    "reassign replicas.",
)


def full_plan() -> Plan:
    """Every kind and every action, with warnings and a no-op change."""
    changes = [
        *_topic_changes(),
        *_internal_topic_changes(),
        *_acl_changes(),
        *_job_changes(),
        *_group_offsets_changes(),
    ]
    return make_plan(changes, WARNINGS)


def topics_plan() -> Plan:
    return make_plan(_topic_changes())


def internal_topics_plan() -> Plan:
    return make_plan(_internal_topic_changes())


def acls_plan() -> Plan:
    return make_plan(_acl_changes())


def jobs_plan() -> Plan:
    return make_plan(_job_changes())


def group_offsets_plan() -> Plan:
    return make_plan(_group_offsets_changes())


def empty_plan() -> Plan:
    """A first plan against clusters that already match: no state yet, no changes, no warnings."""
    return make_plan([], serial=0)


def warnings_only_plan() -> Plan:
    return make_plan([], WARNINGS[1:2])


#: name -> plan, one set of golden files each.
PLANS = {
    "full": full_plan,
    "topics": topics_plan,
    "internal_topics": internal_topics_plan,
    "acls": acls_plan,
    "jobs": jobs_plan,
    "group_offsets": group_offsets_plan,
    "empty": empty_plan,
    "warnings_only": warnings_only_plan,
}


def doc_example_plan() -> Plan:
    """The example of docs/plan-format.md: a new remote topic, a grown one, an ACL, a job redeploy, a warning."""
    topics = [c for c in _topic_changes() if c.address in ("topic/cloud/orders.eu", "topic/cloud/payments")]
    return make_plan([*topics, _acl_changes()[0], _job_changes()[1]], WARNINGS[:1])
