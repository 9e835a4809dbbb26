"""The local clusters are real Kafka: topics, keyed records with headers and timestamps, consumer groups."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import KafkaCluster

pytestmark = pytest.mark.integration


def _create_topic(cluster: KafkaCluster, topic: str, partitions: int) -> None:
    admin = AdminClient(cluster.config())
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=15)
    futures[topic].result(timeout=20)


@pytest.mark.parametrize("which", ["source", "target"])
def test_produce_and_consume_keeps_keys_headers_timestamps_and_order(
    which: str, request: pytest.FixtureRequest, topic_name: str
) -> None:
    cluster: KafkaCluster = request.getfixturevalue(which)
    _create_topic(cluster, topic_name, partitions=3)
    producer = Producer(cluster.config(**{"enable.idempotence": True}))
    sent = []
    base_ts = int(time.time() * 1000) - 3_600_000  # within retention: older records may be deleted mid-test
    for i in range(300):
        partition = i % 3
        key = None if i % 50 == 0 else f"k{i}".encode()
        headers = [("seq", str(i).encode()), ("origin", which.encode())]
        ts = base_ts + i
        producer.produce(topic_name, value=f"v{i}".encode(), key=key, partition=partition,
                         headers=headers, timestamp=ts)  # fmt: skip
        sent.append((partition, key, f"v{i}".encode(), headers, ts))
    assert producer.flush(30) == 0

    consumer = Consumer(cluster.config(**{"group.id": f"g-{topic_name}", "auto.offset.reset": "earliest",
                                          "enable.auto.commit": False}))  # fmt: skip
    consumer.assign([TopicPartition(topic_name, p, 0) for p in range(3)])
    got = []
    while len(got) < len(sent):
        msg = consumer.poll(10)
        assert msg is not None, f"only {len(got)} of {len(sent)} records came back from {which}"
        assert msg.error() is None, msg.error()
        got.append((msg.partition(), msg.key(), msg.value(), msg.headers(), msg.timestamp()[1]))
    consumer.close()

    for p in range(3):
        assert [g for g in got if g[0] == p] == [s for s in sent if s[0] == p]


def test_clusters_run_the_versions_of_a_migration(source: KafkaCluster, target: KafkaCluster) -> None:
    if source.version is None:
        pytest.skip("existing clusters from the environment: their versions are theirs")
    assert source.version.startswith("3.9.")
    assert target.version is not None and target.version.startswith("4.")
    # Both answer for real: the cluster metadata lists the one broker of each.
    for cluster in (source, target):
        admin = AdminClient(cluster.config())
        described = admin.describe_cluster(request_timeout=10).result(timeout=15)
        assert len(described.nodes) == 1
