"""Preflight: the brokers check a plan's topic changes before anyone applies them (validate_only requests).

After the pure planner has built a plan, every topic create and config update in it is sent once more with
`validate_only=True`, batched per cluster: the broker runs its own checks (unknown config names, such as
configs Kafka 4.0 removed, values out of range, replication factors) and creates or changes nothing. A refusal
becomes a plan warning naming the address and the broker's words, so a reviewer sees it before the merge.
Apply still runs the change and reports the failure on its own if the world did not change in between.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from reconciler.kafka_clients.admin import KafkaAdmin, Outcome
from reconciler.plan.definition import Action, Plan, ResourceChange, config_ops
from reconciler.resources.addresses import Kind


def preflight_warnings(plan: Plan, admins: Mapping[str, KafkaAdmin]) -> list[str]:
    creates: dict[str, list[ResourceChange]] = defaultdict(list)
    updates: dict[str, list[ResourceChange]] = defaultdict(list)
    for c in plan.changes:
        if c.kind not in (Kind.TOPIC, Kind.INTERNAL_TOPIC) or c.after is None:
            continue
        if c.action == Action.CREATE:
            creates[c.after["cluster"]].append(c)
        elif c.action == Action.UPDATE and c.before is not None and config_ops(c) != ({}, []):
            updates[c.after["cluster"]].append(c)
    warnings: list[str] = []
    for cluster, changes in creates.items():
        topics = [(a["name"], a["partitions"], a["replication_factor"], a["configs"]) for a in _afters(changes)]
        warnings += _refusals(changes, admins[cluster].create_topics(topics, validate_only=True))
    for cluster, changes in updates.items():
        ops = {(c.after or {})["name"]: config_ops(c) for c in changes}
        warnings += _refusals(changes, admins[cluster].alter_topic_configs(ops, validate_only=True))
    return warnings


def _refusals(changes: list[ResourceChange], outcomes: list[Outcome]) -> list[str]:
    return [
        f"{c.address}: the broker refuses this change ({o.message}); apply will fail for it. Fix the source "
        "topic, or leave the config out with the flow's sync.config_exclude."
        for c, o in zip(changes, outcomes, strict=True)
        if not o.ok and not o.transient
    ]


def _afters(changes: list[ResourceChange]) -> list[dict[str, Any]]:
    return [c.after or {} for c in changes]
