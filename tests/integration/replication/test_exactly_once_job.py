"""`replication.delivery: exactly_once` in real-time mode (`spark.kmirror.mode=realtime`), run for real by
LocalRunner on the session's clusters, with the offset-syncs on the source (written after each commit; the fault
suite, tests/faults/test_exactly_once.py, covers micro-batch mode with the syncs in the transactions).

One job serves the module (a 6 s transaction interval, so a transaction can be caught open): records land within
the transaction interval, not the 30 s checkpoint interval, with full fidelity (keys, values, tombstones,
headers, timestamps, order) for a `read_committed` consumer; offset-syncs reach the source; a transaction aborted
by another writer while its task goes on is sent again (the zombie's-successor case); a kill -9 of the driver and
a graceful stop, each followed by a deploy while records flow, leave every record exactly once for a
`read_committed` consumer (a `read_uncommitted` one may see the aborted ones: counted and printed), and the
restarted job aborts a dead writer's open transaction on a quiet partition at once; a source topic deleted and
created again is copied from its start; and a newer deployment of the flow started beside the running one
supersedes it: the older stops for good, every record once.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from reconciler.jobcontract.job_report import read_report
from reconciler.jobcontract.spec import EffectiveSpec
from reconciler.replication.exactly_once import transactional_id
from reconciler.resources.deployments import LocalDeployment
from reconciler.runners import LocalRunner
from reconciler.spec.loader import load_text
from tests.conftest import KafkaCluster
from tests.integration.replication.conftest import (
    Flow,
    Rec,
    SequenceProducer,
    create_topic,
    end_offsets,
    read_partition,
    stop_or_kill,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

INTERVAL_S = 30
TRANSACTION_INTERVAL_MS = 6000
STATE_TOPIC = "_kmirror.state"


@pytest.fixture(scope="module")
def flow(source: KafkaCluster, target: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    tag = uuid.uuid4().hex[:6]
    prefix = f"eo{tag}"
    for suffix in ("records", "stream", "newer"):
        create_topic(source, f"{prefix}.{suffix}", 2)
    for suffix in ("fence", "recreated"):
        create_topic(source, f"{prefix}.{suffix}", 1)
    base = tmp_path_factory.mktemp("exactly-once")
    text = f"""
version: 1
clusters:
  s{tag}: {{bootstrap_servers: "{source.bootstrap_servers}"}}
  t{tag}: {{bootstrap_servers: "{target.bootstrap_servers}"}}
state: {{cluster: t{tag}, topic: _kmirror.state}}
spark:
  deploy: local
  master: "local[4]"
  checkpoint_root: checkpoints
  conf:
    spark.kmirror.mode: realtime
    spark.kmirror.triggerInterval: "{INTERVAL_S} seconds"
    spark.kmirror.transactionIntervalMs: "{TRANSACTION_INTERVAL_MS}"
flows:
  - name: repl
    source: s{tag}
    target: t{tag}
    topics: {{include: ['{prefix}\\..*']}}
    replication: {{delivery: exactly_once}}
    offsets: {{offset_lag_max: 10, syncs_location: source}}
    heartbeats: {{enabled: false}}
"""
    state = load_text(text).state.with_source_path(base / "kmirror.yaml")
    runner = LocalRunner(base, state.spark, root=base, stop_timeout=INTERVAL_S + 60)
    f = Flow(state, runner, "repl", f"s{tag}", f"t{tag}", prefix, source, target)
    f.deploy()
    try:
        yield f
    finally:
        stop_or_kill(runner, f.name)


def _values(flow: Flow, topic: str, partition: int = 0, *, read_committed: bool = True) -> list[bytes | None]:
    return [r.value for r in read_partition(flow.target, flow.remote(topic), partition, read_committed=read_committed)]


def _send(flow: Flow, topic: str, values: range | list[int], partition: int = 0) -> None:
    producer = Producer(flow.source.config(**{"enable.idempotence": True, "linger.ms": 5}))
    for v in values:
        producer.produce(topic, value=str(v).encode(), partition=partition)
    assert producer.flush(30) == 0


def _at_least(n: int, values: list[bytes | None]) -> list[bytes | None] | None:
    return values if len(values) >= n else None


def _stable_end(cluster: KafkaCluster, topic: str, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark): an open transaction holds the first below the second."""
    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        c = Consumer(cluster.config(**{"group.id": f"probe-{uuid.uuid4().hex[:6]}", "isolation.level": isolation}))
        try:
            ends.append(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
        finally:
            c.close()
    return ends[0], ends[1]


def _committed(flow: Flow, topic: str) -> dict[int, list[Rec]]:
    remote = flow.remote(topic)
    return {p: read_partition(flow.target, remote, p, read_committed=True) for p in range(2)}


def test_records_are_visible_to_read_committed_consumers_within_the_transaction_interval(flow: Flow) -> None:
    topic = flow.topic("records")
    producer = Producer(flow.source.config(**{"enable.idempotence": True, "linger.ms": 5}))
    producer.produce(topic, value=b"warm-up", partition=0)
    assert producer.flush(30) == 0
    wait_for("the first record", lambda: _committed(flow, topic)[0], timeout=240)
    base_ts = int(time.time() * 1000) - 3_600_000
    expected: dict[int, list[Rec]] = {0: [Rec(None, b"warm-up", (), 0)], 1: []}
    for seq in range(200):
        headers = () if seq % 4 == 0 else (("seq", str(seq).encode()), ("dup", b"a"), ("dup", b"b"))
        key = None if seq % 7 == 0 else f"k{seq}".encode()
        value = None if seq % 13 == 0 else f"v{seq}".encode()
        producer.produce(topic, key=key, value=value, headers=list(headers), timestamp=base_ts + seq, partition=seq % 2)
        expected[seq % 2].append(Rec(key, value, headers, base_ts + seq))
    assert producer.flush(30) == 0
    sent = time.monotonic()
    wait_for("200 records, read_committed", lambda: sum(len(v) for v in _committed(flow, topic).values()) >= 201, 60)
    seconds = time.monotonic() - sent
    print(f"exactly-once, real-time mode: 200 records visible to read_committed {seconds:.2f}s after the flush")
    assert seconds < INTERVAL_S / 2, "records waited for the checkpoint interval, not the transaction interval"
    report = read_report(flow.runner.folder(flow.name).status)
    assert (report.get("mode"), report.get("delivery")) == ("realtime", "exactly_once"), report  # `kmirror status`
    got = _committed(flow, topic)
    got[0][0] = Rec(got[0][0].key, got[0][0].value, got[0][0].headers, 0)  # the warm-up's timestamp is the broker's
    assert got == expected

    syncs_topic = flow.state.flow(flow.name).policy().offset_syncs_topic(flow.target_alias)
    admin = AdminClient(flow.source.config())

    def syncs_written() -> int:
        if syncs_topic not in admin.list_topics(timeout=10).topics:
            return 0
        return sum(end_offsets(flow.source, syncs_topic).values())

    wait_for("offset-syncs on the source after the commits", syncs_written, timeout=60)


def test_a_transaction_aborted_under_a_running_task_is_sent_again(flow: Flow) -> None:
    """A zombie's successor: another producer initialises a lane's transactional id while the lane's transaction
    is open and its task goes on. The lane's next commit fails; the task must fail with it, and its retry re-send
    the aborted records, never build a new lane that commits past them."""
    topic = flow.topic("fence")
    lane = transactional_id(STATE_TOPIC, flow.name, topic, 0)
    _send(flow, topic, [0])
    wait_for("the first record, read_committed", lambda: _values(flow, topic), timeout=240)
    sent = 1
    for _attempt in range(3):
        committed = _values(flow, topic)
        _send(flow, topic, range(sent, sent + 10))
        sent += 10
        wait_for("ten records sent", lambda n=sent: len(_values(flow, topic, read_committed=False)) >= n, 10)
        fencer = Producer(flow.target.config(**{"transactional.id": lane}))
        fencer.init_transactions(30)  # fences the lane's producer and aborts its open transaction
        if _values(flow, topic) == committed:
            break  # caught open: the ten were aborted under the running task
        # A checkpoint boundary ended the task (and committed) between the send and the fence: the fenced lane
        # fails at its next commit all the same; let that settle and try again.
        wait_for("the batch, read_committed", lambda n=sent: _at_least(n, _values(flow, topic)), 240)
    else:
        pytest.fail("three times the lane's transaction was committed before the outside writer came")
    time.sleep(TRANSACTION_INTERVAL_MS / 1000 * 2)  # the lane's commit fails while its task goes on
    _send(flow, topic, range(sent, sent + 5))
    sent += 5
    expected = [str(v).encode() for v in range(sent)]
    got = wait_for(f"all {sent} records, read_committed", lambda: _at_least(sent, _values(flow, topic)), 240)
    assert got == expected, "records of the aborted transaction lost, or written twice"
    report = wait_for(
        "the job to report the fenced writer",
        lambda: (r := read_report(flow.runner.folder(flow.name).status)).get("fenced_writers") and r,
        timeout=90,
    )
    assert report["fenced_writers"] >= 1 and report.get("state") == "running", report


def test_a_source_topic_deleted_and_created_again_is_copied_from_its_start(flow: Flow) -> None:
    topic = flow.topic("recreated")
    _send(flow, topic, range(10))
    wait_for("the old topic's records", lambda: len(_values(flow, topic)) >= 10, timeout=120)
    admin = AdminClient(flow.source.config())
    admin.delete_topics([topic])[topic].result(timeout=30)
    wait_for("the topic gone", lambda: topic not in admin.list_topics(timeout=10).topics, timeout=30)
    create_topic(flow.source, topic, 1)
    time.sleep(5)
    _send(flow, topic, range(100, 105))
    expected = [str(v).encode() for v in [*range(10), *range(100, 105)]]
    got = wait_for("the new topic's records too", lambda: _at_least(15, _values(flow, topic)), 240)
    assert got == expected, "the new topic's first records were skipped below the old topic's position"


def test_a_killed_driver_and_a_graceful_stop_leave_every_record_exactly_once(flow: Flow) -> None:
    import os
    import signal

    topic = flow.topic("stream")
    with SequenceProducer(flow.source, topic, 2, per_round=200) as seq:
        wait_for("records copied", lambda: any(_committed(flow, topic).values()), timeout=120)
        time.sleep(3)
        job = flow.runner.job(flow.name)
        assert job is not None and job.pid is not None and job.running
        os.killpg(job.pid, signal.SIGKILL)
        wait_for("the killed job to be seen stopped", lambda: not flow.runner.status().jobs[flow.name].running)
        # A dead writer's transaction left open on a quiet partition (its timeout: 10 minutes): the restarted job
        # fences every partition's id as it starts, so read_committed consumers are not held back until then.
        quiet, quiet_remote = flow.topic("records"), flow.remote(flow.topic("records"))
        dead = Producer(
            flow.target.config(
                **{
                    "transactional.id": transactional_id(STATE_TOPIC, flow.name, quiet, 1),
                    "transaction.timeout.ms": 600000,
                }
            )
        )
        dead.init_transactions(30)
        dead.begin_transaction()
        dead.produce(quiet_remote, value=b"dangling", partition=1)
        assert dead.flush(30) == 0
        stable, high = _stable_end(flow.target, quiet_remote, 1)
        assert stable < high, (stable, high)
        time.sleep(2)
        flow.deploy()
        stable, high = wait_for(
            "the dead writer's transaction aborted",
            lambda: (e := _stable_end(flow.target, quiet_remote, 1))[0] == e[1] and e,
            timeout=15,
        )
        del dead
        time.sleep(8)
        flow.runner.stop(flow.name)
        stopped = flow.runner.job(flow.name)
        assert stopped is not None and stopped.state == "stopped", stopped and stopped.error
        flow.deploy()
        time.sleep(5)
    produced = {p: len(s) for p, s in seq.produced.items()}
    remote = flow.remote(topic)

    def complete() -> dict[int, list[Rec]] | None:
        got = _committed(flow, topic)
        return got if all({int(r.value or b"-1") for r in got[p]} >= set(seq.produced[p]) for p in got) else None

    got = wait_for(f"{remote} to hold every record, read_committed ({produced})", complete, timeout=240)
    duplicates = sum(c - 1 for p in got for c in Counter(int(r.value or b"-1") for r in got[p]).values())
    uncommitted = sum(len(read_partition(flow.target, remote, p)) for p in range(2)) - sum(len(v) for v in got.values())
    print(
        f"exactly-once real-time kill -9 + stop: {sum(produced.values())} records, read_committed duplicates "
        f"{duplicates}, records of aborted transactions a read_uncommitted consumer also sees: {uncommitted}"
    )
    assert duplicates == 0
    for p in got:
        values = [int(r.value or b"-1") for r in got[p]]
        assert values == seq.produced[p], f"partition {p}: not every record once and in order"


def test_a_newer_deployment_supersedes_the_running_job_which_stops_for_good(
    flow: Flow, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Two live writers of one flow (an old driver on another machine, say): the newer generation's job fences
    the older one's writers as it starts; the older finds the newer generation in the committed positions and
    stops for good instead of fencing back. Every record once, in order."""
    topic = flow.topic("newer")
    record = flow.runner.deployments[flow.name]
    assert record.generation is not None
    older = record.generation
    job = flow.runner.job(flow.name)
    assert job is not None and job.running
    base = tmp_path_factory.mktemp("newer-deployment")
    state = flow.state.with_source_path(base / "kmirror.yaml")
    newer = LocalRunner(
        base,
        state.spark,
        root=base,
        stop_timeout=INTERVAL_S + 60,
        deployments={flow.name: LocalDeployment(generation=older)},
    )
    try:
        with SequenceProducer(flow.source, topic, 2, per_round=100) as seq:
            time.sleep(3)
            newer.deploy(flow.name, EffectiveSpec.of(state, flow.name), state.flow_digest(flow.name))
            assert newer.deployments[flow.name].generation == older + 1
            report = wait_for(
                "the older job to stop for good",
                lambda: (r := read_report(flow.runner.folder(flow.name).status)).get("superseded_by") and r,
                timeout=180,
            )
            time.sleep(3)
        assert report["superseded_by"] == older + 1 and report.get("state") == "stopped", report
        wait_for("the older job's process to exit", lambda: not flow.runner.status().jobs[flow.name].running, 60)
        remote = flow.remote(topic)

        def complete() -> dict[int, list[Rec]] | None:
            got = _committed(flow, topic)
            return got if all({int(r.value or b"-1") for r in got[p]} >= set(seq.produced[p]) for p in got) else None

        got = wait_for(f"{remote} to hold every record, read_committed", complete, timeout=240)
        for p in got:
            assert [int(r.value or b"-1") for r in got[p]] == seq.produced[p], f"partition {p}: not once, in order"
        newest = read_report(newer.folder(flow.name).status)
        assert newest.get("generation") == older + 1 and newest.get("state") == "running", newest
    finally:
        stop_or_kill(newer, flow.name)
