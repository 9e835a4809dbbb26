"""A `start_from` time becomes explicit Spark `startingOffsets` at a flow's first start: Kafka's offsets-for-times
answer per partition, a partition with no record at or after the time at its end; a checkpoint or a lost
checkpoint's offset-syncs still win."""

from __future__ import annotations

import json

import pytest

from reconciler.replication.query import resume_offsets, source_options
from reconciler.replication.start_offsets import starting_offsets_at
from reconciler.spec.loader import load_text

pytestmark = pytest.mark.unit


def test_each_partition_starts_at_its_first_record_at_or_after_the_time() -> None:
    at_time = {("orders", 0): 17, ("orders", 1): -1, ("orders", 2): 0, ("pay", 0): 5}
    ends = {("orders", 1): 40}
    assert starting_offsets_at({"pay": 1, "orders": 3}, at_time, ends) == {
        "orders": {"0": 17, "1": 40, "2": 0},
        "pay": {"0": 5},
    }


def test_a_partition_without_an_answer_starts_at_its_end_when_the_query_starts() -> None:
    """Spark wants every partition listed: one the lookup missed gets Spark's code for its end (-1)."""
    assert starting_offsets_at({"orders": 2}, {("orders", 0): 3}, {}) == {"orders": {"0": 3, "1": -1}}


def test_a_lost_checkpoint_resumes_after_the_syncs_and_a_partition_without_one_at_the_time() -> None:
    at_start = {"orders": {"1": 9, "2": 30}}
    offsets = resume_offsets({"orders": 3, "pay": 1}, {("orders", 0): 41}, "2026-11-01T00:00:00Z", at_start)
    assert offsets == {"orders": {"0": 42, "1": 9, "2": 30}, "pay": {"0": -2}}


def test_a_lost_checkpoint_with_a_duration_starts_unsynced_partitions_at_earliest() -> None:
    """The first start a duration counted from is forgotten with the checkpoint: copying more beats skipping."""
    assert resume_offsets({"orders": 2}, {("orders", 1): 7}, "7d") == {"orders": {"0": -2, "1": 8}}


def _flow(start: str):  # type: ignore[no-untyped-def]
    text = f"""version: 1
clusters: {{a: {{bootstrap_servers: "a:9092"}}, b: {{bootstrap_servers: "b:9092"}}}}
state: {{cluster: b}}
flows:
  - {{name: f, source: a, target: b, replication: {{start_from: {start}}}}}
"""
    return load_text(text).state.flows[0]


def test_spark_gets_the_looked_up_offsets_and_never_a_time_it_cannot_parse() -> None:
    flow = _flow("'2026-11-01T00:00:00Z'")
    resolved = json.dumps({"orders": {"0": 17}})
    assert source_options(flow, {}, {}, "realtime", resolved)["startingOffsets"] == resolved
    # With a checkpoint nothing is looked up: Spark ignores the option then, but parses it.
    assert source_options(flow, {}, {}, "microbatch")["startingOffsets"] == "earliest"
    assert source_options(_flow("latest"), {}, {}, "microbatch")["startingOffsets"] == "latest"
