"""Failover readiness: the records a group would re-read on the target if it moved now, and the job's gauges."""

from __future__ import annotations

import pytest

from reconciler.core.mm2.wire import OffsetSync
from reconciler.core.offsets.history import SyncHistory
from reconciler.core.offsets.readiness import FailoverReadiness, failover_readiness
from reconciler.replication.metrics import ReplicationMetrics

pytestmark = pytest.mark.unit


def _history(*syncs: tuple[str, int, int, int]) -> SyncHistory:
    history = SyncHistory()
    for topic, partition, up, down in syncs:
        history.update(OffsetSync(topic, partition, up, down))
    history.mark_read_to_end()
    return history


def test_rereads_are_the_records_between_the_translated_offset_and_the_exact_position() -> None:
    # the job copied orders[0] 0..99 to target 500..599, syncs at 0, 50 (every offset_lag_max) and 99
    syncs = _history(("orders", 0, 0, 500), ("orders", 0, 50, 550), ("orders", 0, 99, 599), ("orders", 1, 10, 0))
    offsets = {("orders", 0): 60, ("orders", 1): 10, ("orders", 2): 3, ("other", 0): 5}
    rows = failover_readiness(
        "app", offsets, syncs, remote_topic=lambda t: f"src.{t}", replicated=lambda t: t == "orders"
    )
    assert rows == [
        # resumes at 551 (source 51); source 60 landed at 560: 51..59 are read again
        FailoverReadiness("app", "orders", 0, 60, "src.orders", 551, 9),
        FailoverReadiness("app", "orders", 1, 10, "src.orders", 0, 0),  # exactly on a sync: nothing re-read
        FailoverReadiness("app", "orders", 2, 3, "src.orders", None, None),  # no sync: cannot move yet
    ]
    assert [r.translatable for r in rows] == [True, True, False]
    assert syncs.translate_downstream(("orders", 0), 60) == rows[0].target_offset  # the checkpoint's own answer


def test_the_job_exports_rereads_translatability_and_checkpoint_age_per_group_partition() -> None:
    metrics = ReplicationMetrics("src", "tgt")
    first = [
        FailoverReadiness("app", "orders", 0, 60, "src.orders", 551, 9),
        FailoverReadiness("app", "orders", 2, 3, "src.orders", None, None),
    ]
    metrics.observe_failover("f", first, at=1000.0)
    metrics.observe_failover("f", [first[0]], at=1010.0)  # orders[2] gone from the group: its series go too
    got = {
        (s.name, s.labels["group"], s.labels["topic"], s.labels["partition"], s.labels["flow"]): s.value
        for family in metrics.collect()
        for s in family.samples
        if s.name.startswith("kmirror_group_")
    }
    assert got[("kmirror_group_failover_rereads", "app", "orders", "0", "f")] == 9
    assert got[("kmirror_group_failover_translatable", "app", "orders", "0", "f")] == 1
    assert got[("kmirror_group_checkpoint_age_seconds", "app", "orders", "0", "f")] > 0
    assert not any(k[2:4] == ("orders", "2") for k in got)


def test_checkpoint_age_grows_while_a_partition_stops_translating() -> None:
    metrics = ReplicationMetrics("src", "tgt")
    ok = FailoverReadiness("app", "orders", 0, 60, "src.orders", 551, 9)
    stuck = FailoverReadiness("app", "orders", 0, 60, "src.orders", None, None)
    metrics.observe_failover("f", [ok], at=1000.0)
    metrics.observe_failover("f", [stuck], at=1030.0)
    samples = {
        s.name: s.value for family in metrics.collect() for s in family.samples if s.name.startswith("kmirror_group_")
    }
    assert samples["kmirror_group_failover_translatable"] == 0
    assert "kmirror_group_failover_rereads" not in samples
    assert samples["kmirror_group_checkpoint_age_seconds"] > 1030.0 - 1000.0  # since it last translated, at 1000
