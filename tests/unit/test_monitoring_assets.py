"""The Grafana dashboard and the Prometheus alerting rules name only metrics and labels the job really exports.

A dashboard panel or an alert on a metric that does not exist is silent forever: it shows "No data", it never
fires. Every `kmirror_*` name in the dashboard (panels and template variables) and in the rules must be a series
`ReplicationMetrics` exports once it has seen a batch, and every label they select on or aggregate by must be one
of its labels. The integration test in tests/integration/replication/test_replication_job.py checks the same
against a running job's /metrics.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from reconciler.core.offsets.readiness import FailoverReadiness
from reconciler.replication.metrics import PartitionBatch, ReplicationMetrics

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "monitoring" / "grafana" / "kmirror.json"
RULES = ROOT / "monitoring" / "prometheus" / "kmirror-rules.yml"

_METRIC = re.compile(r"\bkmirror_[a-z0-9_]+")
_SELECTOR = re.compile(r"\b(kmirror_[a-z0-9_]+)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
_LABEL_VALUES = re.compile(r"label_values\(\s*(kmirror_[a-z0-9_]+)[^,]*,\s*([a-zA-Z_]+)\s*\)")


def dashboard_expressions() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())

    def panels(items: list[dict[str, object]]) -> Iterator[dict[str, object]]:
        for p in items:
            yield p
            yield from panels(p.get("panels", []))  # type: ignore[arg-type]

    exprs = [str(t["expr"]) for p in panels(doc["panels"]) for t in p.get("targets", [])]  # type: ignore[union-attr]
    exprs += [str(v["definition"]) for v in doc["templating"]["list"] if v.get("type") == "query"]
    return exprs


def rule_expressions() -> list[str]:
    doc = YAML(typ="safe").load(RULES.read_text())
    return [str(rule["expr"]) for group in doc["groups"] for rule in group["rules"]]


def exported() -> dict[str, set[str]]:
    """Series name -> label names, as a scrape of a job that copied one batch (heartbeats included) and ran a
    checkpoint cycle shows them."""
    metrics = ReplicationMetrics("onprem", "cloud")
    now = int(time.time() * 1000)
    metrics.observe_batch(
        [
            PartitionBatch("orders", "onprem.orders", 0, 3, 30, 12, now - 300, now - 100, 3 * now - 600),
            PartitionBatch("heartbeats", "onprem.heartbeats", 0, 1, 20, 4, now - 5, now - 5, now - 5),
        ],
        polled_ms=now,
        written_ms=now + 20,
    )
    metrics.observe_source_ends({("orders", 0): 20})
    metrics.observe_failover("onprem-to-cloud", [FailoverReadiness("app", "orders", 0, 60, "onprem.orders", 551, 9)])
    out: dict[str, set[str]] = {}
    for family in metrics.collect():
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


def check(expressions: list[str], series: dict[str, set[str]]) -> list[str]:
    """Every problem: a kmirror_* name that is not exported, a label it does not have."""
    problems = []
    for expr in expressions:
        names = set(_METRIC.findall(expr))
        for name in sorted(names - series.keys()):
            problems.append(f"{name} (in {expr!r}) is not exported")
        labels = set().union(*(series.get(n, set()) for n in names)) if names else set()
        for name, inner in _SELECTOR.findall(expr):
            for label in _MATCHER.findall(inner):
                if label not in series.get(name, set()):
                    problems.append(f"{name} has no label {label!r} (in {expr!r})")
        for group in _GROUPING.findall(expr):
            for label in (x.strip() for x in group.split(",") if x.strip()):
                if label not in labels:
                    problems.append(f"no metric of {expr!r} has label {label!r}")
        for name, label in _LABEL_VALUES.findall(expr):
            if label not in series.get(name, set()):
                problems.append(f"{name} has no label {label!r} (in {expr!r})")
    return problems


def test_every_metric_and_label_of_the_dashboard_and_the_rules_is_exported() -> None:
    series = exported()
    dashboard, rules = dashboard_expressions(), rule_expressions()
    assert check(dashboard, series) == []
    assert check(rules, series) == []
    named = {n for e in dashboard + rules for n in _METRIC.findall(e)}
    # what the issue asks the dashboard and the rules to cover, by the metrics that show it
    for needed in (
        "kmirror_record_rate",  # throughput
        "kmirror_partition_lag",  # lag per topic/partition
        "kmirror_replication_latency_ms_max",
        "kmirror_record_age_ms_max",
        "kmirror_last_record_timestamp_seconds",  # heartbeat age, on the heartbeats topic
        "kmirror_job_restarts_total",
        "kmirror_data_loss_records_total",
        "kmirror_data_loss_events_total",
        "kmirror_group_failover_rereads",  # failover readiness
        "kmirror_group_failover_translatable",
        "kmirror_group_checkpoint_age_seconds",
    ):
        assert needed in named, needed


def test_the_check_catches_a_misspelt_metric_and_a_label_the_metric_lacks() -> None:
    series = exported()
    assert check(["rate(kmirror_records_total[5m])"], series) == [
        "kmirror_records_total (in 'rate(kmirror_records_total[5m])') is not exported"
    ]
    assert check(['kmirror_job_restarts_total{topic="x"}'], series) != []
    assert check(["sum by (partition) (kmirror_job_restarts_total)"], series) != []
    assert check(["label_values(kmirror_batches_total, topic)"], series) != []


def test_the_rules_are_alerts_with_a_severity_and_a_summary() -> None:
    doc = YAML(typ="safe").load(RULES.read_text())
    for rule in (r for g in doc["groups"] for r in g["rules"]):
        assert rule["alert"].startswith("Kmirror")
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
