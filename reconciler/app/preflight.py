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

from reconciler.kafka_clients.admin import KafkaAdmin, Outcome
from reconciler.plan.definition import Action, InternalTopicChange, Plan, TopicChange, config_ops
from reconciler.plan.forms import TopicForm


def preflight_warnings(plan: Plan, admins: Mapping[str, KafkaAdmin]) -> list[str]:
    creates: dict[str, list[tuple[TopicChange | InternalTopicChange, TopicForm]]] = defaultdict(list)
    updates: dict[str, list[tuple[TopicChange | InternalTopicChange, TopicForm]]] = defaultdict(list)
    for c in plan.changes:
        if not isinstance(c, TopicChange | InternalTopicChange) or c.after is None:
            continue
        if c.action == Action.CREATE:
            creates[c.after.cluster].append((c, c.after))
        elif c.action == Action.UPDATE and c.before is not None and config_ops(c) != ({}, []):
            updates[c.after.cluster].append((c, c.after))
    warnings: list[str] = []
    for cluster, items in creates.items():
        topics = [(a.name, a.partitions, a.replication_factor, a.configs) for _, a in items]
        warnings += _refusals([c for c, _ in items], admins[cluster].create_topics(topics, validate_only=True))
    for cluster, items in updates.items():
        ops = {a.name: config_ops(c) for c, a in items}
        warnings += _refusals([c for c, _ in items], admins[cluster].alter_topic_configs(ops, validate_only=True))
    return warnings


def _refusals(changes: list[TopicChange | InternalTopicChange], outcomes: list[Outcome]) -> list[str]:
    return [
        f"{c.address}: the broker refuses this change ({o.message}); apply will fail for it. Fix the source "
        "topic, or leave the config out with the flow's sync.config_exclude."
        for c, o in zip(changes, outcomes, strict=True)
        if not o.ok and not o.transient
    ]
