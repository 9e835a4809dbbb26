"""The migration procedure with prefix naming and topics whose offsets have gaps (Kafka 3.9 source, 4.x target).

Two source topics, each with offsets that are not records:
- `compacted`: a compacted topic whose older records were overwritten and compacted away on the source before
  replication starts (small segments, dirty ratio 0.01, no compaction lag): every other offset of its first part
  is gone. The test waits until the source shows exactly those gaps.
- `tx`: written by a transactional producer, committed and aborted transactions interleaved, so every
  transaction leaves a marker offset and every aborted one a run of offsets that read_committed never returns.

Two consumer groups stop half-way on the source (one commits with a metadata string), at offsets chosen to fall
on a compacted-away offset, on a transaction marker, inside a transaction, at the end, or nowhere; kmirror apply
creates the prefixed remote topics (`<source alias>.<topic>`), the real replication job copies while producers
keep writing, then producers stop and lag reaches 0. `kmirror plan` shows the translated offsets with the
metadata; `kmirror apply --target` writes one group; `kmirror cutover` is refused while another process holds
the state lock (naming it, writing nothing), then writes the other group. The same group ids consume the
remote topics on the target: every record that survived compaction or was committed is read, none skipped,
aborted records never appear, and none is read twice: the cutover, with producers stopped, translates exactly
(`reconciler.core.offsets.exact`) and moves the group `apply` wrote with MM2's rule forward.

Why `offset_lag_max` bounds what the plan's (MM2's) translation re-reads even with gaps: it takes the latest
offset-sync s at or below the committed offset G and answers s.downstream (+ 1 when s.upstream < G). Offsets
between the last record a group read and G are not records, so no sync lies between them; the records read twice
are those copied after s up to the last one the group read, and MM2's rule emits a sync before that run reaches
`offset_lag_max` downstream records. Gaps only add syncs (MM2 emits one at every gap), they never widen the run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reconciler.app.cutover import readiness
from reconciler.jobcontract.spec import EffectiveSpec
from reconciler.kafka_clients.checkpointer import checkpoint_once
from reconciler.runners import LocalRunner
from reconciler.state.lock import StateLock
from reconciler.state.store import StateStore
from tests.conftest import KafkaCluster
from tests.integration.offsets.test_migration import (
    LAG_MAX,
    Env,
    mm2_checkpoint,
    read_checkpoint_records,
    wait_for,
    with_runner,
)

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.slow]

PARTS = 2
OLD = 60  # compacted: records per partition first written; the even-numbered ones are overwritten, then compacted
ROUNDS, ROUNDS_MORE, PER_TXN = 10, 5, 5  # tx: transactions before / while the job runs, records per partition each
# records each group reads per partition on the source before it commits (see the module docstring for where
# each lands): {group: {topic: per-partition counts}}
STOP_AT = {
    "app": {"compacted": (21, 40), "tx": (10, 12)},
    "batch": {"compacted": (0, 70), "tx": (25, 3)},
}
Records = dict[int, list[tuple[int, str]]]  # partition -> [(offset, value)] in offset order


@pytest.fixture
def env(tmp_path: Path, source: KafkaCluster, target: KafkaCluster) -> Iterator[Env]:
    # segment.* set on the source to force compaction stay there: Kafka 4.x refuses segments this small.
    # one pattern per config: a single alternation of several unbounded repeats is refused as a ReDoS risk
    exclude = "', '".join(
        [r"segment\..*", r"min\.insync\.replicas", r"message\.timestamp\..*", r".*\.replication\.throttled\..*"]
    )
    e = Env(
        tmp_path,
        source,
        target,
        naming='{policy: prefix, separator: "."}',
        sync=f", config_exclude: ['{exclude}', 'unclean\\.leader\\.election\\.enable']",
    )
    e.groups = {name: f"mig{e.tag}-{name}" for name in STOP_AT}
    with with_runner(e) as ready:
        yield ready


def read_all(cluster: KafkaCluster, topic: str, starts: dict[int, int] | None = None) -> Records:
    """Every committed record of the topic from `starts` (default: the beginning) to the end, read_committed."""
    c = Consumer(
        cluster.config(
            **{
                "group.id": f"reader-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
            }
        )
    )
    out: Records = {p: [] for p in range(PARTS)}
    try:
        begin = starts or {}
        c.assign([TopicPartition(topic, p, begin.get(p, OFFSET_BEGINNING)) for p in range(PARTS)])
        done: set[int] = set()
        deadline = time.monotonic() + 60
        while len(done) < PARTS and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    done.add(msg.partition())
                continue
            out[msg.partition()].append((msg.offset(), msg.value().decode()))
        assert len(done) == PARTS, f"{topic}: did not reach the end of {set(range(PARTS)) - done}"
        return out
    finally:
        c.close()


def ends(cluster: KafkaCluster, topic: str) -> dict[int, int]:
    c = Consumer(cluster.config(**{"group.id": "ends"}))
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTS)}
    finally:
        c.close()


def produce_compacted(cluster: KafkaCluster, topic: str, keys_and_seqs: list[tuple[str, int]]) -> None:
    p = Producer(cluster.config(**{"enable.idempotence": True, "linger.ms": 0}))
    for key, seq in keys_and_seqs:
        for partition in range(PARTS):
            p.produce(topic, key=key.encode(), value=f"{partition}:{seq}".encode(), partition=partition)
    assert p.flush(30) == 0


def produce_transactions(cluster: KafkaCluster, topic: str, first_round: int, rounds: int, seq: list[int]) -> None:
    """`rounds` transactions of PER_TXN records per partition; every third one aborted (after its records are in
    the log). Committed records carry the next sequence number of their partition (`seq`), aborted ones `x`."""
    p = Producer(cluster.config(**{"transactional.id": f"{topic}-tx", "linger.ms": 0}))
    p.init_transactions(30)
    for r in range(first_round, first_round + rounds):
        abort = r % 3 == 2
        p.begin_transaction()
        for partition in range(PARTS):
            for j in range(PER_TXN):
                value = f"{partition}:x{r}.{j}" if abort else f"{partition}:{seq[partition] + j}"
                p.produce(topic, key=f"k{r}.{j}".encode(), value=value.encode(), partition=partition)
            if not abort:
                seq[partition] += PER_TXN
        assert p.flush(30) == 0
        if abort:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)


def consume_and_commit(
    cluster: KafkaCluster, topic: str, group: str, counts: tuple[int, ...], metadata: str | None
) -> dict[int, int]:
    """Read `counts[p]` records of each partition from the start (read_committed) and commit the offset after the
    last one, as a consumer does; returns the committed offsets."""
    c = Consumer(cluster.config(**{"group.id": group, "enable.auto.commit": False}))
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTS)])
        got, last = dict.fromkeys(range(PARTS), 0), dict.fromkeys(range(PARTS), -1)
        deadline = time.monotonic() + 60
        while any(got[p] < counts[p] for p in got) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error() or got[msg.partition()] >= counts[msg.partition()]:
                continue
            got[msg.partition()] += 1
            last[msg.partition()] = msg.offset()
            if got[msg.partition()] == counts[msg.partition()]:
                c.pause([TopicPartition(topic, msg.partition())])
        assert got == dict(enumerate(counts)), f"{group} on {topic}: read {got}"
        committed = {p: last[p] + 1 for p in range(PARTS) if counts[p]}
        c.commit(
            offsets=[
                TopicPartition(topic, p, o, f"{metadata}:{topic}:{p}") if metadata else TopicPartition(topic, p, o)
                for p, o in committed.items()
            ],
            asynchronous=False,
        )
        return committed
    finally:
        c.close()


def committed_on(cluster: KafkaCluster, group: str, topic: str) -> dict[int, tuple[int, str]]:
    c = Consumer(cluster.config(**{"group.id": group}))
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTS)], timeout=20)
        return {tp.partition: (tp.offset, tp.metadata or "") for tp in tps}
    finally:
        c.close()


def test_migration_with_prefix_naming_and_gaps_none_skipped_and_duplicates_bounded(env: Env) -> None:
    t0 = time.monotonic()
    topics = {name: f"mig{env.tag}.{name}" for name in ("compacted", "tx")}
    compacted, tx = topics["compacted"], topics["tx"]
    admin = AdminClient(env.source.config())
    compaction = {
        "cleanup.policy": "compact",
        "segment.bytes": "1024",  # Kafka 3.9 allows down to 14 bytes
        "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0",
    }
    futures = admin.create_topics([NewTopic(compacted, PARTS, 1, config=compaction), NewTopic(tx, PARTS, 1)])
    for f in futures.values():
        f.result(30)

    # compacted: OLD records, then the even-numbered keys again, then unique keys; wait for the cleaner
    produce_compacted(env.source, compacted, [(f"r{i}" if i % 2 == 0 else f"u{i}", i) for i in range(OLD)])
    produce_compacted(env.source, compacted, [(f"r{i}", OLD + i // 2) for i in range(0, OLD, 2)])
    time.sleep(0.2)  # past segment.ms: the next appends roll segments, so the overwrites become cleanable
    produce_compacted(env.source, compacted, [(f"f{s}", s) for s in range(OLD + OLD // 2, OLD + OLD // 2 + 10)])
    time.sleep(0.2)
    produce_compacted(env.source, compacted, [(f"f{s}", s) for s in range(OLD + OLD // 2 + 10, 2 * OLD)])
    survivors = OLD // 2 + OLD // 2 + OLD // 2  # odd old ones, the overwrites, the unique ones

    def compacted_away() -> Records | None:
        got = read_all(env.source, compacted)
        return got if all(len(got[p]) == survivors for p in range(PARTS)) else None

    before = wait_for("compaction on the source", compacted_away, timeout=90)
    for p in range(PARTS):  # the gaps are really there: every even offset below OLD is gone
        offsets = [o for o, _ in before[p]]
        assert offsets[: OLD // 2] == list(range(1, OLD, 2)), offsets
        assert [v for _, v in before[p]][:3] == [f"{p}:1", f"{p}:3", f"{p}:5"]

    seq = [0] * PARTS
    produce_transactions(env.source, tx, 0, ROUNDS, seq)
    tx_before = read_all(env.source, tx)
    assert tx_before[0][-1][0] < ends(env.source, tx)[0] - 1  # markers and aborted records: gaps
    t_setup = time.monotonic() - t0

    committed: dict[str, dict[str, dict[int, int]]] = {}  # group name -> source topic -> partition -> offset
    for name, per_topic in STOP_AT.items():
        committed[name] = {
            topics[t]: consume_and_commit(
                env.source, topics[t], env.groups[name], counts, "app" if name == "app" else None
            )
            for t, counts in per_topic.items()
        }
    # where the stops landed: on a compacted-away offset, a transaction marker, a record inside a transaction
    assert committed["app"][compacted][0] == 42 and 42 not in {o for o, _ in before[0]}
    assert committed["app"][tx][0] == 11 and 11 not in {o for o, _ in tx_before[0]}  # the marker of round 1
    assert committed["app"][tx][1] == 20 and 20 in {o for o, _ in tx_before[1]}
    assert committed["batch"][tx][0] == 41 and 41 not in {o for o, _ in tx_before[0]}  # the marker of round 6

    created = env.kmirror(
        "apply", "-f", str(env.spec), "--auto-approve", "--target", "topic/", "--target", "internal_topic/"
    )
    assert created.returncode == 0, created.stdout + created.stderr
    remote = {t: env.remote(t) for t in topics.values()}
    assert remote == {t: f"{env.src}.{t}" for t in topics.values()}

    runner: LocalRunner = env.runner  # type: ignore[attr-defined]
    t1 = time.monotonic()
    runner.deploy(env.flow, EffectiveSpec.of(env.state, env.flow), env.state.flow_digest(env.flow))
    # producers keep writing while the job copies: unique compacted keys, more transactions
    produce_compacted(env.source, compacted, [(f"f{s}", s) for s in range(2 * OLD, 2 * OLD + 20)])
    produce_transactions(env.source, tx, ROUNDS, ROUNDS_MORE, seq)
    # producers stopped: wait for lag 0 and every group translated
    ready = wait_for("cutover readiness", lambda: (r := readiness(env.state, env.flow)).ready and r)
    t_catchup = time.monotonic() - t1
    assert set(ready.groups) == set(env.groups.values()), ready.to_json()

    # what the source holds and what the job copied: the same records, in order, aborted ones left out
    src = {t: read_all(env.source, t) for t in topics.values()}
    dst = {t: read_all(env.target, remote[t]) for t in topics.values()}
    for t in topics.values():
        for p in range(PARTS):
            want, got = [v for _, v in src[t][p]], [v for _, v in dst[t][p]]
            assert got == want, f"{remote[t]}/{p} on the target differs from {t}/{p} on the source"
            assert not any(":x" in v for v in got)

    def ideal(t: str, p: int, g: int) -> int:
        """The exact target offset for source offset g: that of the first surviving record at or after g."""
        index = next((i for i, (o, _) in enumerate(src[t][p]) if o >= g), len(src[t][p]))
        return dst[t][p][index][0] if index < len(dst[t][p]) else ends(env.target, remote[t])[p]

    plan = json.loads(env.kmirror("plan", "-f", str(env.spec), "--format", "json").stdout)
    offsets = {c["address"]: c for c in plan["changes"] if c["kind"] == "group_offsets"}
    assert set(offsets) == {f"group_offsets/{env.dst}/{g}" for g in env.groups.values()}, plan
    planned: dict[tuple[str, str, int], int] = {}
    #: MM2's answer for each row: what the job's checkpointer writes (checkpoints, its own group sync cycles),
    #: while plan and apply write the exact offset where the records prove it.
    conservative: dict[tuple[str, str, int], int] = {}
    for name, group in env.groups.items():
        change = offsets[f"group_offsets/{env.dst}/{group}"]
        rows = {(r["source_topic"], r["partition"]): r for r in change["after"]["partitions"]}
        for t, per_partition in committed[name].items():
            for p, g in per_partition.items():
                row = rows.pop((t, p))
                assert row["topic"] == remote[t] and row["source_offset"] == g and row["current_offset"] is None
                exact = ideal(t, p, g)
                assert exact - LAG_MAX <= row["target_offset"] <= exact, (group, t, p, g, row, exact)
                # exactly the committed bytes: confluent-kafka, which committed it, sends a NUL after the string
                assert row.get("metadata") == (f"app:{t}:{p}\x00" if name == "app" else None)
                planned[(group, t, p)] = row["target_offset"]
                conservative[(group, t, p)] = row.get("conservative_offset", row["target_offset"])
        assert not rows, f"{group}: rows for partitions it never committed: {rows}"

    app, batch = env.groups["app"], env.groups["batch"]
    applied = env.kmirror("apply", "-f", str(env.spec), "--auto-approve", "--target", f"group_offsets/{env.dst}/{app}")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    for t, per_partition in committed["app"].items():  # the apply path writes the offsets with their metadata
        on_target = committed_on(env.target, app, remote[t])
        assert {p: on_target[p] for p in per_partition} == {
            p: (planned[(app, t, p)], f"app:{t}:{p}") for p in per_partition
        }

    # cutover while another process holds the state lock: refused, naming the holder, nothing written
    checkpoints_topic = f"{env.src}.checkpoints.internal"
    store = StateStore(env.dst, env.target.config(), env.state.state.topic)
    checkpoints_before = ends_of(env.target, checkpoints_topic)
    other = StateLock(store, "apply")  # as a concurrent `kmirror apply` holds it
    with other.held():
        holder_id = other.id
        for extra in ((), ("--lock-timeout", "2")):  # at once; and after waiting for lag 0, at step 3
            refused = env.kmirror("cutover", "-f", str(env.spec), "--flow", env.flow, "--timeout", "60", *extra)
            assert refused.returncode == 1, refused.stdout + refused.stderr
            assert f"lock {holder_id} held by" in refused.stderr and "for apply" in refused.stderr, refused.stderr
            assert "nothing was written" in refused.stderr
            assert "3. Final checkpoint" not in refused.stdout
    assert all(o < 0 for o, _ in committed_on(env.target, batch, remote[tx]).values())
    assert ends_of(env.target, checkpoints_topic) == checkpoints_before

    cut = env.kmirror("cutover", "-f", str(env.spec), "--flow", env.flow, "--timeout", "120")
    assert cut.returncode == 0, cut.stdout + cut.stderr
    assert "state lock" in cut.stdout
    assert f"group_offsets/{env.dst}/{batch}:" in cut.stdout
    # the apply wrote MM2's conservative offsets for app; the cutover moves them forward to the exact ones
    rows = [line for line in cut.stdout.splitlines() if "-> target" in line]
    assert rows and all(r.endswith(" exact") or " exact (MM2's rule: " in r for r in rows), cut.stdout
    for t in topics.values():
        assert f"topic {t} -> subscribe to {remote[t]} on {env.dst}" in cut.stdout

    # the same group ids read the remote topics on the target: none skipped, few twice, no aborted record
    duplicates: dict[str, dict[str, dict[int, int]]] = {}
    for name, group in env.groups.items():
        duplicates[name] = {}
        for t in topics.values():
            remote_t = remote[t]
            starts = {p: o for p, (o, _) in committed_on(env.target, group, remote_t).items() if o >= 0}
            read = read_all(env.target, remote_t, starts)
            c = Consumer(env.target.config(**{"group.id": group, "enable.auto.commit": False}))
            try:  # the group is at the end now, for the never-backwards check below
                end = ends(env.target, remote_t)
                c.commit(offsets=[TopicPartition(remote_t, p, end[p]) for p in range(PARTS)], asynchronous=False)
            finally:
                c.close()
            duplicates[name][t.split(".")[-1]] = {}
            for p in range(PARTS):
                g = committed[name][t].get(p, 0)
                values = [v for _, v in read[p]]
                source_values = [v for _, v in src[t][p]]
                first_new = next((i for i, (o, _) in enumerate(src[t][p]) if o >= g), len(src[t][p]))
                resumed = len(source_values) - len(values)
                assert values == source_values[resumed:], f"{group} {remote_t}/{p}: gaps, disorder or strangers"
                assert resumed <= first_new, f"{group} {remote_t}/{p}: skipped {resumed - first_new} record(s)"
                duplicates[name][t.split(".")[-1]][p] = first_new - resumed
                assert resumed == first_new, f"{group} {remote_t}/{p}: {first_new - resumed} read twice (exact cutover)"
    metadata_on_target = committed_on(env.target, batch, remote[tx])
    assert all(m == "" for _, m in metadata_on_target.values())  # batch committed none; none invented

    # never backwards: the groups are at the end on the target; a sync cycle leaves them there. A group that
    # commits on the source only now (with metadata) is written by that cycle, metadata included: the
    # checkpointer's own sync path, which the job's driver runs every checkpoint_interval.
    before_sync = {(g, t): committed_on(env.target, g, remote[t]) for g in env.groups.values() for t in topics.values()}
    late = f"mig{env.tag}-late"
    c = Consumer(env.source.config(**{"group.id": late, "enable.auto.commit": False}))
    c.commit(
        offsets=[TopicPartition(tx, p, o, f"late:{p}") for p, o in committed["app"][tx].items()], asynchronous=False
    )
    c.close()
    report = checkpoint_once(
        env.state.flow(env.flow),
        env.state.client_config(env.src),
        env.state.client_config(env.dst),
        sync_group_offsets=True,
    )
    assert report.synced_groups == 1 and report.groups == 3, report
    assert {(g, t): committed_on(env.target, g, remote[t]) for g, t in before_sync} == before_sync
    assert committed_on(env.target, late, remote[tx]) == {
        p: (conservative[(app, tx, p)], f"late:{p}") for p in committed["app"][tx]
    }
    again = json.loads(env.kmirror("plan", "-f", str(env.spec), "--format", "json").stdout)
    # The sync cycle wrote MM2's answer; the plan, which reads the records, moves the late group on to the exact
    # offsets where they differ, and changes nothing else.
    moves = {c["address"]: c for c in again["changes"] if c["kind"] == "group_offsets"}
    behind = {p for p in committed["app"][tx] if conservative[(app, tx, p)] != planned[(app, tx, p)]}
    assert set(moves) == ({f"group_offsets/{env.dst}/{late}"} if behind else set()), moves
    for change in moves.values():
        rows = {r["partition"]: r["target_offset"] for r in change["after"]["partitions"]}
        assert rows == {p: planned[(app, tx, p)] for p in behind}, rows

    # checkpoints decode with MM2's Checkpoint schema, carry the source metadata, and match the plan
    decoded = [mm2_checkpoint(k, v) for k, v in read_checkpoint_records(env.target, checkpoints_topic)]
    latest = {(g, topic, p): (up, down, meta) for g, topic, p, up, down, meta in decoded}
    for name, group in env.groups.items():
        for t, per_partition in committed[name].items():
            for p, g in per_partition.items():
                meta = f"app:{t}:{p}\x00" if name == "app" else ""  # as committed (confluent-kafka: with a NUL)
                assert latest[(group, remote[t], p)] == (g, conservative[(group, t, p)], meta)
    print(
        f"\nduplicates per partition after the exact cutover: {duplicates}"
        f"\nsetup with compaction {t_setup:.1f}s, job deploy to lag 0 {t_catchup:.1f}s, "
        f"whole test {time.monotonic() - t0:.1f}s"
    )


def ends_of(cluster: KafkaCluster, topic: str) -> int:
    c = Consumer(cluster.config(**{"group.id": "ends"}))
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()
