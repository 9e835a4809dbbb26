"""The source changing under a running job: partitions added while records flow, a topic deleted and re-created,
and records deleted (DeleteRecords) past the job's position while it was stopped. No acknowledged record that
still exists on the source may be missing on the target, and the job must not get stuck on any of them."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from tests.faults.conftest import (
    FaultWorld,
    Load,
    create_topic,
    read_values,
    report,
    wait_copied,
    wait_until,
)

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def _produce(world: FaultWorld, topic: str, values: range) -> None:
    producer = Producer(world.source.config(**{"enable.idempotence": True, "acks": "all", "log_level": 0}))
    for v in values:
        producer.produce(topic, value=str(v).encode(), partition=v % 2)
    assert producer.flush(60) == 0


def _on_target(world: FaultWorld, topic: str) -> set[int]:
    return {v for vs in read_values(world.target, world.remote(topic)).values() for v in vs}


@pytest.mark.timeout(900)
def test_partitions_added_and_records_deleted_past_the_job_lose_nothing_and_stick_nothing(world: FaultWorld) -> None:
    grow, truncated = (f"{world.prefix}{n}" for n in ("grow", "truncated"))
    for t in (grow, truncated):
        create_topic(world.source, t, 2)
    _produce(world, truncated, range(0, 100))
    admin = AdminClient(world.source.config())
    with Load(world.source, grow, 2, rate=1000) as load:
        world.kmirror("apply", "-f", str(world.spec()), "--auto-approve", check=True)
        wait_until("the first records copied", lambda: _on_target(world, truncated) >= set(range(100)), 180)

        # 1. Partitions added while records flow: the load writes to all four at once.
        admin.create_partitions([NewPartitions(grow, 4)])[grow].result(timeout=60)
        load.partitions = 4
        grown_at = time.monotonic()

        time.sleep(10)
    grow_result, grow_recovery = wait_copied(load, world.target, world.remote(grow), 300)

    # 2. Records deleted past the job's position: the job stopped, more written, most of it deleted, job back.
    wait_until(f"{truncated}'s first records copied", lambda: _on_target(world, truncated) >= set(range(100)), 120)
    world.stop_job()
    _produce(world, truncated, range(100, 400))
    c = Consumer(world.source.config(**{"group.id": f"probe-{world.id}"}))
    ends = {p: c.get_watermark_offsets(TopicPartition(truncated, p), timeout=10)[1] for p in (0, 1)}
    c.close()
    cut = [TopicPartition(truncated, p, ends[p] - 20) for p in (0, 1)]  # 20 of the 150 new records kept per partition
    for f in admin.delete_records(cut, request_timeout=60).values():
        f.result(timeout=60)
    kept = set(range(360, 400))  # the last 20 of each partition (values alternate between the two)
    _produce(world, truncated, range(400, 500))
    restarted = time.monotonic()
    world.kmirror("apply", "-f", str(world.spec()), "--auto-approve", check=True)
    wanted = kept | set(range(400, 500)) | set(range(100))
    wait_until(f"{truncated}'s surviving records copied", lambda: _on_target(world, truncated) >= wanted, 300)
    truncated_recovery = time.monotonic() - restarted
    lost_to_delete_records = len(set(range(100, 360)) - _on_target(world, truncated))

    report(
        "source_changes",
        records=grow_result.records,
        lost=grow_result.lost,
        duplicates=grow_result.duplicates,
        recovery_s=round(grow_recovery, 1),
        partitions_added_copied_after_s=round(time.monotonic() - grown_at, 1),
        truncated_recovery_s=round(truncated_recovery, 1),
        deleted_before_copied=lost_to_delete_records,
    )
    assert grow_result.lost == 0, f"{grow_result.lost} acknowledged records missing, e.g. {grow_result.lost_examples}"
    assert len(read_values(world.target, world.remote(grow))) == 4  # the remote topic grew with its source


@pytest.mark.timeout(480)
def test_a_source_topic_deleted_and_created_again_loses_nothing_silently_and_keeps_flowing(world: FaultWorld) -> None:
    """The job reads on from its positions in the old topic (Spark's checkpoint): records of the new topic below
    them are not copied. That must never be silent: every such record is counted in `kmirror status` and the
    metrics as data loss, and the records after them flow as before."""
    recreated = f"{world.prefix}recreated"
    create_topic(world.source, recreated, 2)
    _produce(world, recreated, range(0, 100))
    world.kmirror("apply", "-f", str(world.spec()), "--auto-approve", check=True)
    wait_until("the first records copied", lambda: _on_target(world, recreated) >= set(range(100)), 180)
    admin = AdminClient(world.source.config())
    admin.delete_topics([recreated], operation_timeout=60)[recreated].result(timeout=90)
    wait_until(f"{recreated} gone", lambda: recreated not in admin.list_topics(timeout=10).topics, 60)
    create_topic(world.source, recreated, 2)
    _produce(world, recreated, range(1000, 1100))
    time.sleep(12)  # the job compares topic ids every few seconds
    _produce(world, recreated, range(2000, 2100))
    started = time.monotonic()
    wait_until(
        "the records produced after the re-creation's first ones copied",
        lambda: _on_target(world, recreated) >= set(range(2000, 2100)),
        180,
    )
    missing = set(range(1000, 1100)) - _on_target(world, recreated)

    def status() -> dict:  # type: ignore[type-arg]
        out = world.kmirror("status", "-f", str(world.spec()), "--format", "json", check=True)
        (flow,) = json.loads(out.stdout)["flows"]
        return flow  # type: ignore[no-any-return]

    try:
        flow = wait_until(
            "the data loss counted", lambda: (f := status())["data_loss_records"] >= len(missing) and f, 60
        )
    except AssertionError as exc:
        raise AssertionError(f"{len(missing)} records missing; the job reports {status()}") from exc
    report(
        "source_recreated",
        records=300,
        not_copied=len(missing),
        counted_as_lost=flow["data_loss_records"],
        recovery_s=round(time.monotonic() - started, 1),
    )
    assert len(missing) <= flow["data_loss_records"], f"{len(missing)} records missing, none counted: silent loss"
    if missing:
        last = flow["data_loss_last"] or ""
        assert "re-created" in last or "created again" in last, flow
        metrics = urllib.request.urlopen(flow["metrics_url"], timeout=10).read().decode()
        lost = [ln for ln in metrics.splitlines() if ln.startswith("kmirror_data_loss_records_total")]
        assert lost and float(lost[0].rsplit(" ", 1)[1]) >= len(missing), lost
