"""The replication job in real-time mode (Spark 4.1), the default, run for real by LocalRunner.

One job serves the module, from a file with no Spark settings but a 30 s checkpoint interval: the job chooses
real-time mode, deals its nine source partitions to two tasks (each reads its share with one consumer,
`jvm/GroupedKafkaSource.java`) and sizes its own master (two task slots per task: local[4]). Records must land
on the target well within the interval (in micro-batch mode with that trigger they would wait for the next
batch), with the same fidelity as micro-batch mode (keys, values, headers, timestamps, order) and MM2
offset-syncs from the interceptor. A graceful stop waits for the running batch to commit; nothing is lost
across stop and redeploy, and the duplicates (records the next batch had sent before the stop reached it) are
counted and printed. Records deleted past the checkpoint while the job is stopped are skipped, the rest copied.
Source partitions added while the job runs join its tasks: it stays in real-time mode and loses nothing.
Real-time mode asked for on a master with fewer task slots than partitions runs a task per slot, losing nothing
across a redeploy.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from reconciler.artifacts.class_archive import archive_path, ensure_driver_archive
from reconciler.artifacts.driver_home import driver_home
from reconciler.jobcontract.job_report import read_report
from reconciler.runners import LocalRunner
from tests.conftest import KafkaCluster
from tests.integration.replication.conftest import (
    Flow,
    Rec,
    SequenceProducer,
    create_topic,
    desired_state,
    end_offsets,
    kill_job,
    read_topic,
    stop_or_kill,
    wait_for,
    wait_replicated,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

INTERVAL_S = 30
INTERVAL = {"spark.kmirror.triggerInterval": f"{INTERVAL_S} seconds"}
CLASS_LOG = "driver-classes.log"
#: Classes the job's first batch loads from the job jars (`--jars`: kafka-clients, the connector), not pyspark's.
KAFKA_CLASSES = (
    "org.apache.kafka.clients.admin.KafkaAdminClient",
    "org.apache.kafka.clients.consumer.KafkaConsumer",
    "org.apache.spark.sql.kafka010.KafkaSourceProvider",
)


@pytest.fixture(scope="module")
def flow(source: KafkaCluster, target: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    """The module's real-time flow; its topics exist before the deploy (new topics wait for a batch boundary)."""
    tag = uuid.uuid4().hex[:6]
    prefix = f"rt{tag}"
    for suffix in ("warm", "records", "stream", "trunc"):
        create_topic(source, f"{prefix}.{suffix}", 2)
    base = tmp_path_factory.mktemp("realtime")
    # The user's own driver option (kept beside the archive's): where the JVM took each class from.
    conf = {**INTERVAL, "spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={base / CLASS_LOG}"}
    state = desired_state(
        source,
        target,
        base,
        source_alias=f"s{tag}",
        target_alias=f"t{tag}",
        include=[prefix + r"\..*"],
        master=None,
        conf=conf,
    )
    runner = LocalRunner(base, state.spark, root=base, stop_timeout=INTERVAL_S + 60)
    f = Flow(state, runner, "repl", f"s{tag}", f"t{tag}", prefix, source, target)
    ensure_driver_archive()  # what `kmirror dev fetch` (make setup) records; at once when it did
    f.deploy()
    report = read_report(runner.folder(f.name).status)
    # Four topics of two partitions and the heartbeats topic (always replicated): nine partitions in two tasks,
    # four slots.
    assert (report.get("mode"), report.get("task_slots")) == ("realtime", 4), report
    assert "9 source partitions in 2 tasks" in str(report.get("mode_reason")), report
    try:
        yield f
    finally:
        kill_job(runner, f.name)  # a graceful stop waits up to INTERVAL_S (the graceful-stop test checks one)


def test_the_driver_starts_from_the_class_archive_dev_fetch_records(flow: Flow) -> None:
    """Spark's classes come mapped from the archive instead of being loaded and verified one by one, from the
    driver home: pyspark's jars without MLlib, whose session extension took a second of every start."""
    archive = archive_path()
    job = flow.runner.job(flow.name)
    assert archive is not None and job is not None and job.pid is not None
    maps = Path(f"/proc/{job.pid}/maps").read_text()
    assert str(archive) in maps, f"the driver JVM (pid {job.pid}) did not map {archive}"
    command = Path(f"/proc/{job.pid}/cmdline").read_bytes().split(b"\0")
    assert f"{driver_home()}/jars/*".encode() in b" ".join(command), command
    # The Kafka connector's and client's classes too, although they come from `--jars`, not the classpath.
    assert flow.runner.root is not None
    log = flow.runner.root / CLASS_LOG

    def from_archive() -> set[str]:
        text = log.read_text(errors="replace") if log.exists() else ""
        return {c for c in KAFKA_CLASSES if f" {c} source: shared objects file" in text}

    deadline = time.monotonic() + 60  # the first batch's offsets and consumers: soon after the query started
    while (found := from_archive()) != set(KAFKA_CLASSES) and time.monotonic() < deadline:
        time.sleep(1)
    assert found == set(KAFKA_CLASSES), f"loaded from the archive: {sorted(found)} (see {log})"
    loaded = log.read_text(errors="replace")
    assert " org.apache.spark.ml." not in loaded and " org.apache.spark.sql.ml." not in loaded, f"MLlib loaded ({log})"


def test_records_land_within_the_checkpoint_interval_with_full_fidelity(flow: Flow) -> None:
    topic = flow.topic("records")
    producer = Producer(flow.source.config(**{"enable.idempotence": True, "linger.ms": 5}))
    # A first record, waited for as long as a cold start takes: then the first batch's tasks are reading.
    producer.produce(flow.topic("warm"), value=b"warm-up", partition=0)
    assert producer.flush(30) == 0
    wait_replicated(flow, flow.topic("warm"), {0: 1}, timeout=180)
    base_ts = int(time.time() * 1000) - 3_600_000
    expected: dict[int, list[Rec]] = {0: [], 1: []}
    for seq in range(200):
        headers = () if seq % 4 == 0 else (("seq", str(seq).encode()), ("dup", b"a"), ("dup", b"b"))
        key = None if seq % 7 == 0 else f"k{seq}".encode()
        value = None if seq % 13 == 0 else f"v{seq}".encode()
        producer.produce(topic, key=key, value=value, headers=list(headers), timestamp=base_ts + seq, partition=seq % 2)
        expected[seq % 2].append(Rec(key, value, headers, base_ts + seq))
    assert producer.flush(30) == 0
    sent = time.monotonic()
    wait_replicated(flow, topic, {0: 100, 1: 100}, timeout=INTERVAL_S / 2)
    print(f"real-time mode: 200 records on the target {time.monotonic() - sent:.2f}s after the flush")
    got = read_topic(flow.target, flow.remote(topic))
    assert got == expected

    syncs_topic = flow.state.flow(flow.name).policy().offset_syncs_topic(flow.target_alias)
    admin = AdminClient(flow.source.config())

    def syncs_written() -> int:
        if syncs_topic not in admin.list_topics(timeout=10).topics:
            return 0
        return sum(end_offsets(flow.source, syncs_topic).values())

    wait_for("offset-syncs from the real-time job", syncs_written, timeout=60)


def test_graceful_stop_waits_for_the_batch_and_redeploy_loses_nothing(flow: Flow) -> None:
    topic = flow.topic("stream")
    with SequenceProducer(flow.source, topic, 2) as seq:
        time.sleep(5)
        started = time.monotonic()
        flow.runner.stop(flow.name)
        stopped_after = time.monotonic() - started
        job = flow.runner.job(flow.name)
        assert job is not None and not job.running
        assert job.state == "stopped", job.error
        time.sleep(2)  # records produced while no job runs
        flow.deploy()
        time.sleep(3)
    total, duplicates = seq.check(flow.target, flow.remote(topic))
    print(f"real-time stop + redeploy: stop took {stopped_after:.1f}s, {total} records, none lost, {duplicates} dups")
    # The stop reads the batch's end from the JVM at once, so only what the next batch sent in its first moments
    # (the records that waited at the boundary) comes twice: well under 5 s of the stream's 500 records/s.
    assert duplicates < 5 * 500, f"{duplicates} duplicates: the stop did not follow the batch's end closely"
    # The checkpoint the redeploy resumed from was written by kmirror's file manager (java.nio), not Hadoop's
    # local file system, which leaves a checksum file beside every file it writes.
    assert flow.runner.root is not None
    checkpoint = next(flow.runner.root.rglob("commits")).parent
    assert any((checkpoint / "commits").iterdir()), checkpoint
    assert not list(checkpoint.rglob("*.crc")), f"Hadoop's checksum files in {checkpoint}"


def test_an_explicit_master_with_fewer_slots_than_partitions_runs_real_time_in_groups_losing_nothing(
    source: KafkaCluster, target: KafkaCluster, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    topic = f"rs{tag}.wide"
    create_topic(source, topic, 4)
    state = desired_state(
        source,
        target,
        tmp_path,
        source_alias=f"s{tag}",
        target_alias=f"t{tag}",
        include=[rf"rs{tag}\..*"],
        master="local[2]",  # no spark.kmirror.mode: kmirror's own choice
        conf={"spark.kmirror.triggerInterval": "10 seconds"},  # a quick stop
    )
    runner = LocalRunner(tmp_path, state.spark, root=tmp_path, start_timeout=120, stop_timeout=70)
    flow = Flow(state, runner, "repl", f"s{tag}", f"t{tag}", f"rs{tag}", source, target)
    try:
        flow.deploy()
        report = read_report(runner.folder(flow.name).status)
        # Four partitions and the heartbeats topic's one on two slots: two tasks of two or three partitions.
        assert (report.get("mode"), report.get("task_slots")) == ("realtime", 2), report
        assert "5 source partitions in 2 tasks" in str(report.get("mode_reason")), report
        with SequenceProducer(source, topic, 4) as seq:
            time.sleep(8)
            runner.stop(flow.name)  # the groups' end offsets make the checkpoint the redeploy resumes from
            flow.deploy()
            time.sleep(5)
        total, duplicates = seq.check(target, flow.remote(topic))
        print(f"real-time, 4 partitions in 2 tasks, stop + redeploy: {total} records, none lost, {duplicates} dups")
        assert duplicates < 5 * 500, f"{duplicates} duplicates: the redeploy did not resume from the groups' ends"
    finally:
        stop_or_kill(runner, "repl")


def test_records_deleted_past_the_position_while_stopped_are_skipped_and_the_rest_copied(flow: Flow) -> None:
    """DeleteRecords past the checkpoint's offsets while the job is stopped: the redeployed job goes on from the
    earliest offset the source still has (Spark's own real-time reader fails the query there)."""
    topic = flow.topic("trunc")
    producer = Producer(flow.source.config(**{"enable.idempotence": True, "acks": "all"}))

    def produce(values: range) -> None:
        for v in values:
            producer.produce(topic, value=str(v).encode(), partition=v % 2)
        assert producer.flush(30) == 0

    produce(range(100))
    wait_replicated(flow, topic, {0: 50, 1: 50}, timeout=60)
    flow.runner.stop(flow.name)
    produce(range(100, 400))
    ends = end_offsets(flow.source, topic)
    cut = [TopicPartition(topic, p, ends[p] - 20) for p in (0, 1)]  # the last 20 of each partition are kept
    admin = AdminClient(flow.source.config())  # kept referenced until its futures complete
    for done in admin.delete_records(cut, request_timeout=60).values():
        done.result(timeout=60)
    produce(range(400, 500))
    flow.deploy()
    wanted = set(range(360, 500))

    def copied() -> bool:
        got = {int(r.value) for recs in read_topic(flow.target, flow.remote(topic)).values() for r in recs if r.value}
        return wanted <= got

    wait_for("the records the source still has copied", copied, timeout=120)
    report = read_report(flow.runner.folder(flow.name).status)
    assert (report.get("state"), report.get("mode")) == ("running", "realtime"), report


def test_partitions_added_while_the_job_runs_join_its_tasks_in_real_time(flow: Flow) -> None:
    # 9 + 8 partitions on the module's 4 slots: the two tasks read them all, with no redeploy.
    topic = flow.topic("wide")
    create_topic(flow.source, topic, 8)
    with SequenceProducer(flow.source, topic, 8) as seq:
        # The new partitions are planned at the next checkpoint boundary; their records land soon after it.
        wait_replicated(flow, topic, dict.fromkeys(range(8), 1), timeout=INTERVAL_S + 60)
        time.sleep(3)
    total, duplicates = seq.check(flow.target, flow.remote(topic))
    report = read_report(flow.runner.folder(flow.name).status)
    print(f"8 partitions added to a running real-time job: {total} records, none lost, {duplicates} dups")
    assert report.get("mode") == "realtime" and not report.get("mode_fallback"), report
