"""Fixtures for the replication job's integration tests: a desired state on the session's clusters, a
LocalRunner that tears its jobs down, and helpers to produce to and read whole partitions of real topics.

Each module gets its own cluster aliases and topic prefix, so its flow, its remote topics and its offset-syncs
topic never mix with another module's (the clusters are shared by the whole session).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from reconciler.jobcontract.spec import EffectiveSpec
from reconciler.runners import LocalRunner
from reconciler.spec.loader import load_text
from reconciler.spec.models import DesiredState
from tests.conftest import KafkaCluster

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class Rec:
    """A record as compared between source and target (headers: [] for none)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp: int
    offset: int = field(default=-1, compare=False)


@dataclass
class Flow:
    """A running flow under test: its desired state, runner and names."""

    state: DesiredState
    runner: LocalRunner
    name: str
    source_alias: str
    target_alias: str
    prefix: str
    source: KafkaCluster
    target: KafkaCluster

    def topic(self, suffix: str) -> str:
        return f"{self.prefix}.{suffix}"

    def remote(self, topic: str) -> str:
        return self.state.flow(self.name).remote_topic(topic)

    def widened(self, *include: str) -> DesiredState:
        """The module's desired state with more topic filters."""
        return desired_state(
            self.source,
            self.target,
            self.runner.base_dir,
            source_alias=self.source_alias,
            target_alias=self.target_alias,
            include=[self.prefix + r"\..*", *include],
        )

    def deploy(self) -> None:
        self.runner.deploy(self.name, EffectiveSpec.of(self.state, self.name), self.state.flow_digest(self.name))


def desired_state(
    source: KafkaCluster,
    target: KafkaCluster,
    base: Path,
    *,
    source_alias: str,
    target_alias: str,
    include: Sequence[str],
    master: str | None = "local[2]",
    conf: dict[str, str] | None = None,
) -> DesiredState:
    """The module's desired state: one flow `repl` replicating the topics `include` matches (regexes). `master`
    None leaves `spark.master` out (the job sizes it)."""
    includes = ", ".join(json.dumps(i) for i in include)
    spark_conf = json.dumps({"spark.kmirror.triggerInterval": "200 milliseconds", **(conf or {})})
    text = f"""
version: 1
clusters:
  {source_alias}: {{bootstrap_servers: "{source.bootstrap_servers}"}}
  {target_alias}: {{bootstrap_servers: "{target.bootstrap_servers}"}}
state: {{cluster: {target_alias}, topic: _kmirror.state}}
spark:
  deploy: local
{f'  master: "{master}"' if master else ""}
  checkpoint_root: checkpoints
  conf: {spark_conf}
flows:
  - name: repl
    source: {source_alias}
    target: {target_alias}
    topics: {{include: [{includes}]}}
    offsets: {{offset_lag_max: 10}}
    heartbeats: {{enabled: true, interval: 1s}}
"""
    return load_text(text).state.with_source_path(base / "kmirror.yaml")


@pytest.fixture(scope="module")
def flow(source: KafkaCluster, target: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flow]:
    """A deployed flow for the module; stopped (killed if need be) at the end."""
    tag = uuid.uuid4().hex[:6]
    base = tmp_path_factory.mktemp("replication")
    prefix = f"rep{tag}"
    state = desired_state(
        source, target, base, source_alias=f"s{tag}", target_alias=f"t{tag}", include=[prefix + r"\..*"]
    )
    runner = LocalRunner(base, state.spark, root=base, stop_timeout=60)
    f = Flow(state, runner, "repl", f"s{tag}", f"t{tag}", prefix, source, target)
    try:
        yield f
    finally:
        stop_or_kill(runner, f.name)


def stop_or_kill(runner: LocalRunner, flow: str) -> None:
    """Tear a test's job down: a graceful stop, and a kill of its process group if the stop itself failed."""
    try:
        runner.stop(flow)
    finally:
        kill_job(runner, flow)


def kill_job(runner: LocalRunner, flow: str) -> None:
    """Kill a test's job (its process group) if it runs: a teardown that checks nothing after it needs no graceful
    stop, which in real-time mode waits for the running interval to end."""
    job = runner.job(flow)
    if job is not None and job.pid is not None and job.running:
        os.killpg(job.pid, signal.SIGKILL)


# -- Kafka helpers ----------------------------------------------------------------------------------------------


def create_topic(cluster: KafkaCluster, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient(cluster.config())
    admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(timeout=30)


def add_partitions(cluster: KafkaCluster, name: str, total: int) -> None:
    admin = AdminClient(cluster.config())
    admin.create_partitions([NewPartitions(name, total)])[name].result(timeout=30)


def partition_count(cluster: KafkaCluster, name: str) -> int:
    md = AdminClient(cluster.config()).list_topics(name, timeout=10)
    topic = md.topics.get(name)
    return 0 if topic is None or topic.error is not None else len(topic.partitions)


def end_offsets(cluster: KafkaCluster, name: str) -> dict[int, int]:
    """High watermarks per partition; retried while a just-created topic has no leader yet."""
    n = partition_count(cluster, name)
    if n == 0:
        return {}
    c = Consumer(cluster.config(**{"group.id": f"probe-{uuid.uuid4().hex[:6]}"}))
    try:
        for attempt in range(10):
            try:
                return {p: c.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1] for p in range(n)}
            except KafkaException:
                if attempt == 9:
                    raise
                time.sleep(0.5)
        raise AssertionError("unreachable")
    finally:
        c.close()


def read_partition(cluster: KafkaCluster, name: str, partition: int, *, read_committed: bool = False) -> list[Rec]:
    """Every record of one partition, from its start to its current end."""
    config = cluster.config(
        **{
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        }
    )
    c = Consumer(config)
    try:
        low, high = c.get_watermark_offsets(TopicPartition(name, partition), timeout=10)
        if high <= low:
            return []
        c.assign([TopicPartition(name, partition, OFFSET_BEGINNING)])
        out: list[Rec] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                position = c.position([TopicPartition(name, partition)])[0].offset
                if position >= high:
                    break
                continue
            if msg.error():
                raise AssertionError(f"reading {name}/{partition}: {msg.error()}")
            out.append(Rec(msg.key(), msg.value(), tuple(msg.headers() or ()), msg.timestamp()[1], msg.offset()))
            if msg.offset() >= high - 1:
                break
        return out
    finally:
        c.close()


def read_topic(cluster: KafkaCluster, name: str) -> dict[int, list[Rec]]:
    return {p: read_partition(cluster, name, p) for p in range(partition_count(cluster, name))}


def wait_for(what: str, check: Callable[[], Any], timeout: float = 120.0, interval: float = 0.5) -> Any:
    """Poll `check` until it returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def wait_replicated(flow: Flow, topic: str, expected: dict[int, int], timeout: float = 120.0) -> dict[int, int]:
    """Wait until each remote partition holds at least the expected number of records."""
    remote = flow.remote(topic)

    def done() -> dict[int, int] | None:
        ends = end_offsets(flow.target, remote)
        return ends if all(ends.get(p, 0) >= n for p, n in expected.items()) else None

    result: dict[int, int] = wait_for(f"{remote} to hold {expected}", done, timeout)
    return result


class SequenceProducer:
    """Sequence-numbered records, round-robin over a topic's partitions, produced in a thread until stopped.

    `per_round` records every 0.2 s (500 -> 2,500 records/s): a steady stream the job keeps up with on a busy
    2-core machine. `check` waits until the target holds every record produced, then asserts none lost and the
    order kept, and counts duplicates.
    """

    def __init__(self, source: KafkaCluster, topic: str, partitions: int, *, per_round: int = 100) -> None:
        self.source, self.topic, self.partitions, self.per_round = source, topic, partitions, per_round
        self.produced: dict[int, list[int]] = {p: [] for p in range(partitions)}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SequenceProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        producer = Producer(self.source.config(**{"enable.idempotence": True, "linger.ms": 5}))
        seq = 0
        while not self._stop.is_set():
            for _ in range(self.per_round):
                p = seq % self.partitions
                producer.produce(self.topic, value=str(seq).encode(), partition=p)
                self.produced[p].append(seq)
                seq += 1
            producer.poll(0)
            time.sleep(0.2)
        assert producer.flush(30) == 0

    def copied(self, target: KafkaCluster, remote: str) -> int:
        return sum(end_offsets(target, remote).values())

    def check(self, target: KafkaCluster, remote: str, timeout: float = 180.0) -> tuple[int, int]:
        """Wait until all is copied; assert none lost, order kept. Returns (records, duplicates)."""
        wanted = {p: len(s) for p, s in self.produced.items()}

        def all_there() -> bool:
            # End offsets alone would be reached early when the target holds duplicates: compare the records.
            if not all(end_offsets(target, remote).get(p, 0) >= n for p, n in wanted.items()):
                return False
            return all(
                set(seqs) <= {int(r.value or b"-1") for r in read_partition(target, remote, p)}
                for p, seqs in self.produced.items()
            )

        wait_for(f"{remote} to hold every record produced ({wanted})", all_there, timeout=timeout)
        duplicates = 0
        for p, seqs in self.produced.items():
            got = [int(r.value or b"-1") for r in read_partition(target, remote, p)]
            counts = Counter(got)
            missing = set(seqs) - set(counts)
            assert not missing, f"partition {p}: {len(missing)} records lost, e.g. {sorted(missing)[:10]}"
            duplicates += sum(c - 1 for c in counts.values())
            assert list(dict.fromkeys(got)) == seqs, f"partition {p}: order differs"
        return sum(len(s) for s in self.produced.values()), duplicates
