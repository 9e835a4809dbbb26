"""At-least-once after expired batches: every record the source acknowledged reaches the target.

One application hosting one at-least-once flow in real-time mode, with a short producer delivery timeout (8 s).
Records are produced throughout with acknowledgement tracking. Twice, the flow's remote topic refuses every batch
(`max.message.bytes` 1): the flow's producer retries until its batches expire (`TimeoutException: Expiring N
record(s)`), the query fails and the driver restarts it from its checkpoint. Then the fault is cleared and every
acknowledged record is looked up on the target: none may be missing (duplicates are allowed for at-least-once,
counted and printed as an `ALO {...}` line).

This reproduces the open finding of 2026-11-28 (docs/applications.md): a's records acknowledged before an expiry
missing on the target after the in-driver restart.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.devenv import kafka_local
from reconciler.jobcontract.job_report import read_report
from reconciler.jobcontract.layout import local_state_keys
from reconciler.runners import LocalRunner
from reconciler.spec.loader import load_text
from tests.conftest import KafkaCluster
from tests.integration.replication.conftest import create_topic, read_partition, wait_for
from tests.integration.replication.test_application_exactly_once import AckedProducer, _refuse
from tests.integration.replication.test_applications import kmirror

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXPIRIES = 2  # query failures forced by expired batches, per fault
FROZEN_SECONDS = 12.0  # past the delivery timeout (8 s)


def _write(folder: Path, source: KafkaCluster, target: KafkaCluster, tag: str) -> Path:
    path = folder / "kmirror.yaml"
    path.write_text(f"""
version: 1
clusters:
  src{tag}: {{bootstrap_servers: "{source.bootstrap_servers}"}}
  dst{tag}: {{bootstrap_servers: "{target.bootstrap_servers}"}}
state: {{cluster: dst{tag}, topic: "_kmirror.state.alo-{tag}"}}
spark:
  deploy: local
  application: alo
  checkpoint_root: checkpoints
  conf: {{spark.kmirror.triggerInterval: "5 seconds", spark.kmirror.realtimeTasks: "1", spark.driver.memory: 768m,
          spark.kmirror.restartBackoffMaxMs: "2000"}}
flows:
  - name: a
    source: src{tag}
    target: dst{tag}
    topics: {{include: ["alo{tag}\\\\..*"]}}
    replication: {{producer: {{delivery.timeout.ms: "8000", request.timeout.ms: "5000"}}}}
    sync: {{acls: false, group_offsets: false}}
    heartbeats: {{enabled: false}}
""")
    return path


@dataclass
class World:
    folder: Path
    source: KafkaCluster
    target: KafkaCluster
    remote: str
    producer: AckedProducer
    runner: LocalRunner

    def status(self) -> dict[str, object]:
        job = self.runner.job("a")
        assert job is not None, "no job of flow a"
        return dict(read_report(job.folder / "status.json"))


def _tear_down(folder: Path) -> None:
    spec = folder / "kmirror.yaml"
    desired = load_text(spec.read_text()).state.with_source_path(spec)
    for key in local_state_keys(desired.state.topic):
        runner = LocalRunner(folder, desired.spark, state_topic=desired.state.topic, state_key=key, stop_timeout=60)
        with contextlib.suppress(Exception):
            runner.stop("a")
        process = runner.apps.process(runner.apps.folder("alo"))
        if process.running and process.pid is not None:
            os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def world(source: KafkaCluster, target: KafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tag = uuid.uuid4().hex[:6]
    folder = tmp_path_factory.mktemp("alo-expiry")
    topic = f"alo{tag}.one"
    create_topic(source, topic, 2)
    spec = _write(folder, source, target, tag)
    desired = load_text(spec.read_text()).state
    remote = desired.flow("a").remote_topic(topic)
    state_topic = f"_kmirror.state.alo-{tag}"
    with contextlib.ExitStack() as stack:
        stack.callback(_tear_down, folder)
        producer = AckedProducer(source, topic, 2, per_round=10)
        stack.enter_context(producer)
        applied = kmirror("apply", "-f", str(spec), "--auto-approve", cwd=folder)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        (key,) = local_state_keys(state_topic)
        runner = LocalRunner(folder, desired.spark, state_topic=state_topic, state_key=key)
        yield World(folder, source, target, remote, producer, runner)


def _copies(world: World) -> Counter[int]:
    got: Counter[int] = Counter()
    for p in world.producer.acked:
        got.update(int(r.value or b"-1") for r in read_partition(world.target, world.remote, p))
    return got


def _expire_twice(world: World, fault: Callable[[bool], None], what: str) -> None:
    """Twice: `fault(True)` until a's query failed on expired batches, `fault(False)`, until it runs again."""
    base = int(world.status().get("restarts") or 0)  # type: ignore[call-overload]
    for n in range(base + 1, base + EXPIRIES + 1):
        failed: object = False
        for _ in range(3):  # a fault may end before any batch expired (none in flight): applied again
            fault(True)
            try:
                # restarting, or already restarted: a frozen target's failure can be over when the freeze ends
                failed = _within(
                    f"a's query failing on expired batches ({what}, {n})",
                    lambda n=n: (
                        str(r.get("error"))[:300]
                        if (r := world.status()).get("state") == "restarting" or (r.get("restarts") or 0) >= n
                        else False
                    ),
                    timeout=60,
                )
            finally:
                fault(False)
            if failed:
                break
        assert failed, f"a's query never failed on expired batches ({what}, {n}) after 3 faults"
        print(f"{what}, expiry {n}: {failed}")
        wait_for(
            f"a's query restarted ({what}, {n})",
            lambda n=n: (r := world.status()).get("state") == "running" and (r.get("restarts") or 0) >= n,  # type: ignore[misc]
            timeout=120,
        )
        time.sleep(3)  # records copied between the faults


def _within(what: str, check: Callable[[], object], timeout: float) -> object:
    """`wait_for`, but False when it timed out."""
    try:
        return wait_for(what, check, timeout=timeout)
    except AssertionError:
        return False


def _every_acknowledged_record_arrives(world: World, what: str, started: float) -> None:
    """Pause the source producer, then look every record the source acknowledged up on the target (none lost;
    duplicates counted and printed)."""
    a = world.producer
    a.paused.set()
    try:
        time.sleep(2)  # the last acknowledgements
        wanted = {seq for seqs in a.acked.values() for seq in list(seqs)}

        def all_there() -> Counter[int] | None:
            got = _copies(world)
            return got if wanted <= set(got) else None

        try:
            got = wait_for("every acknowledged record of a on the target", all_there, timeout=120)
        except AssertionError:
            got = _copies(world)
    finally:
        a.paused.clear()
    lost = sorted(wanted - set(got))
    duplicates = sum(n - 1 for seq, n in got.items() if seq in wanted and n > 1)
    figures = {
        "fault": what,
        "acknowledged": len(wanted),
        "lost": len(lost),
        "duplicates": duplicates,
        "restarts": world.status().get("restarts"),
        "seconds": round(time.monotonic() - started, 1),
    }
    print("ALO " + json.dumps(figures))
    assert not lost, (
        f"{what}: {len(lost)} of {len(wanted)} acknowledged records of a never reached the target, e.g. {lost[:20]}"
    )


@pytest.mark.timeout(600)
def test_no_acknowledged_record_is_lost_when_refused_batches_expire(world: World) -> None:
    """The remote topic refuses every batch (`max.message.bytes` 1): a's batches are retried until they expire."""
    wait_for("a copying", lambda: len(_copies(world)) > 100, timeout=240)
    started = time.monotonic()
    _expire_twice(world, lambda on: _refuse(world.target, world.remote, on), "refused")
    _every_acknowledged_record_arrives(world, "refused", started)


@pytest.mark.timeout(600)
def test_no_acknowledged_record_is_lost_when_batches_in_flight_expire(world: World) -> None:
    """The target broker frozen (SIGSTOP, what a long pause under load looks like to the producer): a's requests
    time out in flight (5 s) and its batches expire (8 s) although the broker may write them once it runs again."""
    record = kafka_local.read_record(world.target.home) if world.target.home is not None else None
    if record is None or record.pid is None:
        pytest.fail("the target broker is not a local one this test can freeze")
    pid = record.pid

    def freeze(on: bool) -> None:
        os.kill(pid, signal.SIGSTOP if on else signal.SIGCONT)
        if on:
            time.sleep(FROZEN_SECONDS)  # then resumed: the failure is reported through the state on the target
            os.kill(pid, signal.SIGCONT)

    wait_for("a copying", lambda: len(_copies(world)) > 100, timeout=240)
    started = time.monotonic()
    _expire_twice(world, freeze, "frozen target")
    _every_acknowledged_record_arrives(world, "frozen target", started)
