"""The fault suite's world: a three-broker source (Kafka 3.9) and a three-broker target (Kafka 4.x), started once
for the session, and the tools every fault test uses.

- `Load`: an idempotent, acks=all producer of sequence-numbered records in a thread, at a few thousand records/s,
  that keeps exactly the records the brokers acknowledged (delivery reports), per partition.
- `Tally`: every acknowledged record looked up on the target: lost (must be 0) and duplicates.
- `bounce`: one broker stopped (SIGTERM, a controlled shutdown, or kill -9) and started again, then waited for
  until every partition of its cluster has all its replicas in sync again.
- `FaultWorld`: a desired-state file for one flow between the pair (RF 3, min.insync.replicas 2 on the remote
  topics), `kmirror` run as a user runs it, and the flow's job stopped at the end.

Each test prints its figures (records, lost, duplicates, recovery time) as a `FAULTS {...}` line.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reconciler.devenv import kafka_local
from reconciler.devenv.jars import KAFKA_SOURCE_VERSION, KAFKA_TARGET_VERSION
from reconciler.devenv.kafka_local import BrokerOptions

BROKERS = 3
OPTIONS = BrokerOptions(heap="384m")
KMIRROR = [sys.executable, "-m", "reconciler.cli"]


@dataclass(frozen=True)
class FaultCluster:
    name: str
    version: str
    home: Path
    bootstrap_servers: str

    def config(self, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap_servers, **extra}

    def broker_pid(self, broker: int) -> int:
        record = kafka_local.read_record(self.home / f"broker-{broker}")
        assert record is not None and record.pid is not None
        return record.pid

    def start(self) -> None:
        """Start every broker that is not running (the restart half of a bounce)."""
        kafka_local.start_brokers(self.name, self.version, self.home, BROKERS, OPTIONS)


@pytest.fixture(scope="session")
def three_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FaultCluster, FaultCluster]]:
    root = tmp_path_factory.mktemp("faults")
    clusters = []
    try:
        for name, version in (("fsource", KAFKA_SOURCE_VERSION), ("ftarget", KAFKA_TARGET_VERSION)):
            records = kafka_local.start_brokers(name, version, root / name, BROKERS, OPTIONS)
            clusters.append(FaultCluster(name, version, root / name, kafka_local.bootstrap_of(records)))
        yield clusters[0], clusters[1]
    finally:
        for name in ("fsource", "ftarget"):
            kafka_local.stop_brokers(root / name, grace=20)


# -- load and tally -------------------------------------------------------------------------------------------
class Load:
    """Sequence-numbered records over a topic's partitions, `rate` a second, acks=all and idempotent."""

    def __init__(self, cluster: FaultCluster, topic: str, partitions: int, rate: int = 2000) -> None:
        self.cluster, self.topic, self.partitions, self.rate = cluster, topic, partitions, rate
        self.acked: dict[int, set[int]] = defaultdict(set)  # partitions may be added while it runs
        self.failed = 0
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"load-{topic}")
        self._lock = threading.Lock()

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    @property
    def acknowledged(self) -> int:
        with self._lock:
            return sum(len(s) for s in self.acked.values())

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            return
        with self._lock:
            self.acked[msg.partition()].add(int(msg.value()))

    def _run(self) -> None:
        producer = Producer(
            self.cluster.config(
                **{
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "delivery.timeout.ms": 600000,  # outlives any bounce: a record fails only if truly lost
                    "log_level": 0,
                }
            )
        )
        seq = 0
        tick = 0.1
        per_tick = max(1, int(self.rate * tick))
        while not self._stop.is_set():
            started = time.monotonic()
            for _ in range(per_tick):
                try:
                    producer.produce(
                        self.topic,
                        value=str(seq).encode(),
                        partition=seq % self.partitions,
                        on_delivery=self._delivered,
                    )
                except BufferError:
                    producer.poll(0.5)
                    continue
                except KafkaException:  # a partition just added, not yet in the producer's metadata
                    producer.poll(0.5)
                    continue
                seq += 1
            producer.poll(0)
            time.sleep(max(0.0, tick - (time.monotonic() - started)))
        self.sent = seq
        producer.flush(120)


@dataclass
class Tally:
    records: int
    lost: int
    duplicates: int
    lost_examples: list[tuple[int, int]] = field(default_factory=list)


#: What a watermark read answers while leadership moves after a broker bounce; librdkafka does not flag all as
#: retriable. _TIMED_OUT: asked of a leader killed a moment ago, before the cluster fenced it and moved its partitions
#: (the rolling restart reads one cluster while a broker of the other, or of the same, is down).
_MOVING_LEADER = (
    KafkaError.OFFSET_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._UNKNOWN_PARTITION,  # the client's metadata, refreshed while the leader was down, lacks it for now
)
#: Any other local (client-side, negative) code is retried too: while brokers roll the client's view of them
#: churns, e.g. _DESTROY_BROKER ("Broker handle destroyed without termination") when the broker the request
#: waited on left the metadata. Listing them one by one after each CI run that meets a new one is a losing game.


def high_watermark(consumer: Consumer, tp: TopicPartition, timeout: float = 90.0) -> int:
    """A partition's high watermark, retried while leadership moves or a leader that just took over has not
    caught it up yet (NOT_LEADER_FOR_PARTITION, OFFSET_NOT_AVAILABLE right after a broker bounce)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return int(consumer.get_watermark_offsets(tp, timeout=20)[1])
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            retriable = isinstance(error, KafkaError) and (
                error.retriable() or error.code() in _MOVING_LEADER or error.code() < 0
            )
            if not retriable or time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def read_values(cluster: FaultCluster, topic: str) -> dict[int, list[int]]:
    """Every record value of every partition of `topic`, read_committed, start to current end."""
    admin = AdminClient(cluster.config())
    meta = admin.list_topics(topic, timeout=20).topics.get(topic)
    if meta is None or meta.error is not None:
        return {}
    consumer = Consumer(
        cluster.config(
            **{
                "group.id": f"tally-{uuid.uuid4().hex[:6]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "log_level": 0,
            }
        )
    )
    out: dict[int, list[int]] = {p: [] for p in meta.partitions}
    try:
        ends = {p: high_watermark(consumer, TopicPartition(topic, p)) for p in meta.partitions}
        todo = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo])
        deadline = time.monotonic() + 120
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(5000, timeout=1):
                if msg.error():
                    continue
                p = msg.partition()
                out[p].append(int(msg.value() or b"-1"))
                if msg.offset() >= ends[p] - 1:
                    todo.discard(p)
            for p in list(todo):
                position = consumer.position([TopicPartition(topic, p)])[0].offset
                if position >= ends[p]:
                    todo.discard(p)
        return out
    finally:
        consumer.close()


def tally(load: Load, target: FaultCluster, remote: str) -> Tally:
    got = read_values(target, remote)
    lost: list[tuple[int, int]] = []
    duplicates = records = 0
    for p, acked in list(load.acked.items()):
        counts = Counter(got.get(p, ()))
        records += len(acked)
        lost += [(p, s) for s in sorted(acked - counts.keys())]
        duplicates += sum(c - 1 for c in counts.values())
    return Tally(records, len(lost), duplicates, lost[:10])


def wait_copied(load: Load, target: FaultCluster, remote: str, timeout: float) -> tuple[Tally, float]:
    """Wait until every acknowledged record is on the target; (tally, seconds waited)."""
    started = time.monotonic()
    deadline = started + timeout
    t = tally(load, target, remote)
    while t.lost and time.monotonic() < deadline:
        time.sleep(2)
        t = tally(load, target, remote)
    return t, time.monotonic() - started


def report(name: str, **figures: Any) -> None:
    """One line per test with its figures, collected for the issue's note (`pytest -s` or the junit log)."""
    line = "FAULTS " + json.dumps({"test": name, **figures}, sort_keys=True)
    print(line)
    path = os.environ.get("KMIRROR_FAULTS_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


# -- brokers --------------------------------------------------------------------------------------------------
def in_sync(cluster: FaultCluster) -> bool:
    """Every partition of every topic has all its replicas in sync (and the metadata lists every broker)."""
    try:
        meta = AdminClient(cluster.config(log_level=0)).list_topics(timeout=10)
    except Exception:
        return False
    if len(meta.brokers) < BROKERS:
        return False
    return all(
        set(p.isrs) == set(p.replicas) and p.leader >= 0 for t in meta.topics.values() for p in t.partitions.values()
    )


def bounce(cluster: FaultCluster, broker: int, kill: bool, timeout: float = 120) -> float:
    """Stop one broker (SIGTERM: controlled shutdown; kill -9) and start it again; seconds until in sync again."""
    pid = cluster.broker_pid(broker)
    started = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL if kill else signal.SIGTERM)
    deadline = time.monotonic() + 60
    while kafka_local._pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    cluster.start()
    wait_until(f"{cluster.name} broker {broker} back in sync", lambda: in_sync(cluster), timeout)
    return time.monotonic() - started


def wait_until(what: str, check: Callable[[], Any], timeout: float, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def create_topic(cluster: FaultCluster, name: str, partitions: int) -> None:
    admin = AdminClient(cluster.config())
    new = NewTopic(name, partitions, BROKERS, config={"min.insync.replicas": "2"})
    admin.create_topics([new], request_timeout=60)[name].result(timeout=90)


# -- a flow between the pair, run through the real kmirror command ----------------------------------------------
@dataclass
class FaultWorld:
    tmp: Path
    source: FaultCluster
    target: FaultCluster
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    @property
    def src(self) -> str:
        return f"s{self.id}"

    @property
    def dst(self) -> str:
        return f"d{self.id}"

    @property
    def flow(self) -> str:
        return f"f{self.id}"

    @property
    def prefix(self) -> str:
        return f"x{self.id}-"

    @property
    def state_topic(self) -> str:
        return f"_kmirror.state-{self.id}"

    def remote(self, topic: str) -> str:
        return f"{self.src}.{topic}"

    def spec(
        self,
        deploy: str = "local",
        flow: str = "on",
        producer: dict[str, str] | None = None,
        conf: dict[str, str] | None = None,
    ) -> Path:
        """`flow`: "on", "off" (enabled: false) or "removed" (no flow; prune.topics on). `producer`: the flow's
        `replication.producer` settings; `conf`: Spark settings besides the 200 ms trigger."""
        settings = ", ".join(f'{k}: "{v}"' for k, v in (producer or {}).items())
        spark_conf = ", ".join(f'{k}: "{v}"' for k, v in {"spark.kmirror.triggerInterval": "200 milliseconds",
                                                           **(conf or {})}.items())  # fmt: skip
        body = textwrap.dedent(f"""\
          - name: {self.flow}
            source: {self.src}
            target: {self.dst}
            enabled: {"false" if flow == "off" else "true"}
            topics: {{include: ['{self.prefix}.*']}}
            groups: {{include: ['{self.prefix}.*']}}
            naming: {{policy: prefix}}
            topic_defaults: {{replication_factor: {BROKERS}, configs: {{min.insync.replicas: "2"}}}}
            offsets: {{checkpoint_interval: 1h}}
            heartbeats: {{enabled: false}}
            sync: {{acls: false}}
        """) + ("  replication: {producer: {" + settings + "}}\n" if settings else "")
        flows = "flows: []\n" if flow == "removed" else "flows:\n" + textwrap.indent(body, "  ")
        path = self.tmp / "kmirror.yaml"
        path.write_text(
            textwrap.dedent(f"""\
            version: 1
            clusters:
              {self.src}: {{bootstrap_servers: "{self.source.bootstrap_servers}"}}
              {self.dst}: {{bootstrap_servers: "{self.target.bootstrap_servers}"}}
            state: {{cluster: {self.dst}, topic: "{self.state_topic}"}}
            spark:
              deploy: {deploy}
              master: "local[2]"
              checkpoint_root: checkpoints
              conf: {{{spark_conf}}}
            prune: {{topics: true, acls: true, jobs: true}}
            """)
            + flows
        )
        return path

    def kmirror(self, *args: str, check: bool = False, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*KMIRROR, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "NO_COLOR": "1"},
            cwd=self.tmp,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kmirror {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return result

    def stop_job(self) -> None:
        from reconciler.jobcontract.layout import local_state_keys
        from reconciler.runners import LocalRunner
        from reconciler.spec.loader import load

        loaded = load(self.spec()).state
        keys = local_state_keys(loaded.state.topic)  # `<state topic>@<state cluster id>`: the applied job's folder
        runner = LocalRunner(
            self.tmp,
            loaded.spark,
            state_topic=loaded.state.topic,
            state_key=keys[0] if len(keys) == 1 else None,
            stop_timeout=60,
        )
        try:
            runner.stop(self.flow)
        finally:
            job = runner.job(self.flow)
            if job is not None and job.pid is not None and job.running:
                os.killpg(job.pid, signal.SIGKILL)


@pytest.fixture
def world(tmp_path: Path, three_brokers: tuple[FaultCluster, FaultCluster]) -> Iterator[FaultWorld]:
    w = FaultWorld(tmp_path, *three_brokers)
    try:
        yield w
    finally:
        w.stop_job()
