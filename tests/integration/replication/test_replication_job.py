"""The replication job, run for real by LocalRunner (spark-submit, local[2]) from a Kafka 3.9 source to a 4.x target.

One job serves the whole module (starting Spark costs ~20 s on a 2-core machine); each test uses its own topics
under the module's prefix, which the flow's filter includes. In file order: fidelity, new topics and partitions,
offset-syncs and heartbeats, the metrics endpoint, redeploy with a widened filter, kill -9 and deploy again,
graceful stop. Duplicates after kill -9 are counted and printed (at least once); a graceful redeploy must produce
none.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import struct
import time
import urllib.request
from typing import Any

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from reconciler.core.mm2.wire import Heartbeat, OffsetSync, TopicPartition
from reconciler.core.offsets.translation import OffsetSyncStore
from tests.integration.replication.conftest import (
    Flow,
    Rec,
    SequenceProducer,
    add_partitions,
    create_topic,
    end_offsets,
    partition_count,
    read_partition,
    read_topic,
    wait_for,
    wait_replicated,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # every test here needs the module's Spark job (~30 s+)

DAY_MS = 86_400_000


def _producer(flow: Flow, **extra: Any) -> Producer:
    return Producer(flow.source.config(**{"enable.idempotence": True, "linger.ms": 5, **extra}))


def _headers(seq: int) -> tuple[tuple[str, bytes | None], ...]:
    if seq % 5 == 0:
        return ()  # no headers at all
    headers: list[tuple[str, bytes | None]] = [("seq", str(seq).encode()), ("dup", b"a"), ("dup", b"b")]
    if seq % 11 == 0:
        headers.append(("empty", None))
    return tuple(headers)


@pytest.fixture(scope="module", autouse=True)
def running(flow: Flow) -> Flow:
    """The module's job, deployed once before the first test."""
    flow.deploy()
    info = flow.runner.status().jobs[flow.name]
    assert info.running, info.detail
    assert info.spec_digest == flow.state.flow_digest(flow.name)
    return flow


def test_fidelity_keys_values_headers_timestamps_order_tombstones_and_aborted_transactions(flow: Flow) -> None:
    records, compacted = flow.topic("records"), flow.topic("compacted")
    create_topic(flow.source, records, 3)
    create_topic(flow.source, compacted, 2, {"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000"})
    base_ts = int(time.time() * 1000) - DAY_MS
    expected: dict[str, dict[int, list[Rec]]] = {records: {0: [], 1: [], 2: []}, compacted: {0: [], 1: []}}

    plain = _producer(flow)

    def send(topic: str, seq: int, partition: int, *, key: bytes | None, value: bytes | None) -> None:
        headers = _headers(seq)
        ts = base_ts + seq * 7
        plain.produce(topic, key=key, value=value, headers=list(headers), timestamp=ts, partition=partition)
        expected[topic][partition].append(Rec(key, value, headers, ts))

    seq = 0
    for _ in range(300):
        key = None if seq % 7 == 0 else f"k{seq % 40}".encode()
        value = None if seq % 13 == 0 else f"value-{seq}".encode() * (1 + seq % 3)
        send(records, seq, seq % 3, key=key, value=value)
        seq += 1
    for i in range(60):  # keyed records, every third one a tombstone for an earlier key
        key = f"ck{i % 10}".encode()
        send(compacted, seq, i % 2, key=key, value=None if i % 3 == 2 else f"c-{seq}".encode())
        seq += 1
    assert plain.flush(30) == 0

    # One aborted and one committed transaction, with plain records around them.
    txn = _producer(flow, **{"transactional.id": f"{flow.prefix}-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(30):
        txn.produce(records, key=b"aborted", value=f"aborted-{i}".encode(), partition=i % 3)
    txn.flush(30)
    txn.abort_transaction(30)
    for _ in range(30):
        send(records, seq, seq % 3, key=f"k{seq}".encode(), value=f"after-abort-{seq}".encode())
        seq += 1
    assert plain.flush(30) == 0
    txn.begin_transaction()
    for i in range(30):
        ts = base_ts + seq * 7
        txn.produce(records, key=f"t{i}".encode(), value=f"committed-{seq}".encode(), partition=i % 3, timestamp=ts)
        expected[records][i % 3].append(Rec(f"t{i}".encode(), f"committed-{seq}".encode(), (), ts))
        seq += 1
    txn.commit_transaction(30)
    for _ in range(30):
        send(records, seq, seq % 3, key=f"k{seq}".encode(), value=f"last-{seq}".encode())
        seq += 1
    assert plain.flush(30) == 0

    for topic, partitions in expected.items():
        wait_replicated(flow, topic, {p: len(recs) for p, recs in partitions.items()})
        time.sleep(1)  # nothing more arrives (no duplicates, no aborted records)
        got = read_topic(flow.target, flow.remote(topic))
        assert sorted(got) == sorted(partitions), f"{topic}: partitions differ"
        for p, recs in partitions.items():
            assert len(got[p]) == len(recs), f"{topic}/{p}: {len(got[p])} records on the target, {len(recs)} expected"
            for i, (want, have) in enumerate(zip(recs, got[p], strict=True)):
                assert have == want, f"{topic}/{p} record #{i}: {have} != {want}"
    copied = [r for rs in read_topic(flow.target, flow.remote(records)).values() for r in rs]
    assert not any(r.value and r.value.startswith(b"aborted") for r in copied)
    # The remote topic of the compacted source topic is compacted too (the planner's config sync).
    remote_configs = _explicit_configs(flow, flow.remote(compacted))
    assert remote_configs.get("cleanup.policy") == "compact"


def _explicit_configs(flow: Flow, topic: str) -> dict[str, str]:
    from reconciler.kafka_clients.admin import KafkaAdmin

    return KafkaAdmin("target", flow.target.config()).explicit_topic_configs([topic]).get(topic, {})


def test_new_topic_and_added_partitions_are_replicated_without_redeploy(flow: Flow) -> None:
    grow = flow.topic("grow")
    create_topic(flow.source, grow, 1)
    producer = _producer(flow)
    for i in range(50):
        producer.produce(grow, value=f"g{i}".encode(), partition=0)
    producer.flush(30)
    started = time.monotonic()
    wait_replicated(flow, grow, {0: 50}, timeout=60)
    print(f"new topic replicated after {time.monotonic() - started:.1f}s")

    add_partitions(flow.source, grow, 3)
    producer = _producer(flow)  # a fresh client, so it knows the new partitions
    wait_for("3 partitions", lambda: len(producer.list_topics(grow, timeout=10).topics[grow].partitions) == 3)
    for i in range(60):
        producer.produce(grow, value=f"grown{i}".encode(), partition=i % 3)
    producer.flush(30)
    started = time.monotonic()
    wait_replicated(flow, grow, {0: 70, 1: 20, 2: 20}, timeout=60)
    print(f"added partitions replicated after {time.monotonic() - started:.1f}s")
    assert partition_count(flow.target, flow.remote(grow)) == 3
    got = read_topic(flow.target, flow.remote(grow))
    assert [r.value for r in got[1]] == [f"grown{i}".encode() for i in range(60) if i % 3 == 1]
    assert [r.value for r in got[0]][:50] == [f"g{i}".encode() for i in range(50)]


def _decode_offset_sync(key: bytes, value: bytes) -> tuple[str, int, int, int]:
    """MM2's OffsetSync schema read by hand: key (topic STRING, partition INT32), value (INT64, INT64)."""
    (n,) = struct.unpack_from(">h", key, 0)
    topic = key[2 : 2 + n].decode()
    (partition,) = struct.unpack_from(">i", key, 2 + n)
    assert len(key) == 2 + n + 4 and len(value) == 16
    upstream, downstream = struct.unpack(">qq", value)
    return topic, partition, upstream, downstream


def _decode_heartbeat(key: bytes, value: bytes) -> tuple[str, str, int]:
    """MM2's Heartbeat schema read by hand: key (source STRING, target STRING), value (version INT16, INT64)."""
    (n,) = struct.unpack_from(">h", key, 0)
    source = key[2 : 2 + n].decode()
    (m,) = struct.unpack_from(">h", key, 2 + n)
    target = key[4 + n : 4 + n + m].decode()
    assert len(key) == 4 + n + m
    version, ts = struct.unpack(">hq", value)
    assert version == 0
    return source, target, ts


def test_offset_syncs_and_heartbeats_decode_and_make_sense(flow: Flow) -> None:
    topic = flow.topic("synced")
    create_topic(flow.source, topic, 2)
    producer = _producer(flow)
    for i in range(250):
        producer.produce(topic, value=f"s{i}".encode(), partition=i % 2)
    producer.flush(30)
    wait_replicated(flow, topic, {0: 125, 1: 125})
    remote = flow.remote(topic)
    source_ends = end_offsets(flow.source, topic)
    syncs_topic = flow.state.flow(flow.name).policy().offset_syncs_topic(flow.target_alias)

    def read_syncs() -> list[OffsetSync]:
        out = []
        for rec in read_partition(flow.source, syncs_topic, 0):
            assert rec.key is not None and rec.value is not None
            sync = OffsetSync.from_record(rec.key, rec.value)
            assert _decode_offset_sync(rec.key, rec.value) == (
                sync.topic,
                sync.partition,
                sync.upstream_offset,
                sync.downstream_offset,
            )
            out.append(sync)
        return out

    # Idle partitions get an exact last sync once the delayed ones are flushed (every few seconds).
    def caught_up() -> list[OffsetSync] | None:
        syncs = [s for s in read_syncs() if s.topic == topic]
        last = {s.partition: s.upstream_offset for s in syncs}
        return syncs if all(last.get(p) == end - 1 for p, end in source_ends.items()) else None

    syncs = wait_for("exact offset-syncs for the idle partitions", caught_up, timeout=60)
    store = OffsetSyncStore()  # MM2's start: the initial read keeps the newest sync per partition
    for s in read_syncs():
        store.update(s)
    store.mark_read_to_end()
    target_ends = end_offsets(flow.target, remote)
    lag_max = flow.state.flow(flow.name).offsets.offset_lag_max
    most_apart = lag_max + 1  # MM2's rule on every record: a sync once translation would lag by lag_max
    for p in (0, 1):
        mine = [s for s in syncs if s.partition == p]
        ups = [s.upstream_offset for s in mine]
        downs = [s.downstream_offset for s in mine]
        assert ups == sorted(ups) and downs == sorted(downs), "syncs are monotonic within a job's life"
        gaps = [b - a for a, b in itertools.pairwise(downs)]
        assert max(gaps) <= most_apart, f"partition {p}: syncs at most {most_apart} records apart: {downs}"
        source_records = {r.offset: r for r in read_partition(flow.source, topic, p)}
        target_records = {r.offset: r for r in read_partition(flow.target, remote, p)}
        for s in mine:  # each sync names a source record and exactly where it landed
            assert source_records[s.upstream_offset].value == target_records[s.downstream_offset].value
        # A group that consumed the whole source partition resumes at the end of the remote one.
        assert store.translate_downstream(TopicPartition(topic, p), source_ends[p]) == target_ends[p]
        # A group in the middle resumes at or shortly before the first record it has not consumed (MM2's rule
        # on the syncs themselves; the store's bounded history may keep fewer).
        landed = next(o for o, r in target_records.items() if r.value == source_records[60].value)
        before = [s for s in mine if s.upstream_offset <= 60][-1]
        translated = before.downstream_offset + (0 if before.upstream_offset == 60 else 1)
        assert 0 <= landed - translated <= most_apart, (landed, translated)

    # Heartbeats: emitted into the source, replicated to <source>.heartbeats on the target.
    policy = flow.state.flow(flow.name).policy()
    remote_heartbeats = flow.remote(policy.heartbeats_topic())
    beats = []
    for rec in read_partition(flow.target, remote_heartbeats, 0):
        assert rec.key is not None and rec.value is not None
        beat = Heartbeat.from_record(rec.key, rec.value)
        decoded = _decode_heartbeat(rec.key, rec.value)
        assert decoded == (beat.source_cluster_alias, beat.target_cluster_alias, beat.timestamp)
        if beat.source_cluster_alias == flow.source_alias:
            assert beat.target_cluster_alias == flow.target_alias
            assert rec.timestamp == beat.timestamp  # the record timestamp is kept through replication
            beats.append(beat)
    assert len(beats) >= 5
    stamps = [b.timestamp for b in beats]
    assert stamps == sorted(stamps)
    print(f"{len(beats)} heartbeats replicated; newest is {time.time() * 1000 - stamps[-1]:.0f} ms old")


def _job_status(flow: Flow) -> dict[str, Any]:
    job = flow.runner.job(flow.name)
    assert job is not None
    status: dict[str, Any] = json.loads((job.folder / "status.json").read_text())
    return status


def _scrape(flow: Flow) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """The job's /metrics, by sample name and sorted labels (the port from the flow's status.json)."""
    job = flow.runner.job(flow.name)
    assert job is not None
    port = json.loads((job.folder / "status.json").read_text())["metrics_port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_metrics_endpoint_has_mm2_names_counts_lag_and_latency(flow: Flow) -> None:
    topic = flow.topic("metered")
    create_topic(flow.source, topic, 2)
    producer = _producer(flow)
    produced = {0: 40, 1: 65}
    for p, n in produced.items():
        for i in range(n):
            producer.produce(topic, value=f"m{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    wait_replicated(flow, topic, produced)
    remote = flow.remote(topic)

    def labels(t: str, p: int) -> tuple[tuple[str, str], ...]:
        return tuple(
            sorted({"source": flow.source_alias, "target": flow.target_alias, "topic": t, "partition": str(p)}.items())
        )

    def caught_up() -> dict[str, dict[tuple[tuple[str, str], ...], float]] | None:
        m = _scrape(flow)
        lag = m.get("kmirror_partition_lag", {})
        return m if all(lag.get(labels(topic, p)) == 0 for p in produced) else None

    m = wait_for("lag 0 on the metrics endpoint", caught_up, timeout=60)
    for p, n in produced.items():
        key = labels(remote, p)  # MM2's series are labelled with the remote topic, lag with the source topic
        assert m["kmirror_record_count_total"][key] == n
        assert m["kmirror_byte_count_total"][key] > 0
        for name in ("record_age_ms", "replication_latency_ms"):
            avg, high, low = (m[f"kmirror_{name}_{s}"][key] for s in ("avg", "max", "min"))
            assert 0 <= low <= avg <= high < 120_000, (name, low, avg, high)
        assert m["kmirror_replication_latency_ms_max"][key] >= m["kmirror_record_age_ms_max"][key]
        assert m["kmirror_record_rate"][key] >= 0
    # Bytes are exact per batch and shared out to its partitions by record count (see docs/metrics.md): all
    # series add up to the bytes the job counted, which include this topic's.
    before = _job_status(flow)["bytes"]
    counted = sum(_scrape(flow)["kmirror_byte_count_total"].values())
    assert before <= counted <= _job_status(flow)["bytes"]  # heartbeats keep coming in between
    assert counted >= sum(len(f"m{i}") for n in produced.values() for i in range(n))
    top = (("source", flow.source_alias), ("target", flow.target_alias))
    assert m["kmirror_batches_total"][top] >= 1
    assert time.time() - m["kmirror_last_batch_timestamp_seconds"][top] < 600


def test_dashboard_and_alert_rules_name_only_what_the_running_job_exports(flow: Flow) -> None:
    """monitoring/: every kmirror_* metric and label the Grafana dashboard and the alert rules use is scraped here
    (a group with a committed offset on the source, so that the checkpointer's failover gauges are there too)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTp

    from tests.unit.test_monitoring_assets import check, dashboard_expressions, rule_expressions

    topic = flow.topic("watched")
    create_topic(flow.source, topic, 1)
    producer = _producer(flow)
    for i in range(5):
        producer.produce(topic, value=f"w{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    wait_replicated(flow, topic, {0: 5})
    consumer = Consumer(flow.source.config(**{"group.id": f"{topic}-app", "enable.auto.commit": False}))
    consumer.commit(offsets=[KafkaTp(topic, 0, 3)], asynchronous=False)
    consumer.close()

    def scraped() -> dict[str, set[str]] | None:
        samples = _scrape(flow)
        series = {name: {k for key in values for k, _ in key} for name, values in samples.items()}
        heartbeats = any("heartbeats" in str(k) for k in samples.get("kmirror_last_record_timestamp_seconds", {}))
        group = any(f"{topic}-app" in str(k) for k in samples.get("kmirror_group_failover_translatable", {}))
        return series if heartbeats and group and "kmirror_partition_lag" in series else None

    # the checkpointer runs every checkpoint_interval (60 s by default)
    series = wait_for("heartbeats, lag and the group's failover gauges on the metrics endpoint", scraped, timeout=150)
    assert check(dashboard_expressions(), series) == []
    assert check(rule_expressions(), series) == []


@pytest.mark.slow
def test_redeploy_with_widened_filter_mid_stream_loses_nothing(flow: Flow) -> None:
    old, new = flow.topic("redeployed"), f"wide{flow.prefix}.extra"
    create_topic(flow.source, old, 2)
    create_topic(flow.source, new, 2)
    producer = _producer(flow)
    for i in range(100):
        producer.produce(new, value=f"n{i}".encode(), partition=i % 2)
    producer.flush(30)
    widened = flow.widened(rf"wide{flow.prefix}\..*")
    assert widened.flow_digest(flow.name) != flow.state.flow_digest(flow.name)
    with SequenceProducer(flow.source, old, 2) as seq:
        remote = flow.remote(old)
        wait_for("the job to copy some records", lambda: sum(end_offsets(flow.target, remote).values()) > 1000)
        flow.state = widened
        flow.deploy()  # graceful stop (the batch in flight finishes), then start from the positions reached
        info = flow.runner.status().jobs[flow.name]
        assert info.running and info.spec_digest == widened.flow_digest(flow.name)
        time.sleep(3)
    total, duplicates = seq.check(flow.target, flow.remote(seq.topic))
    print(f"redeploy mid-stream: {total} records, none lost, {duplicates} duplicates")
    assert duplicates == 0, "a graceful stop finishes its batch and writes nothing after it"
    wait_replicated(flow, new, {0: 50, 1: 50})  # the newly included topic, from its earliest offset
    assert [r.value for r in read_partition(flow.target, flow.remote(new), 0)] == [
        f"n{i}".encode() for i in range(0, 100, 2)
    ]


@pytest.mark.slow
def test_kill_9_mid_stream_then_deploy_loses_nothing(flow: Flow) -> None:
    topic = flow.topic("killed")
    create_topic(flow.source, topic, 3)
    with SequenceProducer(flow.source, topic, 3) as seq:
        remote = flow.remote(topic)
        wait_for("the job to copy some records", lambda: sum(end_offsets(flow.target, remote).values()) > 1000)
        job = flow.runner.job(flow.name)
        assert job is not None and job.pid is not None and job.running
        os.killpg(job.pid, signal.SIGKILL)
        wait_for("the killed job to be reported not running", lambda: not flow.runner.status().jobs[flow.name].running)
        assert "exited" in flow.runner.status().jobs[flow.name].detail
        time.sleep(2)  # records keep arriving while the job is down
        flow.deploy()
        assert flow.runner.status().jobs[flow.name].running
        time.sleep(5)
    total, duplicates = seq.check(flow.target, flow.remote(seq.topic))
    print(f"kill -9 and redeploy: {total} records produced, none lost, {duplicates} duplicates")


def test_graceful_stop_finishes_and_exits_zero(flow: Flow) -> None:
    flow.runner.stop(flow.name)
    job = flow.runner.job(flow.name)
    assert job is not None and not job.running
    assert job.state == "stopped", job.error
    info = flow.runner.status().jobs[flow.name]
    assert not info.running and info.detail.startswith("stopped")
