"""Committed-offset metadata crosses between Java clients and kmirror exactly, on real brokers (3.9 and 4.x).

A Java client (`jvm/OffsetMetadataProbe.java`, Kafka's Java Admin `alterConsumerGroupOffsets`, as Kafka Streams,
MirrorMaker 2 and kmirror's exactly-once writer commit) writes metadata with no NUL after it. confluent-kafka read it
as a C string from a copy librdkafka had not NUL-terminated, so the metadata came back with heap bytes appended:
invalid UTF-8 (UnicodeDecodeError in `read_groups`, CI) or silently wrong text the plan and the checkpointer copied
on. Heap-dependent, so each read test reads many times; before the fix about 4 reads in 10 were wrong.
The other way, confluent-kafka wrote one byte more, a NUL, that a Java reader saw at the end of the string.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from reconciler.artifacts.java_build import jdk_tool
from reconciler.artifacts.quota_tool import client_jars
from reconciler.kafka_clients.admin import KafkaAdmin
from reconciler.kafka_clients.exact_offsets import CommittedOffset, ExactOffsets
from tests.conftest import SCRAM_USER, KafkaCluster
from tests.integration.plan.harness import create_topics

pytestmark = pytest.mark.integration

#: Lengths around malloc's 8/16-byte steps (where the over-read starts right after the string), odd ones, the
#: exactly-once writer's lane mark (75-76 characters, the CI failure), non-ASCII UTF-8, and a long one.
METADATA = [
    *("m" * n for n in (1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33, 47, 48, 63, 64, 65)),
    f"kmirror:g=12,t=ZXhhY3RseS1vbmNlLXRvcGk,l={uuid.uuid4()}",
    f"kmirror:g=3,t=ZXhhY3RseS1vbmNlLXRvcGk,l={uuid.uuid4()}",
    "Grüße, 東京 €",
    "😀" * 4,
    "é" * 40,
    "s" * 1000,
]
READS = 40


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The `java` command line of the probe, compiled against the Kafka client jars kmirror fetches."""
    javac, java = jdk_tool("javac"), jdk_tool("java")
    assert javac is not None and java is not None, "a JDK is needed"
    out = tmp_path_factory.mktemp("offset-metadata-probe")
    classpath = ":".join(str(p) for p in client_jars())
    source = Path(__file__).parent / "jvm" / "OffsetMetadataProbe.java"
    subprocess.run([javac, "-nowarn", "-d", str(out), "-cp", classpath, str(source)], check=True, timeout=180)
    return [java, "-cp", f"{out}:{classpath}", "OffsetMetadataProbe"]


def java_commit(
    probe: list[str], cluster: KafkaCluster, group: str, rows: dict[tuple[str, int], tuple[int, str]]
) -> None:
    lines = "".join(f"{t} {p} {o} {m.encode().hex() or '.'}\n" for (t, p), (o, m) in rows.items())
    subprocess.run(
        [*probe, "write", cluster.bootstrap_servers, group], input=lines, text=True, check=True, timeout=120,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def java_read(probe: list[str], cluster: KafkaCluster, group: str) -> dict[tuple[str, int], tuple[int, bytes]]:
    """What a Java client reads: (offset, the metadata's UTF-8 bytes) per partition."""
    done = subprocess.run(
        [*probe, "read", cluster.bootstrap_servers, group], capture_output=True, text=True, check=True, timeout=120
    )
    out = {}
    for line in done.stdout.splitlines():
        topic, partition, offset, hexed, _ = line.split(" ")
        out[(topic, int(partition))] = (int(offset), bytes.fromhex(hexed.replace(".", "")))
    return out


@pytest.mark.parametrize("side", ["source", "target"])
def test_metadata_a_java_client_committed_reads_back_exactly_every_time(
    side: str, source: KafkaCluster, target: KafkaCluster, probe: list[str]
) -> None:
    cluster = source if side == "source" else target
    tag = uuid.uuid4().hex[:6]
    topic, group = f"meta{tag}", f"meta{tag}-java"
    create_topics(cluster, (topic, len(METADATA) + 1, {}))
    committed = {(topic, i): (100 + i, m) for i, m in enumerate(METADATA)}
    committed[(topic, len(METADATA))] = (7, "")  # no metadata: none in kmirror's view either
    java_commit(probe, cluster, group, committed)
    admin = KafkaAdmin(side, cluster.config(), timeout=30)
    expected_metadata = {tp: m for tp, (_, m) in committed.items() if m}
    for i in range(READS):
        # Every group of the cluster, as the plan lists them (other tests' and the exactly-once writer's too), and
        # ours alone, alternately: different heaps under each read.
        groups, _ = admin.read_groups(None if i % 2 else (lambda g: g == group))
        info = groups[group]
        assert info.offsets == {tp: o for tp, (o, _) in committed.items()}
        assert dict(info.metadata) == expected_metadata, f"read {i + 1} of {READS}"


@pytest.mark.parametrize("side", ["source", "target"])
def test_metadata_kmirror_writes_reads_back_exactly_in_a_java_client(
    side: str, source: KafkaCluster, target: KafkaCluster, probe: list[str]
) -> None:
    """What a Java consumer or Kafka Streams app reads after kmirror synced its group's offsets: no trailing NUL."""
    cluster = source if side == "source" else target
    tag = uuid.uuid4().hex[:6]
    topic, group = f"metaw{tag}", f"metaw{tag}-kmirror"
    create_topics(cluster, (topic, len(METADATA) + 1, {}))
    offsets = {(topic, i): 50 + i for i in range(len(METADATA) + 1)}
    metadata = {(topic, i): m for i, m in enumerate(METADATA)}  # the last partition: none
    admin = KafkaAdmin(side, cluster.config(), timeout=30)
    outcome = admin.alter_group_offsets(group, offsets, metadata)
    assert outcome.ok, outcome
    seen = java_read(probe, cluster, group)
    assert seen == {tp: (o, metadata.get(tp, "").encode()) for tp, o in offsets.items()}
    # ... and kmirror reads back what it wrote.
    info = admin.groups(lambda g: g == group)[group]
    assert info.offsets == offsets and dict(info.metadata) == metadata


def test_without_the_exact_path_metadata_is_unknown_never_garbage(target: KafkaCluster, probe: list[str]) -> None:
    """A configuration with a Python callback (AWS_MSK_IAM's oauth_cb; here an error_cb) cannot go through the C
    API: kmirror then reads offsets through confluent-kafka and leaves every metadata string out, as unknown, and
    writes offsets without metadata."""
    tag = uuid.uuid4().hex[:6]
    topic, group = f"metau{tag}", f"metau{tag}-java"
    create_topics(target, (topic, len(METADATA), {}))
    committed = {(topic, i): (100 + i, m) for i, m in enumerate(METADATA)}
    java_commit(probe, target, group, committed)
    admin = KafkaAdmin("target", {**target.config(), "error_cb": lambda err: None}, timeout=30)
    for i in range(READS):
        groups, _ = admin.read_groups(None if i % 2 else (lambda g: g == group))
        assert groups[group].offsets == {tp: o for tp, (o, _) in committed.items()}
        assert dict(groups[group].metadata) == {}, f"read {i + 1} of {READS}"
    # Writing there: the offsets, without metadata (confluent-kafka would append a NUL to it).
    synced = f"metau{tag}-synced"
    offsets = {tp: o for tp, (o, _) in committed.items()}
    assert admin.alter_group_offsets(synced, offsets, {tp: m for tp, (_, m) in committed.items()}).ok
    assert java_read(probe, target, synced) == {tp: (o, b"") for tp, o in offsets.items()}


def test_writing_offsets_to_a_cluster_that_does_not_answer_is_a_transient_failure() -> None:
    admin = KafkaAdmin("gone", {"bootstrap.servers": "127.0.0.1:1"}, timeout=3)
    outcome = admin.alter_group_offsets("g", {("t", 0): 1}, {("t", 0): "meta"})
    assert not outcome.ok and outcome.transient, outcome


def test_metadata_with_a_nul_inside_reads_back_exactly(target: KafkaCluster) -> None:
    """A C client may commit metadata with a NUL inside (confluent-kafka cuts it there); the broker keeps it as it
    came (bytes that are not UTF-8 it stores as U+FFFD: a Kafka STRING), and kmirror reads it whole."""
    tag = uuid.uuid4().hex[:6]
    topic, group = f"metab{tag}", f"metab{tag}-c"
    create_topics(target, (topic, 2, {}))
    exact = ExactOffsets(target.config(), timeout=30)
    try:
        written = exact.alter_group_offsets(group, {(topic, 0): 5, (topic, 1): 6}, {(topic, 0): b"ok\x00x"})
        assert written.result(timeout=60) is None
        raw = exact.list_group_offsets([group])[group].result(timeout=60)
        assert raw == {(topic, 0): CommittedOffset(5, b"ok\x00x"), (topic, 1): CommittedOffset(6, None)}
    finally:
        exact.close()
    info = KafkaAdmin("target", target.config(), timeout=30).groups(lambda g: g == group)[group]
    assert info.offsets == {(topic, 0): 5, (topic, 1): 6}
    assert dict(info.metadata) == {(topic, 0): "ok\x00x"}


def test_exact_offsets_authenticate_with_scram_and_a_wrong_password_is_not_shown(
    scram_pair: tuple[KafkaCluster, KafkaCluster], scram_secret: str
) -> None:
    """The exact path is a client of its own: it gets the cluster's SASL settings, and its errors never carry them."""
    target = scram_pair[1]
    scram = {
        "bootstrap.servers": target.sasl_bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": SCRAM_USER,
    }
    tag = uuid.uuid4().hex[:6]
    group = f"metas{tag}"
    admin = KafkaAdmin("target", {**scram, "sasl.password": scram_secret}, timeout=30)
    assert admin.create_topics([(f"metas{tag}", 1, 1, {})])[0].ok
    assert admin.wait_visible([f"metas{tag}"]) == set()
    written = admin.alter_group_offsets(group, {(f"metas{tag}", 0): 3}, {(f"metas{tag}", 0): "ünïcode:16bytes"})
    assert written.ok, written
    info = admin.groups(lambda g: g == group)[group]
    assert info.offsets == {(f"metas{tag}", 0): 3} and dict(info.metadata) == {(f"metas{tag}", 0): "ünïcode:16bytes"}
    wrong = f"wrong-{uuid.uuid4().hex}"
    refused = KafkaAdmin("target", {**scram, "sasl.password": wrong}, timeout=5).alter_group_offsets(
        group, {(f"metas{tag}", 0): 4}, {(f"metas{tag}", 0): "x"}
    )
    assert not refused.ok and wrong not in refused.message and scram_secret not in refused.message, refused
    assert admin.groups(lambda g: g == group)[group].offsets == {(f"metas{tag}", 0): 3}
