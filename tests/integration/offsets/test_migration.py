"""The migration procedure end to end on the local clusters (Kafka 3.9 source, 4.x target), identity naming.

Producers write sequence-numbered records to the source; two consumer groups stop half-way and commit; `kmirror
apply` creates the mirrors; the real replication job (LocalRunner, spark-submit) copies while producers keep
writing; producers stop; lag reaches 0; `kmirror plan` shows the translated offsets of both groups; `kmirror
apply --target` writes one; `kmirror cutover` writes the other (final checkpoint included); the same group ids
then consume on the target. Every sequence number is read, none is skipped, and none is read twice: with
producers stopped and lag 0, the plan already says every row is exact (the records read and matched,
`reconciler.core.offsets.exact`), `apply` writes those exact offsets and the cutover writes the other group's, exact
too (MM2's conservative translation, within `offset_lag_max`, is each row's `conservative_offset`).
Afterwards a checkpoint cycle with group sync on does not move a target group that went further backwards, and
the checkpoints decode with MM2's Checkpoint schema.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reconciler.app.cutover import readiness
from reconciler.jobcontract.spec import EffectiveSpec
from reconciler.kafka_clients.checkpointer import checkpoint_once
from reconciler.runners import LocalRunner
from reconciler.spec.loader import load
from tests.conftest import KafkaCluster, applied_state_key
from tests.integration.replication.conftest import stop_or_kill

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.slow]

KMIRROR = [sys.executable, "-m", "reconciler.cli"]
PARTITIONS = 3
FIRST = 200  # records per partition before the job starts
MORE = 100  # records per partition produced while it runs
LAG_MAX = 10
STOP_AT = {"app": (100, 75, 50), "batch": (133, 0, 199)}  # records each group consumed per partition on the source


class Env:
    """One migration's world: unique cluster aliases, topic prefix, groups, and its kmirror.yaml.

    `naming` is the flow's naming block (identity here; the gap test uses prefix); `sync` extra keys of its sync
    block.
    """

    def __init__(
        self,
        tmp: Path,
        source: KafkaCluster,
        target: KafkaCluster,
        *,
        naming: str = "{policy: identity}",
        sync: str = "",
    ) -> None:
        self.tmp = tmp
        self.source = source
        self.target = target
        self.tag = tag = uuid.uuid4().hex[:6]
        self.src, self.dst, self.flow = f"s{tag}", f"d{tag}", f"mig{tag}"
        self.topic = f"mig{tag}.orders"
        self.groups = {name: f"mig{tag}-{name}" for name in STOP_AT}
        self.spec = tmp / "kmirror.yaml"
        self.spec.write_text(
            textwrap.dedent(f"""\
            version: 1
            clusters:
              {self.src}: {{bootstrap_servers: "{source.bootstrap_servers}"}}
              {self.dst}: {{bootstrap_servers: "{target.bootstrap_servers}"}}
            state: {{cluster: {self.dst}, topic: "_kmirror.state-{tag}"}}
            spark:
              deploy: local
              master: "local[2]"
              checkpoint_root: checkpoints
              conf: {{spark.kmirror.triggerInterval: "200 milliseconds"}}
            flows:
              - name: {self.flow}
                source: {self.src}
                target: {self.dst}
                topics: {{include: ['mig{tag}\\..*']}}
                groups: {{include: ['mig{tag}-.*']}}
                naming: {naming}
                sync: {{group_offsets: true{sync}}}
                # The job's own checkpointer writes translated offsets every checkpoint_interval (the demo e2e
                # covers that path); here its first cycle runs before any offset-sync exists and the next is an
                # hour away, so the plan/apply/cutover steps below are what moves the groups.
                offsets: {{offset_lag_max: {LAG_MAX}, checkpoint_interval: 1h}}
                heartbeats: {{enabled: false}}
            """)
        )
        self.state = load(self.spec).state

    def remote(self, topic: str) -> str:
        """The remote topic name of a source topic under the flow's naming policy."""
        return self.state.flow(self.flow).remote_topic(topic)

    def kmirror(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*KMIRROR, *args],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "NO_COLOR": "1"},
            cwd=self.tmp,
            check=False,
        )


@contextlib.contextmanager
def with_runner(e: Env) -> Iterator[Env]:
    """`e` with `e.runner`, the local runner of the jobs apply deploys for it; the flow's job is stopped at the end."""
    runner = LocalRunner(
        e.tmp, e.state.spark, state_topic=e.state.state.topic, state_key=applied_state_key(e.state), stop_timeout=60
    )
    e.runner = runner  # type: ignore[attr-defined]
    try:
        yield e
    finally:
        stop_or_kill(runner, e.flow)


@pytest.fixture
def env(tmp_path: Path, source: KafkaCluster, target: KafkaCluster) -> Iterator[Env]:
    e = Env(tmp_path, source, target)
    with with_runner(e) as ready:
        yield ready


def produce(cluster: KafkaCluster, topic: str, start: int, count: int) -> None:
    p = Producer(cluster.config(**{"enable.idempotence": True, "linger.ms": 5}))
    for seq in range(start, start + count):
        for partition in range(PARTITIONS):
            p.produce(topic, key=f"k{seq}".encode(), value=f"{partition}:{seq}".encode(), partition=partition)
        p.poll(0)
    assert p.flush(30) == 0


def consume_and_commit(cluster: KafkaCluster, topic: str, group: str, counts: tuple[int, ...]) -> None:
    """Read exactly `counts[p]` records of each partition from the start, then commit and leave."""
    c = Consumer(cluster.config(**{"group.id": group, "enable.auto.commit": False}))
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got = dict.fromkeys(range(PARTITIONS), 0)
        deadline = time.monotonic() + 60
        while any(got[p] < counts[p] for p in got) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                continue
            if got[msg.partition()] < counts[msg.partition()]:
                got[msg.partition()] += 1
                if got[msg.partition()] == counts[msg.partition()]:
                    c.pause([TopicPartition(topic, msg.partition())])
        assert got == dict(enumerate(counts))
        c.commit(
            offsets=[TopicPartition(topic, p, counts[p]) for p in range(PARTITIONS) if counts[p]], asynchronous=False
        )
    finally:
        c.close()


def resume_on(cluster: KafkaCluster, topic: str, group: str) -> dict[int, list[int]]:
    """What the group reads on `cluster` from its committed offsets to the end (sequence numbers), then commits."""
    c = Consumer(cluster.config(**{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
    out: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    try:
        committed = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        starts = {tp.partition: tp.offset for tp in committed}
        c.assign([TopicPartition(topic, p, o if o >= 0 else OFFSET_BEGINNING) for p, o in starts.items()])
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
        done = {p for p in range(PARTITIONS) if starts[p] >= ends[p]}
        deadline = time.monotonic() + 60
        while len(done) < PARTITIONS and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                continue
            partition, seq = (int(x) for x in msg.value().decode().split(":"))
            assert partition == msg.partition()
            out[partition].append(seq)
            if msg.offset() >= ends[partition] - 1:
                done.add(partition)
        assert len(done) == PARTITIONS, f"did not reach the end: {done}"
        c.commit(offsets=[TopicPartition(topic, p, ends[p]) for p in range(PARTITIONS)], asynchronous=False)
        return out
    finally:
        c.close()


def group_offsets(cluster: KafkaCluster, group: str, topic: str) -> dict[int, int]:
    c = Consumer(cluster.config(**{"group.id": group}))
    try:
        return {
            tp.partition: tp.offset
            for tp in c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        }
    finally:
        c.close()


def wait_for(what: str, check: Callable[[], Any], timeout: float = 180.0) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def read_checkpoint_records(cluster: KafkaCluster, topic: str) -> list[tuple[bytes, bytes]]:
    c = Consumer(cluster.config(**{"group.id": f"cp-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}))
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.key(), msg.value()))
            if msg.offset() >= high - 1:
                break
        return out
    finally:
        c.close()


def mm2_checkpoint(key: bytes, value: bytes) -> tuple[str, str, int, int, int, str]:
    """Decode with MM2's Checkpoint.KEY_SCHEMA / HEADER_SCHEMA + VALUE_SCHEMA_V0, independently of kmirror's code."""

    def string(buf: bytes, at: int) -> tuple[str, int]:
        (n,) = struct.unpack_from(">h", buf, at)
        return buf[at + 2 : at + 2 + n].decode(), at + 2 + n

    group, at = string(key, 0)
    topic, at = string(key, at)
    (partition,) = struct.unpack_from(">i", key, at)
    assert at + 4 == len(key)
    version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    assert version == 0
    metadata, end = string(value, 18)
    assert end == len(value)
    return group, topic, partition, upstream, downstream, metadata


def test_migration_with_identity_naming_none_skipped_and_duplicates_bounded(env: Env) -> None:
    admin = AdminClient(env.source.config())
    admin.create_topics([NewTopic(env.topic, PARTITIONS, 1)])[env.topic].result(30)
    produce(env.source, env.topic, 0, FIRST)
    for name, counts in STOP_AT.items():
        consume_and_commit(env.source, env.topic, env.groups[name], counts)

    created = env.kmirror(
        "apply", "-f", str(env.spec), "--auto-approve", "--target", "topic/", "--target", "internal_topic/"
    )
    assert created.returncode == 0, created.stdout + created.stderr

    runner: LocalRunner = env.runner  # type: ignore[attr-defined]
    runner.deploy(env.flow, EffectiveSpec.of(env.state, env.flow), env.state.flow_digest(env.flow))
    produce(env.source, env.topic, FIRST, MORE)  # producers keep writing while the job copies
    # producers stopped: wait for lag 0 and every group translated
    ready = wait_for("cutover readiness", lambda: (r := readiness(env.state, env.flow)).ready and r)
    assert set(ready.groups) == set(env.groups.values()), ready.to_json()

    plan = json.loads(env.kmirror("plan", "-f", str(env.spec), "--format", "json").stdout)
    offsets = {c["address"]: c for c in plan["changes"] if c["kind"] == "group_offsets"}
    assert set(offsets) == {f"group_offsets/{env.dst}/{g}" for g in env.groups.values()}, plan
    for name, group in env.groups.items():
        change = offsets[f"group_offsets/{env.dst}/{group}"]
        assert change["action"] == "create"
        rows = {r["partition"]: r for r in change["after"]["partitions"]}
        for p, n in enumerate(STOP_AT[name]):
            if n == 0:
                assert p not in rows  # nothing committed there
                continue
            assert rows[p]["topic"] == env.topic and rows[p]["source_offset"] == n and rows[p]["current_offset"] is None
            assert n - LAG_MAX <= rows[p]["conservative_offset"] <= n  # MM2's rule: at or before n
            assert (rows[p]["translation"], rows[p]["target_offset"]) == ("exact", n), rows[p]  # identity, no gaps
        assert change["after"]["translation"] == "exact"

    app, batch = env.groups["app"], env.groups["batch"]
    applied = env.kmirror("apply", "-f", str(env.spec), "--auto-approve", "--target", f"group_offsets/{env.dst}/{app}")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert group_offsets(env.target, app, env.topic) == {
        p: offsets[f"group_offsets/{env.dst}/{app}"]["after"]["partitions"][p]["target_offset"]
        for p in range(PARTITIONS)
    }

    dry = env.kmirror("cutover", "-f", str(env.spec), "--flow", env.flow, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "dry run" in dry.stdout and f"group_offsets/{env.dst}/{batch}" in dry.stdout
    assert all(o < 0 for o in group_offsets(env.target, batch, env.topic).values())  # nothing written
    cut = env.kmirror("cutover", "-f", str(env.spec), "--flow", env.flow, "--timeout", "120")
    assert cut.returncode == 0, cut.stdout + cut.stderr
    assert f"group_offsets/{env.dst}/{batch}:" in cut.stdout
    # the apply wrote the exact offsets of app already: the cutover writes batch's, exact too
    rows = [line for line in cut.stdout.splitlines() if "-> target" in line]
    assert f"group_offsets/{env.dst}/{app}:" not in cut.stdout
    assert rows and all(r.endswith(" exact") or " exact (MM2's rule: " in r for r in rows), cut.stdout
    assert "topic names: unchanged" in cut.stdout

    # the same group ids on the target read the rest: none skipped, few twice
    total = FIRST + MORE
    duplicates: dict[str, dict[int, int]] = {}
    for name, group in env.groups.items():
        read = resume_on(env.target, env.topic, group)
        duplicates[name] = {}
        for p, n in enumerate(STOP_AT[name]):
            seqs = read[p]
            assert seqs == list(range(seqs[0] if seqs else total, total)), f"{group}/{p}: gaps or disorder"
            resumed_at = seqs[0] if seqs else total
            assert resumed_at <= n, f"{group}/{p}: skipped {resumed_at - n} record(s)"
            duplicates[name][p] = n - resumed_at
            assert resumed_at == n, f"{group}/{p}: {n - resumed_at} record(s) read twice after an exact cutover"
    print(f"\nduplicates per partition after the exact cutover: {duplicates}")

    # never backwards: the target groups are at the end now; a sync cycle leaves them there
    before = {g: group_offsets(env.target, g, env.topic) for g in env.groups.values()}
    report = checkpoint_once(
        env.state.flow(env.flow),
        env.state.client_config(env.src),
        env.state.client_config(env.dst),
        sync_group_offsets=True,
    )
    assert report.synced_groups == 0 and report.groups == 2
    assert {g: group_offsets(env.target, g, env.topic) for g in env.groups.values()} == before
    again = json.loads(env.kmirror("plan", "-f", str(env.spec), "--format", "json").stdout)
    assert not [c for c in again["changes"] if c["kind"] == "group_offsets"]

    # checkpoints decode with MM2's schema and match the plan's conservative translation (MM2's rule)
    records = read_checkpoint_records(env.target, f"{env.src}.checkpoints.internal")
    decoded = [mm2_checkpoint(k, v) for k, v in records]
    latest = {(g, t, p): (up, down) for g, t, p, up, down, _ in decoded}
    for name, group in env.groups.items():
        for p, n in enumerate(STOP_AT[name]):
            if n:
                row = offsets[f"group_offsets/{env.dst}/{group}"]["after"]["partitions"]
                want = next(r["conservative_offset"] for r in row if r["partition"] == p)
                assert latest[(group, env.topic, p)] == (n, want)
