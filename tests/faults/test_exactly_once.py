"""Exactly-once delivery under faults: while records flow, the job's driver is killed (kill -9) and started again by
`kmirror apply`, then a target broker is killed and started again (three brokers, RF 3, min.insync.replicas 2).

With `replication.delivery: exactly_once` (offset-syncs on the target, in the same transactions) a
`read_committed` consumer of the target must count every acknowledged source record exactly once, in order per
partition; the flow's `kmirror-eos.*` group must end at the source's end offsets, and every offset-sync on the
target must pair the same record (the source's at its upstream offset, the target's at its downstream offset).
The same sequence with `at_least_once` counts the duplicates, for the note (not asserted). One deployment per mode,
faults in sequence.

Zombies, not only deaths: the job's processes paused (SIGSTOP) for longer than the transaction timeout and resumed
(the broker aborts the open transactions under the running tasks: their commits fail, the tasks must fail with
them and re-send, never carry on past the aborted records), then a target broker paused mid-commit and resumed.
This runs on the first test's exactly-once job (after its driver kill and broker bounce), on a topic of its own that
the job has copied since its deploy: one deploy and one graceful stop for both.

Executors frozen and killed need executor JVMs of their own: the last test deploys the exactly-once flow on a
Spark standalone cluster (a master and a worker started for it) with two executors, freezes one past the
transaction timeout and resumes it (a zombie), then kills the other (kill -9: the worker starts another; Spark
retries the tasks there) while records flow, and counts the same way: one deploy for both faults.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from reconciler.core.mm2.wire import OffsetSync
from reconciler.core.policy.filters import eos_group
from reconciler.devenv import spark_standalone
from reconciler.jobcontract.layout import CheckpointRoot, local_state_keys
from reconciler.runners import LocalRunner
from reconciler.spec.loader import load
from tests.faults.conftest import (
    FaultCluster,
    FaultWorld,
    Load,
    bounce,
    create_topic,
    high_watermark,
    read_values,
    report,
    wait_copied,
    wait_until,
)

pytestmark = [pytest.mark.faults, pytest.mark.integration]

PARTITIONS = 3
RATE = 10_000
#: The frozen jobs' and executors' transaction timeout: 15 s (kmirror's default is 30 s), so a pause past it and past
#: the broker's check for expired transactions (transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s by
#: default) is 28 s, not 40 s. What those tests prove holds for any timeout: the broker aborts the open transactions.
TRANSACTION_TIMEOUT_MS = 15_000
PAST_THE_TIMEOUT_S = TRANSACTION_TIMEOUT_MS / 1000 + 10 + 3


def _spec(world: FaultWorld, delivery: str, timeout_ms: int | None = None) -> str:
    """The flow with `delivery`, its offset-syncs on the target; `timeout_ms`: its producers' transaction timeout."""
    path = world.spec()
    text = path.read_text()
    text = text.replace(
        "offsets: {checkpoint_interval: 1h}", "offsets: {checkpoint_interval: 1h, syncs_location: target}"
    )
    producer = f', producer: {{transaction.timeout.ms: "{timeout_ms}"}}' if timeout_ms else ""
    text = text.replace(
        "sync: {acls: false}", f"sync: {{acls: false}}\n    replication: {{delivery: {delivery}{producer}}}"
    )
    assert f"delivery: {delivery}" in text and "syncs_location: target" in text
    path.write_text(text)
    return str(path)


def _runner(world: FaultWorld, loaded: Any) -> LocalRunner:
    """The runner of the applied job's folder, `<state topic>@<state cluster id>` (one state on this host)."""
    (key,) = local_state_keys(loaded.state.topic)
    return LocalRunner(world.tmp, loaded.spark, state_topic=loaded.state.topic, state_key=key)


def _apply(world: FaultWorld, spec: str) -> None:
    world.kmirror("apply", "-f", spec, "--auto-approve", check=True)


def _kill_driver(world: FaultWorld, spec: str) -> None:
    loaded = load(spec).state
    runner = _runner(world, loaded)
    job = runner.job(world.flow)
    assert job is not None and job.pid is not None and job.running
    os.killpg(job.pid, signal.SIGKILL)
    wait_until("the killed job to be seen stopped", lambda: not runner.status().jobs[world.flow].running, 60)


def _in_order(values: dict[int, list[int]]) -> bool:
    return all(v == sorted(v) for v in values.values())


def _copied(world: FaultWorld, remote: str) -> int:
    return sum(len(v) for v in read_values(world.target, remote).values())


def _run(world: FaultWorld, delivery: str, timeout_ms: int | None = None) -> dict[str, Any]:
    """The fault sequence on one deployment (its topic `<prefix>eos` created by the caller); the figures."""
    topic = f"{world.prefix}eos"
    remote = world.remote(topic)
    spec = _spec(world, delivery, timeout_ms)
    faults: dict[str, Any] = {}
    started = time.monotonic()
    _apply(world, spec)  # returns once the job runs: the load starts on a job that keeps up, not on a backlog
    faults["deploy_s"] = round(time.monotonic() - started, 1)
    with Load(world.source, topic, PARTITIONS, rate=RATE) as load:
        began = time.monotonic()
        wait_until(f"records on {remote}", lambda: sum(len(v) for v in read_values(world.target, remote).values()), 180)
        time.sleep(3)
        _kill_driver(world, spec)
        started = time.monotonic()
        _apply(world, spec)  # plans a restart of the job that is not running; records keep coming meanwhile
        faults["driver_restart_s"] = round(time.monotonic() - started, 1)
        time.sleep(3)
        faults["target_broker_back_in_sync_s"] = round(bounce(world.target, 2, kill=True), 1)
        time.sleep(2)
        load.stop()
        seconds = time.monotonic() - began
    result, recovery = wait_copied(load, world.target, remote, 300)
    values = read_values(world.target, remote)
    return {
        "delivery": delivery,
        "records": result.records,
        "lost": result.lost,
        "lost_examples": result.lost_examples,
        "duplicates": result.duplicates,
        "in_order": _in_order(values),
        "load_records_per_s": round(load.acknowledged / seconds),
        "load_target_per_s": RATE,
        "caught_up_after_load_s": round(recovery, 1),
        "producer_failures": load.failed,
        "remote": remote,
        **faults,
    }


def _group_offsets(world: FaultWorld, remote: str) -> dict[int, int]:
    admin = AdminClient(world.target.config())
    request = ConsumerGroupTopicPartitions(
        eos_group(world.state_topic, world.flow), [TopicPartition(remote, p) for p in range(PARTITIONS)]
    )
    (future,) = admin.list_consumer_group_offsets([request], require_stable=True).values()
    return {tp.partition: tp.offset for tp in future.result(timeout=30).topic_partitions}


def _by_offset(cluster: FaultCluster, topic: str) -> dict[int, dict[int, bytes | None]]:
    """partition -> {offset: value} of every record of `topic`, read_committed."""
    consumer = Consumer(
        cluster.config(
            **{"group.id": f"eos-{uuid.uuid4().hex[:6]}", "isolation.level": "read_committed", "log_level": 0}
        )
    )
    meta = consumer.list_topics(topic, timeout=20).topics[topic]
    out: dict[int, dict[int, bytes | None]] = {p: {} for p in meta.partitions}
    try:
        for p in meta.partitions:
            end = high_watermark(consumer, TopicPartition(topic, p))
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)])
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                batch = consumer.consume(5000, timeout=1)
                for msg in batch:
                    if not msg.error():
                        out[p][msg.offset()] = msg.value()
                if consumer.position([TopicPartition(topic, p)])[0].offset >= end:
                    break
        return out
    finally:
        consumer.close()


def _syncs_disagreeing(world: FaultWorld, topic: str, remote: str) -> tuple[int, list[OffsetSync]]:
    """The target's offset-syncs (read_committed) whose downstream record is not their upstream record."""
    syncs_topic = load(world.spec()).state.flow(world.flow).policy().offset_syncs_topic(world.src)
    syncs = [OffsetSync.from_record(k, v) for k, v in _key_values(world.target, syncs_topic)]
    source, target = _by_offset(world.source, topic), _by_offset(world.target, remote)
    ours = [s for s in syncs if s.topic == topic]
    wrong = [
        s for s in ours if source[s.partition].get(s.upstream_offset) != target[s.partition].get(s.downstream_offset)
    ]
    return len(ours), wrong[:5]


def _key_values(cluster: FaultCluster, topic: str) -> list[tuple[bytes, bytes]]:
    consumer = Consumer(
        cluster.config(
            **{"group.id": f"eos-{uuid.uuid4().hex[:6]}", "isolation.level": "read_committed", "log_level": 0}
        )
    )
    try:
        end = high_watermark(consumer, TopicPartition(topic, 0))
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and consumer.position([TopicPartition(topic, 0)])[0].offset < end:
            out += [(m.key(), m.value()) for m in consumer.consume(5000, timeout=1) if not m.error()]
        return out
    finally:
        consumer.close()


def _source_ends(world: FaultWorld, topic: str) -> dict[int, int]:
    values = read_values(world.source, topic)
    return {p: len(v) for p, v in values.items()}


@pytest.fixture(scope="module")
def _eos_deployment(
    tmp_path_factory: pytest.TempPathFactory, three_brokers: tuple[FaultCluster, FaultCluster]
) -> Iterator[FaultWorld]:
    """One flow for the local exactly-once tests: their topics exist before the first apply (which creates their
    remote topics and deploys the job: the first test's), and the job they fault stays deployed from one test to
    the next (a deploy and a graceful stop less per test)."""
    w = FaultWorld(tmp_path_factory.mktemp("eos-local"), *three_brokers)
    for topic in ("eos", "paused"):
        create_topic(w.source, f"{w.prefix}{topic}", PARTITIONS)
    try:
        yield w
    finally:
        w.stop_job()


@pytest.fixture
def eos_world(request: pytest.FixtureRequest, _eos_deployment: FaultWorld) -> Iterator[FaultWorld]:
    """The shared exactly-once flow (`_eos_deployment`); its job stopped after the last selected test using it, so
    it does not run beside the other tests' jobs."""
    yield _eos_deployment
    here = request.node.path
    users = [i for i in request.session.items if i.path == here and "eos_world" in getattr(i, "fixturenames", ())]
    if users and users[-1] is request.node:
        _eos_deployment.stop_job()


@pytest.mark.timeout(600)
def test_exactly_once_copies_every_record_once_across_a_driver_kill_and_a_broker_bounce(
    eos_world: FaultWorld,
) -> None:
    world = eos_world
    figures = _run(world, "exactly_once", TRANSACTION_TIMEOUT_MS)  # the paused test's job: its timeout
    remote = figures.pop("remote")
    group = _group_offsets(world, remote)
    ends = _source_ends(world, f"{world.prefix}eos")
    syncs, wrong = _syncs_disagreeing(world, f"{world.prefix}eos", remote)
    report("exactly_once", **figures, group_offsets=group, source_ends=ends, offset_syncs=syncs)
    assert figures["lost"] == 0, f"{figures['lost']} acknowledged records missing, e.g. {figures['lost_examples']}"
    assert figures["duplicates"] == 0, f"{figures['duplicates']} records on the target twice"
    assert figures["in_order"], "records out of order within a partition"
    assert group == ends, "the flow's group does not end at the source's end offsets"
    assert syncs > 0 and not wrong, f"offset-syncs pairing different records: {wrong}"


def _pause(pgid: int, seconds: float) -> None:
    """SIGSTOP a process group for `seconds`, then SIGCONT (a stalled VM, a long GC pause, a frozen broker)."""
    os.killpg(pgid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.killpg(pgid, signal.SIGCONT)


@pytest.mark.timeout(600)
def test_exactly_once_loses_nothing_when_the_job_is_paused_past_the_transaction_timeout(
    eos_world: FaultWorld,
) -> None:
    """On the first test's job (deployed here when this test runs alone), its topic there since the deploy."""
    world = eos_world
    topic = f"{world.prefix}paused"
    remote = world.remote(topic)
    spec = _spec(world, "exactly_once", TRANSACTION_TIMEOUT_MS)
    _apply(world, spec)  # nothing to do after the first test; the deploy when run alone
    loaded = load(spec).state
    runner = _runner(world, loaded)
    with Load(world.source, topic, PARTITIONS, rate=2000) as load_:
        began = time.monotonic()
        wait_until(f"records on {remote}", lambda: sum(len(v) for v in read_values(world.target, remote).values()), 180)
        time.sleep(3)
        job = runner.job(world.flow)
        assert job is not None and job.pid is not None and job.running
        _pause(job.pid, PAST_THE_TIMEOUT_S)  # past transaction.timeout.ms: the broker aborts the open transactions
        resumed = _copied(world, remote)
        # the job copies again (its failed tasks re-sent and committed) before the broker is frozen mid-commit
        wait_until("the job to commit again after its pause", lambda: _copied(world, remote) > resumed, 120, 0.5)
        _pause(world.target.broker_pid(1), 15)  # a broker frozen mid-commit (its partitions' leader, a coordinator)
        time.sleep(5)
        load_.stop()
        seconds = time.monotonic() - began
    result, recovery = wait_copied(load_, world.target, remote, 300)
    values = read_values(world.target, remote)
    job = runner.job(world.flow)
    report(
        "exactly_once_paused",
        records=result.records,
        lost=result.lost,
        duplicates=result.duplicates,
        in_order=_in_order(values),
        load_records_per_s=round(load_.acknowledged / seconds),
        caught_up_after_load_s=round(recovery, 1),
        job_running=bool(job and job.running),
    )
    assert result.lost == 0, f"{result.lost} acknowledged records missing, e.g. {result.lost_examples}"
    assert result.duplicates == 0, f"{result.duplicates} records on the target twice"
    assert _in_order(values), "records out of order within a partition"
    assert job is not None and job.running, "the job did not survive the pause"


@pytest.mark.timeout(600)
def test_at_least_once_under_the_same_faults_counts_its_duplicates_then_switches_to_exactly_once(
    world: FaultWorld,
) -> None:
    create_topic(world.source, f"{world.prefix}eos", PARTITIONS)
    figures = _run(world, "at_least_once")
    figures.pop("remote")
    report("at_least_once_same_faults", **figures)
    assert figures["lost"] == 0, f"{figures['lost']} acknowledged records missing, e.g. {figures['lost_examples']}"

    # The running flow switched to exactly-once while records flow into a new topic: the plan row says what
    # happens, apply redeploys (a graceful stop, then the checkpoint), nothing is lost and nothing copied twice.
    topic = f"{world.prefix}switched"
    create_topic(world.source, topic, PARTITIONS)
    spec = _spec(world, "exactly_once")
    planned = world.kmirror("plan", "-f", spec, "--format", "json", check=True)
    (job,) = [c for c in json.loads(planned.stdout)["changes"] if c["address"] == f"job/{world.flow}"]
    assert job["action"] == "replace" and "delivery at_least_once -> exactly_once: the job restarts" in job["reason"]
    with Load(world.source, topic, PARTITIONS, rate=2000) as load:
        wait_until(
            f"records on {world.remote(topic)}",
            lambda: any(read_values(world.target, world.remote(topic)).values()),
            120,
        )
        _apply(world, spec)
        time.sleep(5)
    result, _ = wait_copied(load, world.target, world.remote(topic), 180)
    report("switch_to_exactly_once", records=result.records, lost=result.lost, duplicates=result.duplicates)
    assert result.lost == 0, f"{result.lost} acknowledged records missing after the switch, e.g. {result.lost_examples}"
    assert result.duplicates == 0, f"{result.duplicates} records copied twice across the switch"


# -- executors of their own: Spark standalone ---------------------------------------------------------------------
def _start_standalone(home: Path) -> spark_standalone.StandaloneCluster:
    began = time.monotonic()
    cluster = spark_standalone.start(home, cores=3, memory="3g")
    print(f"eos: standalone master and worker up in {time.monotonic() - began:.1f}s (in the background)")
    return cluster


@pytest.fixture(scope="module", autouse=True)
def standalone_start(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Future[spark_standalone.StandaloneCluster] | None]:
    """The standalone cluster of the executor tests, started in the background from the module's first test on
    (about 30 s on a loaded machine, while the tests before wait on their jobs); only when a selected test of
    this module needs it."""
    here = request.node.path
    if not any(
        item.path == here and "standalone" in getattr(item, "fixturenames", ()) for item in request.session.items
    ):
        yield None
        return
    home = tmp_path_factory.mktemp("eos-standalone")
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="eos-standalone") as pool:
        started = pool.submit(_start_standalone, home)
        try:
            yield started
        finally:
            started.exception()  # a start still under way is stopped once it is up
            spark_standalone.stop(home)


@pytest.fixture(scope="module")
def standalone(
    standalone_start: Future[spark_standalone.StandaloneCluster] | None,
) -> spark_standalone.StandaloneCluster:
    """One standalone cluster for the module's tests, one job at a time: a driver and up to two executors."""
    assert standalone_start is not None
    return standalone_start.result(timeout=300)


def _standalone_spec(world: FaultWorld, cluster: spark_standalone.StandaloneCluster, conf: str) -> str:
    path = Path(_spec(world, "exactly_once", TRANSACTION_TIMEOUT_MS))
    text = path.read_text()
    text = text.replace("deploy: local", "deploy: standalone")
    text = text.replace('master: "local[2]"', f'master: "{cluster.master_url}"\n  rest_url: "{cluster.rest_url}"')
    text = text.replace("checkpoint_root: checkpoints", f'checkpoint_root: "{world.tmp / "shared"}"')
    text = text.replace(
        'conf: {spark.kmirror.triggerInterval: "200 milliseconds"}',
        f'conf: {{spark.kmirror.triggerInterval: "200 milliseconds", spark.executor.memory: 512m, {conf}}}',
    )
    assert conf in text
    path.write_text(text)
    return str(path)


def _job_app_id(world: FaultWorld) -> str:
    """The application id of the flow's job on the standalone cluster (from its folder beside the checkpoint)."""
    shared = world.tmp / "shared"
    # the job's folder beside its checkpoint: `<state topic>@<state cluster id>/<flow>` (one state here)
    (key,) = [p.name for p in shared.iterdir() if p.is_dir() and p.name.partition("@")[0] == world.state_topic]
    status = CheckpointRoot.parse(str(shared), world.tmp).job_folder(key, world.flow)
    assert status is not None
    return wait_until("the job's app id", lambda: _app_id(status.status), 120)  # type: ignore[no-any-return]


def _app_id(status: Path) -> str | None:
    try:
        return json.loads(status.read_text()).get("app_id")  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def _executor_pids(app_id: str) -> list[int]:
    """The executor JVMs of application `app_id` on this host (by their command line)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in args and app_id.encode() in args:
            pids.append(int(proc.name))
    return pids


def _fenced_lines(home: Path, app_id: str) -> list[str]:
    """The executors' reports of a lane fenced or a commit refused (their stderr in the worker's folder)."""
    lines = []
    for stderr in (home / "work" / app_id).glob("*/stderr"):
        text = stderr.read_text(errors="replace")
        lines += [line for line in text.splitlines() if "kmirror ExactlyOnceWriter" in line and "fenced" in line]
    return lines


@pytest.mark.timeout(900)  # ~4 min with its cluster's start on the busy machine; 10 min seen under load 35
def test_exactly_once_a_zombie_executor_never_commits_again_and_a_killed_one_is_replaced(
    world: FaultWorld, standalone: spark_standalone.StandaloneCluster
) -> None:
    """Two executors, and Spark's speculation on: one executor is frozen (SIGSTOP) for 28 s, past the 15 s
    transaction timeout, with its tasks' transactions open. Then it is resumed (SIGCONT), alive, with its tasks, its
    lanes and their timers. When the other executor took its partitions meanwhile, the resumed one is a zombie: its
    commit is refused (its executor reports the lane fenced), its task fails, and later batches move partitions
    back to it onto new lanes. Whether the other executor takes them is Spark's choice (on one host, speculation
    never does: see below). Then the other executor is killed (kill -9) under the load, its tasks' transactions
    open, and replaced by the worker. Either way a read_committed reader counts every acknowledged record once, in
    order."""
    topic = f"{world.prefix}zombie"
    create_topic(world.source, topic, PARTITIONS)
    remote = world.remote(topic)
    conf = (
        "spark.cores.max: 2, spark.executor.cores: 1, spark.speculation: true, spark.speculation.interval: 1s, "
        "spark.speculation.multiplier: 3, spark.speculation.minTaskRuntime: 3s"
    )
    spec = _standalone_spec(world, standalone, conf)
    try:
        _apply(world, spec)
        with Load(world.source, topic, PARTITIONS, rate=1000) as load:
            began = time.monotonic()
            wait_until(f"records on {remote}", lambda: _copied(world, remote), 240)
            # the start's backlog copied: steady small batches, so a frozen executor's task stands out at once
            backlog = load.acknowledged
            wait_until("the job to copy the start's backlog", lambda: _copied(world, remote) >= backlog, 240, 2.0)
            app_id = _job_app_id(world)
            pids = wait_until(
                "two executor JVMs", lambda: (lambda p: p if len(p) >= 2 else None)(_executor_pids(app_id)), 120
            )
            zombie = min(pids)
            time.sleep(3)
            os.kill(zombie, signal.SIGSTOP)
            try:
                frozen_at = _copied(world, remote)
                time.sleep(
                    PAST_THE_TIMEOUT_S
                )  # past transaction.timeout.ms; the other executor may take the partitions
                during = _copied(world, remote) - frozen_at
            finally:
                os.kill(zombie, signal.SIGCONT)
            time.sleep(15)  # the zombie's timers and tasks run again
            alive = Path(f"/proc/{zombie}").exists()
            # then the other executor killed (kill -9) under the load, its tasks' transactions open: the worker
            # starts another, Spark retries the tasks, and the count below must still be every record once
            killed = max(p for p in pids if p != zombie)
            before_kill = _copied(world, remote)
            wait_until("the job to copy on before the kill", lambda: _copied(world, remote) > before_kill, 120, 0.5)
            os.kill(killed, signal.SIGKILL)
            replaced = wait_until(
                "a new executor JVM", lambda: [p for p in _executor_pids(app_id) if p not in pids], 120, 0.5
            )
            after_kill = _copied(world, remote)
            wait_until("the job to copy on after the kill", lambda: _copied(world, remote) > after_kill, 180, 0.5)
            load.stop()
            seconds = time.monotonic() - began
        result, recovery = wait_copied(load, world.target, remote, 300)
        values = read_values(world.target, remote)
        fenced = _fenced_lines(Path(standalone.home), app_id)
        report(
            "exactly_once_zombie_executor",
            records=result.records,
            lost=result.lost,
            duplicates=result.duplicates,
            in_order=_in_order(values),
            copied_while_frozen=during,
            zombie_alive_after=alive,
            executors=[*pids, *replaced],
            fenced_reports=len(fenced),
            load_records_per_s=round(load.acknowledged / seconds),
            caught_up_after_load_s=round(recovery, 1),
            seconds=round(time.monotonic() - began, 1),
        )
        # Taken over (copied on while frozen, or a writer refused) only when the frozen executor held no task of the
        # stalled batch: Spark never starts a speculative copy on the host of a task's first attempt
        # (TaskSetManager.hasAttemptOnHost) and both executors share this one host, so the takeover is not asserted
        # here (CI saw both outcomes). Two executor JVMs writing one partition, the stale one fenced and refused, are
        # tested deterministically in tests/integration/replication/test_partition_moves_jvm.py.
        print(f"frozen executor: copied on while frozen {during}, writers refused {len(fenced)}")
        assert alive, "the frozen executor did not come back: no zombie was tested"
        assert result.lost == 0, f"{result.lost} acknowledged records missing, e.g. {result.lost_examples}"
        assert result.duplicates == 0, f"{result.duplicates} records on the target twice"
        assert _in_order(values), "records out of order within a partition"
    finally:
        Path(spec).write_text(Path(spec).read_text().replace("enabled: true", "enabled: false"))
        world.kmirror("apply", "-f", spec, "--auto-approve")  # stops the driver on the standalone cluster
