"""`replication.delivery: exactly_once` in real-time mode (`spark.kmirror.mode=realtime`), run for real by
LocalRunner on the session's clusters, with the offset-syncs on the source (written after each commit; the fault
suite, tests/faults/test_exactly_once.py, covers micro-batch mode with the syncs in the transactions).

One job serves the module: records land within the transaction interval, not the 30 s checkpoint interval, with
full fidelity (keys, values, tombstones, headers, timestamps, order) for a `read_committed` consumer; offset-syncs
reach the source; a kill -9 of the driver and a graceful stop, each followed by a deploy while records flow,
leave every record exactly once for a `read_committed` consumer (a `read_uncommitted` one may see the aborted
ones: counted and printed).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from reconciler.jobcontract.status import read_report
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


@pytest.fixture(scope="module")
def flow(source: KafkaCluster, target: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    tag = uuid.uuid4().hex[:6]
    prefix = f"eo{tag}"
    for suffix in ("records", "stream"):
        create_topic(source, f"{prefix}.{suffix}", 2)
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
  conf: {{spark.kmirror.mode: realtime, spark.kmirror.triggerInterval: "{INTERVAL_S} seconds"}}
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
        time.sleep(2)
        flow.deploy()
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
