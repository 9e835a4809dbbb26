"""What every part of the replication benchmark shares: the clusters it starts, topic helpers, process control."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from reconciler.devenv import kafka_local
from reconciler.devenv.jars import KAFKA_SOURCE_VERSION, KAFKA_TARGET_VERSION
from reconciler.devenv.kafka_local import BrokerOptions

#: The repository root (the folder holding `reconciler/` and `benchmarks/`): on the workers' PYTHONPATH.
REPO_ROOT = Path(__file__).resolve().parents[2]
#: The producer settings kmirror's sink uses by default; the ceiling and MM2 get the same ones (fairness).
SINK_PRODUCER = {"acks": "all", "enable.idempotence": "true", "linger.ms": "10", "batch.size": "262144"}
MM2_ALIASES = ("mm2src", "mm2dst")
KMIRROR_ALIASES = ("kmsrc", "kmdst")


@dataclass(frozen=True)
class Workload:
    """One source set: T topics `<prefix>NN` of P partitions, N records (split evenly) of S bytes of value, each
    with H headers of its own (`headers`; 0: none, as Kafka's perf producer sends them)."""

    name: str
    record_size: int
    partitions: int
    topics: int
    records: int
    prefix: str = "bench.d"
    headers: int = 0
    #: Flows replicating the set at once (the fleet case): the topics split round-robin into this many families,
    #: one flow each (kmirror: a flow per family in one kmirror.yaml, each its own job; MM2: a source alias per
    #: family, every flow in its one process).
    flows: int = 1

    @property
    def data_topics(self) -> list[str]:
        return [f"{self.prefix}{i:02d}" for i in range(self.topics)]

    def families(self) -> list[list[str]]:
        """The data topics of each flow: topic i belongs to flow i mod `flows`."""
        if not 1 <= self.flows <= self.topics:
            raise ValueError(f"{self.flows} flows need 1 to {self.topics} topics each")
        return [self.data_topics[i :: self.flows] for i in range(self.flows)]

    def family_pattern(self, index: int) -> str:
        """The regex of flow `index`'s topics (the whole set's `pattern` with one flow)."""
        if self.flows == 1:
            return self.pattern
        return "(" + "|".join(t.replace(".", "[.]") for t in self.families()[index]) + ")"

    @property
    def per_topic(self) -> int:
        return self.records // self.topics

    @property
    def pattern(self) -> str:
        """The regex of the data topics (MM2's `topics`, the flow's include, ConsumerPerformance's --include)."""
        return self.prefix.replace(".", "[.]") + "[0-9]+"


@dataclass
class Cluster:
    name: str
    home: Path
    bootstrap: str
    pid: int

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})


def start_clusters(work: Path, heap: str) -> tuple[Cluster, Cluster]:
    def one(name: str, version: str) -> Cluster:
        c = kafka_local.start(name, version, work / name, BrokerOptions(heap=heap))
        assert c.pid is not None
        return Cluster(name, Path(c.home), c.bootstrap_servers, c.pid)

    with ThreadPoolExecutor(2) as pool:
        src = pool.submit(one, "source", KAFKA_SOURCE_VERSION)
        dst = pool.submit(one, "target", KAFKA_TARGET_VERSION)
        return src.result(), dst.result()


@contextlib.contextmanager
def clusters(work: Path, heap: str) -> Iterator[tuple[Cluster, Cluster]]:
    """Fresh source (3.9) and target (4.x) brokers under `work`, stopped on exit."""
    source, target = start_clusters(work, heap)
    try:
        yield source, target
    finally:
        for c in (source, target):
            kafka_local.stop(c.home)


def create_topics(
    cluster: Cluster, names: Sequence[str], partitions: int, config: dict[str, str] | None = None
) -> None:
    admin = cluster.admin()  # kept referenced until the futures resolve (a destroyed handle fails them)
    futures = admin.create_topics([NewTopic(n, partitions, 1, config=config or {}) for n in names], request_timeout=60)
    for f in futures.values():
        f.result(timeout=60)


def delete_topics(cluster: Cluster, names: Sequence[str]) -> None:
    """Delete `names` (those that exist) and wait for the deletions: a replicator's remote topics once its run is
    measured, so that N pairs of copies do not fill the target's disk."""
    admin = cluster.admin()
    existing = [t for t in names if t in admin.list_topics(timeout=10).topics]
    if not existing:
        return
    for f in admin.delete_topics(existing, request_timeout=60).values():
        with contextlib.suppress(KafkaException):
            f.result(timeout=60)


def await_leaders(cluster: Cluster, topics: Sequence[str], partitions: int, timeout: float = 120) -> float:
    """Wait until every partition of `topics` (each with `partitions`) has a leader and answers for its end offset;
    the seconds it took. Raises after `timeout`."""
    admin = cluster.admin()
    started = time.monotonic()
    while True:
        md = admin.list_topics(timeout=10)
        ready = all(
            (meta := md.topics.get(t)) is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
            for t in topics
        )
        if ready and end_offsets_by_topic(admin, topics) is not None:
            return round(time.monotonic() - started, 1)
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"the remote topics had no leader for every partition after {timeout:.0f}s")
        time.sleep(0.5)


def partitions_of(admin: AdminClient, topics: Sequence[str]) -> list[TopicPartition]:
    md = admin.list_topics(timeout=10)
    out: list[TopicPartition] = []
    for t in topics:
        meta = md.topics.get(t)
        if meta is not None and meta.error is None:
            out.extend(TopicPartition(t, p) for p in meta.partitions)
    return out


def end_offsets_by_topic(admin: AdminClient, topics: Sequence[str]) -> dict[str, int] | None:
    """The sum of each topic's high watermarks, in one round trip (a topic that does not exist yet is left out);
    None while a just-created partition has no leader yet."""
    tps = partitions_of(admin, topics)
    if not tps:
        return {}
    futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=10)
    out: dict[str, int] = {}
    for tp, f in futures.items():
        try:
            out[tp.topic] = out.get(tp.topic, 0) + f.result(timeout=10).offset
        except KafkaException:
            return None
    return out


def total_end_offsets(admin: AdminClient, topics: Sequence[str]) -> int:
    """Sum of the high watermarks of `topics` (0 for a topic that does not exist yet, or while a just-created
    partition has no leader: count again next poll)."""
    ends = end_offsets_by_topic(admin, topics)
    return sum(ends.values()) if ends else 0


def java() -> str:
    return os.environ.get("KMIRROR_JAVA", "java")


def worker_command(worker: str, *args: str) -> list[str]:
    """A worker of `load.py` run as its own Python process (`python -m benchmarks.replication.load _pace ...`)."""
    return [sys.executable, "-m", "benchmarks.replication.load", worker, *args]


def worker_env() -> dict[str, str]:
    """This environment with the repository root first on PYTHONPATH (the workers import `benchmarks`)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def stop_group(proc: subprocess.Popen[bytes], grace: float = 30) -> None:
    """SIGTERM a process group started with `start_new_session`, SIGKILL after `grace` seconds."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(15)
