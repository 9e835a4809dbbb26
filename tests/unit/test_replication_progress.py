"""What the job makes of Spark's progress events: per-partition shares of a batch, times, positions."""

from __future__ import annotations

import json

import pytest

from reconciler.replication.progress import OBSERVATION, batch_from_progress, offsets_json

pytestmark = pytest.mark.unit


def event(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "batchId": 7,
        "timestamp": "2026-11-21T23:50:26.000Z",
        "numInputRows": 100,
        "durationMs": {
            "latestOffset": 40,
            "walCommit": 10,
            "addBatch": 900,
            "commitOffsets": 50,
            "triggerExecution": 1000,
        },
        "sources": [
            {
                "startOffset": json.dumps({"orders": {"0": 10, "1": 0}}),
                "endOffset": json.dumps({"orders": {"0": 40, "1": 75}, "heartbeats": {"0": 3}}),
            }
        ],
        "observedMetrics": {OBSERVATION: {"n": 100, "bytes": 1000, "ts_min": 5, "ts_max": 9, "ts_sum": 700}},
    }
    base.update(over)
    return base


def test_counts_follow_offset_advances_and_add_up_to_the_exact_count() -> None:
    batch = batch_from_progress(event(numInputRows=100), lambda t: f"src.{t}")
    assert batch is not None
    counts = {(p.topic, p.partition): p.count for p in batch.partitions}
    # advances 30, 75 and 3 (a partition new to the batch starts at 0) add up to 108 offsets for 100 records
    assert sum(counts.values()) == 100
    assert counts == {("heartbeats", 0): 3, ("orders", 0): 28, ("orders", 1): 69}
    assert sum(p.bytes for p in batch.partitions) == 1000
    assert {p.remote_topic for p in batch.partitions} == {"src.orders", "src.heartbeats"}
    assert {(p.topic, p.partition): p.last_offset for p in batch.partitions}[("orders", 1)] == 74
    assert batch.ends[("orders", 0)] == 40


def test_times_mark_when_the_write_began_and_ended() -> None:
    batch = batch_from_progress(event(), str)
    assert batch is not None
    assert batch.duration_ms == 1000
    assert batch.read_ms - batch.started_ms == 50  # offsets chosen and logged before the write
    assert batch.phases["addBatch"] == 900


def test_idle_triggers_and_unreadable_offsets_give_nothing() -> None:
    assert batch_from_progress(event(numInputRows=0), str) is None
    assert offsets_json("not json") == {}
    assert offsets_json({"t": {"0": -1, "1": 5}}) == {("t", 1): 5}
