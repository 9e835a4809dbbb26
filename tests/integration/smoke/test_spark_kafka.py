"""A real Spark reads a real Kafka topic through the Kafka connector: keys, values, headers, timestamps."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import KafkaCluster

pytestmark = pytest.mark.integration


def test_spark_batch_read_sees_keys_values_headers_timestamps(
    spark: Any, source: KafkaCluster, topic_name: str
) -> None:
    admin = AdminClient(source.config())
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(timeout=20)
    producer = Producer(source.config())
    expected = {}
    # An hour ago: a record older than the topic's retention (7 days) rolls its segment at the next append and is
    # deleted by the broker's next retention check (every 5 minutes), so the read saw 0 rows (CI, twice).
    base_ts = int(time.time() * 1000) - 3_600_000
    for i in range(40):
        key = None if i == 7 else f"key-{i}".encode()
        value = None if i == 9 else f"value-{i}".encode()  # a tombstone
        headers = [("seq", str(i).encode()), ("dup", b"a"), ("dup", b"b")]
        ts = base_ts + i * 1000
        producer.produce(topic_name, key=key, value=value, headers=headers, timestamp=ts, partition=i % 2)
        expected[i] = (key, value, headers, ts)
    assert producer.flush(30) == 0

    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", source.bootstrap_servers)
        .option("assign", json.dumps({topic_name: [0, 1]}))
        .option("includeHeaders", "true")
        .option("startingOffsets", "earliest")
        # Explicit end offsets (20 records per partition): the read is exactly the records produced.
        .option("endingOffsets", json.dumps({topic_name: {"0": 20, "1": 20}}))
    )
    # A topic created a moment ago may not be in the connector's first metadata yet; read again, for a bounded time.
    deadline = time.monotonic() + 30
    while not (rows := reader.load().selectExpr("*", "unix_millis(timestamp) AS timestamp_ms").collect()):
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    assert len(rows) == 40
    by_seq = {}
    for row in rows:
        headers = [(h["key"], bytes(h["value"])) for h in row["headers"]]
        seq = int(dict(headers)["seq"])
        by_seq[seq] = row
        key, value, exp_headers, ts = expected[seq]
        assert (bytes(row["key"]) if row["key"] is not None else None) == key
        assert (bytes(row["value"]) if row["value"] is not None else None) == value
        assert headers == exp_headers  # order and repeated keys kept
        assert row["timestamp_ms"] == ts
        assert row["partition"] == seq % 2
        assert row["timestampType"] == 0  # CreateTime
    # Offsets follow production order within each partition.
    for p in (0, 1):
        seqs = [s for s, r in sorted(by_seq.items(), key=lambda kv: kv[1]["offset"]) if r["partition"] == p]
        assert seqs == sorted(seqs)
