"""Pure parts of the admin adapter: how batched requests are cut, and the collector's pause during bulk reads."""

from __future__ import annotations

import gc
import threading

import pytest

from reconciler.kafka_clients.admin import PARTITIONS_PER_REQUEST, _by_partitions, _GcPause

pytestmark = pytest.mark.unit


def test_admin_requests_stay_under_the_partition_limit_per_request() -> None:
    topics = [(f"t{i}", 1) for i in range(10_002)] + [("big", 7000)]
    chunks = _by_partitions(topics, lambda t: t[1])
    assert [t for c in chunks for t in c] == topics  # nothing lost, order kept
    assert all(sum(p for _, p in c) <= PARTITIONS_PER_REQUEST or len(c) == 1 for c in chunks)
    assert len(chunks) == 4  # 4000 + 4000 + 2002, then the 7000-partition topic alone


def test_apply_writes_each_partition_with_the_metadata_its_plan_row_carries() -> None:
    from reconciler.adapters.group_offsets import write_group_offsets
    from reconciler.kafka_clients.admin import Outcome
    from reconciler.plan.forms import GroupOffsetsForm

    calls = []

    class Admin:
        cluster = "dst"

        def alter_group_offsets(self, group, offsets, metadata=None):  # type: ignore[no-untyped-def]
            calls.append((group, dict(offsets), dict(metadata or {})))
            return Outcome(group, True)

    form = GroupOffsetsForm.model_validate(
        {
            "cluster": "dst",
            "group": "app",
            "partitions": [
                {"topic": "src.orders", "partition": 0, "target_offset": 91, "metadata": "tx-42"},
                {"topic": "src.orders", "partition": 1, "target_offset": 7},
            ],
        }
    )
    assert write_group_offsets(Admin(), form.group, *form.commits()).ok  # type: ignore[arg-type]
    assert calls == [("app", {("src.orders", 0): 91, ("src.orders", 1): 7}, {("src.orders", 0): "tx-42"})]


def test_the_collector_resumes_after_the_last_overlapping_bulk_read_and_only_if_it_ran_before() -> None:
    paused = _GcPause()
    assert gc.isenabled()
    try:
        first, second = paused(), paused()
        first.__enter__()
        second.__enter__()  # another cluster's read, in another thread in real use
        first.__exit__(None, None, None)
        assert not gc.isenabled()  # the second read still converts its answer
        second.__exit__(None, None, None)
        assert gc.isenabled()

        with pytest.raises(RuntimeError), paused():
            raise RuntimeError("the cluster did not answer")
        assert gc.isenabled()

        gc.disable()  # the caller's own choice is kept
        with paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_pause_is_safe_across_threads() -> None:
    paused = _GcPause()
    barrier = threading.Barrier(8)

    def read() -> None:
        with paused():
            barrier.wait(timeout=10)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert gc.isenabled()
