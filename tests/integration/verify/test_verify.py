"""`kmirror verify` on the local clusters (Kafka 3.9 source, 4.x target), through the CLI, asserting its JSON.

Two worlds:
  - the real replication job (the replication tests' module-scoped `flow`, one deployment for the module) copies
    a topic; a clean copy verifies (exit 0, every record checked); then one record of the target is deleted
    (DeleteRecords) and one written twice (the last record produced again to the target), and verify reports each
    at its source offset;
  - a copy made by the test itself, record by record with its own offset-syncs (MM2's wire format, in the flow's
    offset-syncs topic, where the job would write them), so that faults the job never makes can be put exactly
    where the test wants them: a record written twice in the middle, one altered (produced to the target in its
    copy's place), one missing, DeleteRecords on the target; an aborted transaction on the source (absent on both
    sides: not a difference); records past the newest sync (in flight: exit 2 with --detailed-exitcode); real
    compaction on a compacted target topic (unverifiable, not missing).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from reconciler.app.cutover import readiness
from reconciler.core.mm2.wire import OffsetSync
from reconciler.spec.loader import load
from reconciler.spec.models import FlowSpec
from reconciler.verify.compare import sampled
from tests.conftest import KafkaCluster
from tests.integration.replication.conftest import (  # noqa: F401 (`flow`: the module's running job)
    Flow,
    Rec,
    create_topic,
    flow,
    read_partition,
    wait_for,
    wait_replicated,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KMIRROR = [sys.executable, "-m", "reconciler.cli"]
N = 120  # records per partition


def run_verify(spec: Path, flow_name: str, *args: str) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [*KMIRROR, "verify", "-f", str(spec), "--flow", flow_name, "--format", "json", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"verify printed no JSON (exit {proc.returncode}): {proc.stdout}\n{proc.stderr}") from None
    return proc.returncode, doc


def by_partition(doc: dict[str, Any], topic: str) -> dict[int, dict[str, Any]]:
    return {e["partition"]: e for e in doc["partitions"] if e["topic"] == topic}


def faults(entry: dict[str, Any]) -> dict[str, int]:
    names = ("missing", "duplicated", "reordered", "different", "unexpected", "unverifiable")
    return {n: entry[n] for n in names if entry[n]}


def produce_records(cluster: KafkaCluster, topic: str, partitions: int, n: int) -> None:
    p = Producer(cluster.config(**{"enable.idempotence": True, "linger.ms": 5}))
    for i in range(n):
        for part in range(partitions):
            p.produce(
                topic,
                key=f"k{part}-{i}".encode(),
                value=f"v{part}-{i}".encode() * 8,
                headers=[("seq", str(i).encode())],
                partition=part,
            )
        p.poll(0)
    assert p.flush(30) == 0


def delete_before(cluster: KafkaCluster, topic: str, partition: int, offset: int) -> None:
    admin = AdminClient(cluster.config())
    futures = admin.delete_records([TopicPartition(topic, partition, offset)], request_timeout=30)
    for f in futures.values():
        f.result(timeout=30)


def source_offsets_of(source: list[Rec], copies: list[Rec]) -> list[int]:
    """The source offsets of the records in `copies` (matched by content)."""
    where = {(r.key, r.value, r.timestamp): r.offset for r in source}
    return sorted(where[(c.key, c.value, c.timestamp)] for c in copies)


def spec_of(f: Flow, tmp: Path) -> Path:
    """A desired-state file with the module flow's clusters and flow (what verify reads of it)."""
    spec = tmp / "kmirror.yaml"
    spec.write_text(
        textwrap.dedent(f"""\
        version: 1
        clusters:
          {f.source_alias}: {{bootstrap_servers: "{f.source.bootstrap_servers}"}}
          {f.target_alias}: {{bootstrap_servers: "{f.target.bootstrap_servers}"}}
        state: {{cluster: {f.target_alias}, topic: _kmirror.state}}
        flows:
          - name: {f.name}
            source: {f.source_alias}
            target: {f.target_alias}
            topics: {{include: ['{f.prefix}\\..*']}}
            offsets: {{offset_lag_max: 10}}
        """)
    )
    assert load(spec).state.flow(f.name).remote_topic("x") == f.remote("x")
    return spec


# -- the real job -----------------------------------------------------------------------------------------------


def test_the_jobs_copy_verifies_then_a_deleted_and_a_duplicated_record_are_reported(flow: Flow, tmp_path: Path) -> None:  # noqa: F811
    topic = flow.topic("verified")
    remote = flow.remote(topic)
    create_topic(flow.source, topic, 2)
    produce_records(flow.source, topic, 2, N)
    flow.deploy()
    wait_replicated(flow, topic, {0: N, 1: N}, timeout=240)
    wait_for("replication lag 0", lambda: readiness(flow.state, flow.name).total_lag == 0, timeout=120)
    spec = spec_of(flow, tmp_path)

    code, doc = run_verify(spec, flow.name, "--topics", topic.replace(".", r"\."))
    assert code == 0, doc["summary"]
    assert doc["ok"] is True and doc["flow"] == flow.name
    parts = by_partition(doc, topic)
    assert sorted(parts) == [0, 1]
    for e in parts.values():
        assert e["ok"] and e["checked"] == N and faults(e) == {} and e["first_bad_source_offsets"] == []
    assert doc["summary"]["checked"] == 2 * N and doc["summary"]["complete"] is True

    # One record gone from the target (DeleteRecords below offset 3 of partition 0), one written twice (the last
    # record of partition 1 produced again to the target, as an at-least-once retry would).
    src0 = read_partition(flow.source, topic, 0)
    gone = [r for r in read_partition(flow.target, remote, 0) if r.offset < 3]
    delete_before(flow.target, remote, 0, 3)
    last = read_partition(flow.target, remote, 1)[-1]
    p = Producer(flow.target.config())
    p.produce(remote, key=last.key, value=last.value, headers=list(last.headers), timestamp=last.timestamp, partition=1)
    assert p.flush(30) == 0
    source1 = read_partition(flow.source, topic, 1)

    code, doc = run_verify(spec, flow.name, "--topics", topic.replace(".", r"\."))
    assert code == 1 and doc["ok"] is False
    parts = by_partition(doc, topic)
    assert faults(parts[0]) == {"missing": 3}
    assert parts[0]["first_bad_source_offsets"] == source_offsets_of(src0, gone)
    assert faults(parts[1]) == {"duplicated": 1}
    assert parts[1]["first_bad_source_offsets"] == [source1[-1].offset]
    assert any("at-least-once" in n for n in doc["notes"])
    assert parts[0]["checked"] == N and parts[1]["checked"] == N


# -- a copy made by the test, faults exactly placed -------------------------------------------------------------


@dataclass
class Manual:
    """A flow that is never deployed: the test copies its records and writes its offset-syncs itself."""

    spec: Path
    name: str
    prefix: str
    flow: FlowSpec
    source: KafkaCluster
    target: KafkaCluster

    @property
    def syncs_topic(self) -> str:
        return self.flow.policy().offset_syncs_topic(self.flow.target)


@pytest.fixture(scope="module")
def manual(source: KafkaCluster, target: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Manual]:
    tag = uuid.uuid4().hex[:6]
    base = tmp_path_factory.mktemp("verify-manual")
    spec = base / "kmirror.yaml"
    spec.write_text(
        textwrap.dedent(f"""\
        version: 1
        clusters:
          s{tag}: {{bootstrap_servers: "{source.bootstrap_servers}"}}
          t{tag}: {{bootstrap_servers: "{target.bootstrap_servers}"}}
        state: {{cluster: t{tag}, topic: "_kmirror.state-{tag}"}}
        flows:
          - name: manual
            source: s{tag}
            target: t{tag}
            topics: {{include: ['ver{tag}\\..*']}}
            offsets: {{offset_lag_max: 10}}
        """)
    )
    m = Manual(spec, "manual", f"ver{tag}", load(spec).state.flow("manual"), source, target)
    create_topic(source, m.syncs_topic, 1, {"cleanup.policy": "compact"})
    yield m


def copy_with_faults(
    m: Manual,
    topic: str,
    partition: int,
    fault: str | None,
    *,
    copy_first: int | None = None,
    batch_per_record: bool = False,
) -> list[int]:
    """Copy the committed records of a source partition to the remote one, in order, with one fault (or only the
    first `copy_first`); write an offset-sync every 10 records and for the last one copied (MM2's rule with
    offset_lag_max 10). Returns the source offsets the fault concerns."""
    records = read_partition(m.source, topic, partition, read_committed=True)
    remote = m.flow.remote_topic(topic)
    records_copied = records if copy_first is None else records[:copy_first]
    k = len(records) // 3
    landed: dict[int, int] = {}
    concerned: list[int] = []
    p = Producer(m.target.config(**{"enable.idempotence": True}))

    def send(r: Rec, value: bytes | None, source_offset: int | None) -> None:
        def done(err: Any, msg: Any) -> None:
            assert err is None, err
            if source_offset is not None:
                landed.setdefault(source_offset, msg.offset())

        p.produce(remote, key=r.key, value=value, headers=list(r.headers), timestamp=r.timestamp,
                  partition=partition, on_delivery=done)  # fmt: skip

    for i, r in enumerate(records_copied):
        if fault == "missing" and i == k:
            concerned.append(r.offset)
            continue
        if fault == "altered" and i == k:
            concerned.append(r.offset)
            send(r, b"altered on the target", r.offset)
            continue
        send(r, r.value, r.offset)
        if batch_per_record:  # segment.ms rolls between batches only
            assert p.flush(30) == 0
        if fault == "twice" and i == k:
            concerned.append(r.offset)
            send(r, r.value, None)
    assert p.flush(30) == 0
    syncs = Producer(m.source.config())
    for i, r in enumerate(records_copied):
        if r.offset not in landed:
            continue
        if i % 10 == 0 or i == len(records_copied) - 1:
            s = OffsetSync(topic, partition, r.offset, landed[r.offset])
            syncs.produce(m.syncs_topic, key=s.key_bytes(), value=s.value_bytes(), partition=0)
    assert syncs.flush(30) == 0
    return concerned


def test_faults_placed_by_hand_are_each_reported_exactly(manual: Manual) -> None:
    m = manual
    topic = f"{m.prefix}.orders"
    remote = m.flow.remote_topic(topic)
    create_topic(m.source, topic, 5)
    create_topic(m.target, remote, 5)
    produce_records(m.source, topic, 5, N)
    # Partition 4: an aborted transaction in the middle (never copied: read_committed on both sides).
    tx = Producer(m.source.config(**{"transactional.id": f"verify-{uuid.uuid4().hex[:6]}"}))
    tx.init_transactions(30)
    tx.begin_transaction()
    for i in range(7):
        tx.produce(topic, key=b"aborted", value=str(i).encode(), partition=4)
    tx.abort_transaction(30)
    produce_records_one(m.source, topic, 4, 20)

    twice = copy_with_faults(m, topic, 0, "twice")
    altered = copy_with_faults(m, topic, 1, "altered")
    copy_with_faults(m, topic, 2, None)
    delete_before(m.target, remote, 2, 4)  # DeleteRecords: the copies of source offsets 0..3 of partition 2
    missing = copy_with_faults(m, topic, 3, "missing")
    copy_with_faults(m, topic, 4, None)

    code, doc = run_verify(m.spec, m.name, "--topics", topic.replace(".", r"\."))
    assert code == 1 and doc["ok"] is False
    parts = by_partition(doc, topic)
    assert faults(parts[0]) == {"duplicated": 1} and parts[0]["first_bad_source_offsets"] == twice
    assert faults(parts[1]) == {"different": 1} and parts[1]["first_bad_source_offsets"] == altered
    (diff,) = parts[1]["differences"]
    assert diff["field"] == "value" and diff["source_offset"] == altered[0]
    assert "altered" not in json.dumps(doc)  # digests, never the content
    assert faults(parts[2]) == {"missing": 4} and parts[2]["first_bad_source_offsets"] == [0, 1, 2, 3]
    assert faults(parts[3]) == {"missing": 1} and parts[3]["first_bad_source_offsets"] == missing
    # The aborted transaction's records (and its marker) are on neither side: partition 4 matches in full.
    assert parts[4]["ok"] and faults(parts[4]) == {}
    for e in parts.values():
        assert e["checked"] == (N + 20 if e["partition"] == 4 else N)
    assert doc["summary"]["partitions_ok"] == 1 and doc["summary"]["missing"] == 5


def test_records_not_copied_yet_are_unverifiable_and_detailed_exitcode_says_2(manual: Manual) -> None:
    m = manual
    topic = f"{m.prefix}.inflight"
    create_topic(m.source, topic, 1)
    create_topic(m.target, m.flow.remote_topic(topic), 1)
    produce_records(m.source, topic, 1, 50)
    copy_with_faults(m, topic, 0, None, copy_first=42)  # the newest sync: source 41; 42..49 not copied yet
    pattern = topic.replace(".", r"\.")

    code, doc = run_verify(m.spec, m.name, "--topics", pattern, "--detailed-exitcode")
    assert code == 2 and doc["ok"] is True and doc["summary"]["complete"] is False
    (entry,) = doc["partitions"]
    assert entry["checked"] == 42 and faults(entry) == {"unverifiable": 8}
    assert any("in flight" in n for n in doc["notes"])
    assert run_verify(m.spec, m.name, "--topics", pattern)[0] == 0

    # --last 5: only the last five offsets, all in flight; --since a time after the last record: nothing.
    code, doc = run_verify(m.spec, m.name, "--topics", pattern, "--last", "5", "--detailed-exitcode")
    assert code == 2 and doc["partitions"][0]["unverifiable"] == 5 and doc["partitions"][0]["checked"] == 0
    code, doc = run_verify(m.spec, m.name, "--topics", pattern, "--since", "2999-01-01T00:00:00Z")
    assert code == 0 and doc["partitions"][0]["checked"] == 0

    # --sample: the segments between syncs (0, 10, 20, 30, 40, 41) its hash selects, the same on every run.
    segments = [(0, 10), (10, 20), (20, 30), (30, 40), (40, 41), (41, 42)]  # 42..49: in flight
    expected = sum(end - start for start, end in segments if sampled(topic, 0, start, 0.5))
    code, first = run_verify(m.spec, m.name, "--topics", pattern, "--sample", "0.5")
    code2, second = run_verify(m.spec, m.name, "--topics", pattern, "--sample", "0.5")
    assert code == code2 == 0 and first["sample"] == 0.5
    assert first["partitions"][0]["checked"] == second["partitions"][0]["checked"] == expected


def test_compaction_on_the_target_is_unverifiable_not_missing(manual: Manual) -> None:
    m = manual
    topic = f"{m.prefix}.compacted"
    remote = m.flow.remote_topic(topic)
    create_topic(m.source, topic, 1)  # the source keeps every record
    compaction = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}
    create_topic(m.target, remote, 1, {**compaction, "min.compaction.lag.ms": "0"})
    p = Producer(m.source.config())
    # Ten keys, each written four times: the last ten records are the newest per key. Timestamps 200 ms apart
    # and one batch per copy: segment.ms rolls by record timestamps between batches, so each copy lands in a
    # segment of its own, which the cleaner compacts (all but the active one).
    base = int(time.time() * 1000) - 40 * 200
    for i in range(40):
        key, value = f"key{i % 10}".encode(), f"version {i // 10}".encode()
        p.produce(topic, key=key, value=value, timestamp=base + 200 * i, partition=0)
    assert p.flush(30) == 0
    copy_with_faults(m, topic, 0, None, batch_per_record=True)
    survivors = wait_for(
        "compaction on the target",
        lambda: (lambda n: n if n < 40 else None)(len(read_partition(m.target, remote, 0))),
        timeout=90,
    )

    code, doc = run_verify(m.spec, m.name, "--topics", topic.replace(".", r"\."), "--detailed-exitcode")
    (entry,) = doc["partitions"]
    assert code == 2 and entry["ok"] is True, entry
    # The cleaner may go on between the count above and verify's read: at least as many gone, the newest of each
    # key always there, every source record either checked or unverifiable for compaction, none missing.
    gone = entry["unverifiable"]
    assert faults(entry) == {"unverifiable": gone} and gone >= 40 - survivors
    assert entry["checked"] + gone == 40 and entry["checked"] >= 10
    assert entry["reasons"] == {"compaction on the target (a compacted topic)": gone}


def test_the_spark_engine_reports_the_same_as_the_python_engine(manual: Manual) -> None:
    """One Spark task per partition (local Spark, the flow's spark settings): the same counts and offsets."""
    m = manual
    topic = f"{m.prefix}.spark"
    create_topic(m.source, topic, 4)
    create_topic(m.target, m.flow.remote_topic(topic), 4)
    produce_records(m.source, topic, 4, N)
    twice = copy_with_faults(m, topic, 0, "twice")
    altered = copy_with_faults(m, topic, 1, "altered")
    missing = copy_with_faults(m, topic, 2, "missing")
    copy_with_faults(m, topic, 3, None, copy_first=N - 5)  # five in flight
    pattern = re.escape(topic)

    python_code, python_doc = run_verify(m.spec, m.name, "--topics", pattern)
    spark_code, spark_doc = run_verify(m.spec, m.name, "--topics", pattern, "--engine", "spark")
    assert spark_code == python_code == 1
    parts = by_partition(spark_doc, topic)
    assert faults(parts[0]) == {"duplicated": 1} and parts[0]["first_bad_source_offsets"] == twice
    assert faults(parts[1]) == {"different": 1} and parts[1]["first_bad_source_offsets"] == altered
    assert faults(parts[2]) == {"missing": 1} and parts[2]["first_bad_source_offsets"] == missing
    assert faults(parts[3]) == {"unverifiable": 5} and parts[3]["checked"] == N - 5

    def comparable(doc: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in e.items() if k != "differences"} for e in doc["partitions"]]  # digests: keyed

    assert comparable(spark_doc) == comparable(python_doc)
    assert [d["field"] for d in parts[1]["differences"]] == ["value"]


def test_bad_input_is_a_clear_error_with_exit_1(manual: Manual) -> None:
    proc = subprocess.run(
        [*KMIRROR, "verify", "-f", str(manual.spec), "--flow", "nope"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 1 and "there is no flow 'nope'" in proc.stderr and "manual" in proc.stderr
    proc = subprocess.run(
        [*KMIRROR, "verify", "-f", str(manual.spec), "--flow", "manual", "--since", "yesterday"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1 and "--since 'yesterday'" in proc.stderr
    proc = subprocess.run(
        [*KMIRROR, "verify", "-f", str(manual.spec), "--flow", "manual", "--since", "1h", "--last", "5"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1 and "pass one of them" in proc.stderr


def produce_records_one(cluster: KafkaCluster, topic: str, partition: int, n: int) -> None:
    p = Producer(cluster.config(**{"enable.idempotence": True}))
    for i in range(n):
        p.produce(topic, key=f"after-{i}".encode(), value=b"x" * 64, partition=partition)
    assert p.flush(30) == 0
