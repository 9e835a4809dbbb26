"""The replication benchmark's fleet helpers against a real broker: the remote topics created with every
partition's leader confirmed before a replicator starts, deleted once its run is measured, and a copy that stops
moving reported as stalled instead of waiting for the phase timeout. Short: one topic of a few partitions, a
2-second stall."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from benchmarks.replication.common import Cluster, delete_topics, total_end_offsets
from benchmarks.replication.phases import precreate_remotes, watch_copy
from tests.conftest import KafkaCluster

pytestmark = [pytest.mark.integration]


def _cluster(c: KafkaCluster) -> Cluster:
    return Cluster(c.name, c.home or Path("."), c.bootstrap_servers, 0)


def test_remote_topics_created_with_leaders_then_deleted(target: KafkaCluster) -> None:
    cluster = _cluster(target)
    names = [f"bench-h-{uuid.uuid4().hex[:8]}.d{i:02d}" for i in range(3)]
    seconds = precreate_remotes(cluster, names, 4)
    assert seconds >= 0
    md = cluster.admin().list_topics(timeout=10)
    for name in names:
        assert len(md.topics[name].partitions) == 4
        assert all(p.leader >= 0 for p in md.topics[name].partitions.values())
    delete_topics(cluster, [*names, "bench-h-never-created"])
    deadline = time.monotonic() + 30
    while set(names) & set(cluster.admin().list_topics(timeout=10).topics) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not set(names) & set(cluster.admin().list_topics(timeout=10).topics)


def test_a_copy_that_stops_moving_is_reported_as_stalled(target: KafkaCluster) -> None:
    cluster = _cluster(target)
    topic = f"bench-h-{uuid.uuid4().hex[:8]}"
    precreate_remotes(cluster, [topic], 2)
    producer = Producer({"bootstrap.servers": target.bootstrap_servers})
    for i in range(25):
        producer.produce(topic, b"x", partition=i % 2)
    assert producer.flush(30) == 0
    assert total_end_offsets(cluster.admin(), [topic]) == 25
    # the timeout path raises: a timing back with `stalled` set is the stall path
    timing = watch_copy(cluster, [topic], 40, timeout=600, on_window_start=lambda: None, stall_s=2.0)
    assert timing.stalled is not None
    assert timing.stalled["records_on_target"] == 25 and timing.stalled["missing"] == 15
    assert timing.final_count == 25
    # all 25 were there at the first poll: the window never opened past it, so done is that first poll
    assert timing.done == pytest.approx(timing.first_record, abs=0.5)
    delete_topics(cluster, [topic])
