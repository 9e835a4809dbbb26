"""Session-wide fixtures: real local Kafka clusters (3.9 source, 4.x target) and a real local Spark.

Set KMIRROR_TEST_SOURCE_BOOTSTRAP / KMIRROR_TEST_TARGET_BOOTSTRAP to run against existing clusters instead
of starting local ones. Clusters start only when a test asks for them, so `pytest -m unit` needs no JVM.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconciler.devenv import kafka_local
from reconciler.devenv.jars import KAFKA_SOURCE_VERSION, KAFKA_TARGET_VERSION
from reconciler.devenv.kafka_local import BrokerOptions, TlsMaterial

#: The tests of the built release, on one worker: they share one build (tests/integration/cli/conftest.py), and the
#: wheel's demo starts `kmirror dev` clusters on the examples' preferred ports (19092, 29092).
_RELEASE_MODULES = ("tests/integration/cli/test_release_wheel.py", "tests/integration/cli/test_wheel_demo.py")


#: The groups that take longest, longest first: a worker takes the next group when it is free, so the longest go first
#: and the many short modules fill in at the end, where they even out the two workers' finishing times. (With only
#: the four longest first, a 4-minute module taken last left the other worker idle for almost two minutes.)
#: Worker-minutes of CI's run of 2026-11-28 (2 workers on 2 cores, 44 minutes): keep this order by those figures.
_LONG_GROUPS = (  # worker-minutes in the CI run of 2026-11-28 (a0f691c), longest first
    "faults-eos",  # 10.0; less since trim3 (the killed executor on the zombie test's deployment, 28 s pauses)
    "tests/integration/replication/test_application_exactly_once.py",  # about 4 (6.8 with a 180 s failed wait)
    "faults",  # 6.7
    "tests/integration/replication/test_standalone_runner.py",  # 6.3 (HDFS without YARN)
    "tests/integration/replication/test_yarn_runner.py",  # 5.7: MiniYARN + MiniDFS
    "tests/integration/replication/test_standalone_applications.py",  # new: about 4.6 alone and quiet
    "faults-brokers",  # 3.9
    "tests/integration/replication/test_at_least_once_expiry.py",  # new: about 3-4, two forced expiries
    "tests/integration/replication/test_job_truth.py",  # 3.8
    "tests/integration/replication/test_exactly_once_job.py",  # 3.4
    "tests/integration/replication/test_delivery_switch.py",  # 3.1 with a 10 s interval; 5 s since trim3
    "release",  # 3.0: the wheel's build, its demo
    "tests/integration/replication/test_realtime_mode.py",  # 2.7
    "tests/integration/replication/test_applications.py",  # 2.3
    "tests/integration/offsets/test_exact_cutover.py",  # 2.1
    "tests/integration/plan/test_plan_apply.py",  # 1.9
    "tests/integration/plan/test_flow_lifecycle.py",  # 1.9
    "tests/e2e/test_tls_security.py",  # 1.9
    "tests/integration/replication/test_replication_job.py",  # 1.8
    "tests/integration/verify/test_verify.py",  # 1.5
    "tests/integration/replication/test_schema_sync.py",  # about 1-2, two schema registries
    "tests/integration/cli/test_sentinel_environments.py",  # about 1.5, no broker
)


def test_group(nodeid: str) -> str:
    """The unit of work a test runs in on `pytest -n N` (make test): its module, in file order (module fixtures
    deploy jobs once; some modules end with a test that changes their job), except the fault suite in three
    parts (each part's worker starts its own three-broker clusters once) and the release's tests together
    (one build; the demo wants the examples' ports)."""
    path = nodeid.split("::", 1)[0]
    if path == "tests/faults/test_broker_faults.py":
        return "faults-brokers"  # the rolling restart and the target outage: about half the fault suite
    if path == "tests/faults/test_exactly_once.py":
        return "faults-eos"  # about ten minutes: a third of the fault suite
    if path.startswith("tests/faults/"):
        return "faults"
    if path in _RELEASE_MODULES:
        return "release"
    return path


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Whole groups to a worker (`test_group`), longest first. Not `--dist loadgroup`: pytest 9.2 derives a
    node id from `Node._id`, so xdist 3.8's group suffix on `_nodeid` is lost and every test went its own way."""
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return test_group(nodeid)

    config.option.loadscopereorder = False  # the collection's order: _LONG_GROUPS first (see below)
    return Groups(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: the long groups first, everything else in file order (a stable sort)."""
    if hasattr(config, "workerinput"):
        rank = {group: i for i, group in enumerate(_LONG_GROUPS)}
        items.sort(key=lambda item: rank.get(test_group(item.nodeid), len(rank)))


@pytest.fixture(scope="session", autouse=True)
def kmirror_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This session's `$KMIRROR_HOME` (where local jobs keep their folders): never the user's own."""
    home = tmp_path_factory.mktemp("kmirror-home")
    previous = os.environ.get("KMIRROR_HOME")
    os.environ["KMIRROR_HOME"] = str(home)
    try:
        yield home
    finally:
        if previous is None:
            os.environ.pop("KMIRROR_HOME", None)
        else:
            os.environ["KMIRROR_HOME"] = previous


@dataclass(frozen=True)
class KafkaCluster:
    """A cluster a test talks to: local (started by the fixture) or existing (from the environment)."""

    name: str
    bootstrap_servers: str
    version: str | None
    home: Path | None = None
    sasl_bootstrap_servers: str | None = None
    tls_bootstrap_servers: str | None = None  # SSL, client certificate required (tls_pair)
    sasl_ssl_bootstrap_servers: str | None = None  # SASL_SSL: SCRAM and OAUTHBEARER (tls_pair)
    tls: TlsMaterial | None = None

    def config(self, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap_servers, **extra}


def _start(name: str, version: str, root: Path, options: BrokerOptions | None = None) -> KafkaCluster:
    c = kafka_local.start(name, version, root / name, options)
    return KafkaCluster(
        name, c.bootstrap_servers, c.version, Path(c.home), c.sasl_bootstrap_servers,
        c.tls_bootstrap_servers, c.sasl_ssl_bootstrap_servers, options.tls if options else None,
    )  # fmt: skip


def _offsets_partition(group: str) -> int:
    """The `__consumer_offsets` partition of `group`: Java's `String.hashCode`, masked positive, modulo."""
    h = 0
    for ch in group:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % kafka_local.OFFSETS_TOPIC_PARTITIONS


def _group_coordinators_loaded(cluster: KafkaCluster, timeout: float = 60.0) -> None:
    """Wait until every `__consumer_offsets` partition answers: a new cluster creates that topic on the first group
    request and loads its partitions for a moment, during which a group's first synchronous commit fails with
    NOT_COORDINATOR (a test's setup, not what it tests). One probe group per partition."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    probes: dict[int, str] = {}
    i = 0
    while len(probes) < kafka_local.OFFSETS_TOPIC_PARTITIONS:
        probes.setdefault(_offsets_partition(f"kmirror-test-probe-{i}"), f"kmirror-test-probe-{i}")
        i += 1
    deadline = time.monotonic() + timeout
    for group in probes.values():
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
        try:
            while time.monotonic() < deadline:
                try:
                    consumer.committed([TopicPartition("kmirror-test-probe", 0)], timeout=5)
                    break
                except KafkaException:
                    time.sleep(0.2)
        finally:
            consumer.close()


@contextmanager
def _local_pair(root: Path, options: BrokerOptions | None = None) -> Iterator[tuple[KafkaCluster, KafkaCluster]]:
    """A Kafka 3.9 source and a 4.x target started side by side under `root`, stopped on exit."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [
            pool.submit(_start, "source", KAFKA_SOURCE_VERSION, root, options),
            pool.submit(_start, "target", KAFKA_TARGET_VERSION, root, options),
        ]
        clusters = [f.result() for f in futures]
        list(pool.map(_group_coordinators_loaded, clusters))
    try:
        yield clusters[0], clusters[1]
    finally:
        for c in clusters:
            assert c.home is not None
            kafka_local.stop(c.home)


@pytest.fixture(scope="session")
def kafka_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaCluster, KafkaCluster]]:
    src_env = os.environ.get("KMIRROR_TEST_SOURCE_BOOTSTRAP")
    tgt_env = os.environ.get("KMIRROR_TEST_TARGET_BOOTSTRAP")
    if src_env and tgt_env:
        yield KafkaCluster("source", src_env, None), KafkaCluster("target", tgt_env, None)
        return
    with _local_pair(tmp_path_factory.mktemp("kafka")) as pair:
        yield pair


@pytest.fixture(scope="session")
def authz_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaCluster, KafkaCluster]]:
    """A second source/target pair with StandardAuthorizer on (ANONYMOUS and User:admin are super users)."""
    root = tmp_path_factory.mktemp("kafka-authz")
    options = BrokerOptions(authorizer=True)
    with _local_pair(root, options) as pair:
        yield pair


SCRAM_USER = "kmirror"


@pytest.fixture(scope="session")
def scram_secret() -> str:
    """The SCRAM password of the secured pair: random per session, so finding it anywhere is a real leak."""
    return f"s3cret-{uuid.uuid4().hex}"


@pytest.fixture(scope="session")
def scram_pair(
    tmp_path_factory: pytest.TempPathFactory, scram_secret: str
) -> Iterator[tuple[KafkaCluster, KafkaCluster]]:
    """A source/target pair whose clients must authenticate with SASL/SCRAM (on `sasl_bootstrap_servers`)."""
    root = tmp_path_factory.mktemp("kafka-scram")
    options = BrokerOptions(scram_users=((SCRAM_USER, scram_secret),))
    with _local_pair(root, options) as pair:
        yield pair


@pytest.fixture(scope="session")
def tls_pair(
    tmp_path_factory: pytest.TempPathFactory, scram_secret: str
) -> Iterator[tuple[KafkaCluster, KafkaCluster]]:
    """A source/target pair sharing one private CA (`KafkaCluster.tls`): an SSL listener that requires a client
    certificate (`tls_bootstrap_servers`) and a SASL_SSL listener with SCRAM users and unsecured-JWT OAUTHBEARER
    (`sasl_ssl_bootstrap_servers`)."""
    root = tmp_path_factory.mktemp("kafka-tls")
    material = kafka_local.ensure_tls_material(root / "tls")
    options = BrokerOptions(scram_users=((SCRAM_USER, scram_secret),), tls=material, oauth=True)
    with _local_pair(root, options) as pair:
        yield pair


@dataclass(frozen=True)
class RegistryPair:
    """Two real schema registries (Apicurio, Confluent API): the source's and the target's urls."""

    source: str
    target: str


@pytest.fixture(scope="session")
def registry_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryPair]:
    """A source and a target schema registry, as `kmirror dev up --schema-registry` starts them (built once)."""
    from reconciler.devenv import schema_registry

    root = tmp_path_factory.mktemp("registries")
    with ThreadPoolExecutor(max_workers=2) as pool:
        started = list(pool.map(lambda name: schema_registry.start(name, root / name), ("source", "target")))
    try:
        yield RegistryPair(started[0].url, started[1].url)
    finally:
        for name in ("source", "target"):
            schema_registry.stop(root / name)


@pytest.fixture(scope="session")
def source(kafka_pair: tuple[KafkaCluster, KafkaCluster]) -> KafkaCluster:
    return kafka_pair[0]


@pytest.fixture(scope="session")
def target(kafka_pair: tuple[KafkaCluster, KafkaCluster]) -> KafkaCluster:
    return kafka_pair[1]


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses, readable in broker logs."""
    base = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:60]
    return f"t-{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real local Spark session with the Kafka connector on its classpath."""
    from reconciler.devenv.spark_local import local_session

    session = local_session("kmirror-tests", tmp_path_factory.mktemp("spark"))
    try:
        yield session
    finally:
        session.stop()


def process_state(pid: int) -> str | None:
    """None once `pid` has exited (gone, or a zombie its new parent has not reaped yet); else its state and parent."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except FileNotFoundError:
        return None
    return None if fields[0] == "Z" else f"{fields[0]}, parent {fields[1]}"


def applied_state_key(desired: Any, config: dict[str, str] | None = None) -> str:
    """What the jobs `kmirror apply` deploys for `desired` are keyed by: `<state topic>@<the state cluster's id>`
    (`jobcontract.layout.state_key`). `config`: the state cluster's client settings when the desired state's own
    need secrets this process's environment does not hold."""
    from confluent_kafka.admin import AdminClient

    from reconciler.jobcontract.layout import state_key

    settings = dict(config or desired.client_config(desired.state.cluster))
    cluster_id = AdminClient(settings).list_topics(timeout=30).cluster_id
    return state_key(desired.state.topic, cluster_id)
