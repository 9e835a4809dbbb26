"""An exactly-once flow and an at-least-once flow in one Spark application, run for real through `kmirror apply`.

Both flows stream. A change to the at-least-once flow's topics restarts only its query: the exactly-once flow's
query is started once (its status record and the driver's log say so). A change to the application's own Spark
settings then redeploys the application once: the new driver starts each flow's query exactly once (before,
it started each on its old spec and again at its own deploy). Then the at-least-once flow's remote topic refuses
every batch: its query fails and is restarted alone after its backoff, in the same driver, while the exactly-once
flow's records keep arriving, held back at most one checkpoint interval longer than in steady state. Afterwards a
`read_committed` reader finds every record of the exactly-once flow exactly once, in order, across all of it; the
at-least-once flow lost none.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from reconciler.jobcontract.job_report import read_report
from reconciler.jobcontract.layout import local_state_keys
from reconciler.runners import LocalRunner
from reconciler.spec.loader import load_text
from tests.conftest import KafkaCluster
from tests.integration.replication.conftest import SequenceProducer, create_topic, read_partition, wait_for
from tests.integration.replication.test_applications import BASELINE_SECONDS, INTERVAL_SECONDS, Arrivals, kmirror

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FLOWS = ("e", "a")  # e: exactly-once, a: at-least-once


def write(folder: Path, source: KafkaCluster, target: KafkaCluster, tag: str, a_topics: str, backoff: str) -> Path:
    path = folder / "kmirror.yaml"
    path.write_text(f"""
version: 1
clusters:
  src{tag}: {{bootstrap_servers: "{source.bootstrap_servers}"}}
  dst{tag}: {{bootstrap_servers: "{target.bootstrap_servers}"}}
state: {{cluster: dst{tag}, topic: "_kmirror.state.apps-eos-{tag}"}}
spark:
  deploy: local
  application: fleet
  checkpoint_root: checkpoints
  conf: {{spark.kmirror.triggerInterval: "5 seconds", spark.kmirror.realtimeTasks: "1", spark.driver.memory: 768m,
          spark.kmirror.restartBackoffMaxMs: "{backoff}"}}
flows:
  - name: e
    source: src{tag}
    target: dst{tag}
    topics: {{include: ["ape{tag}\\\\..*"]}}
    replication: {{delivery: exactly_once}}
    sync: {{acls: false, group_offsets: false}}
    heartbeats: {{enabled: false}}
  - name: a
    source: src{tag}
    target: dst{tag}
    topics: {{include: ["{a_topics}"]}}
    replication: {{producer: {{delivery.timeout.ms: "8000", request.timeout.ms: "5000"}}}}
    sync: {{acls: false, group_offsets: false}}
    heartbeats: {{enabled: false}}
""")
    return path


def none_lost(producer: SequenceProducer, target: KafkaCluster, remote: str, timeout: float) -> tuple[int, int]:
    """Wait until the target holds every record produced (at least once); returns (records, duplicates). Not their
    order: a query that failed on expired batches re-sends them after later ones that went through."""

    def read() -> dict[int, list[int]] | None:
        got = {p: [int(r.value or b"-1") for r in read_partition(target, remote, p)] for p in producer.produced}
        return got if all(set(s) <= set(got[p]) for p, s in producer.produced.items()) else None

    got: dict[int, list[int]] = wait_for(f"{remote}: every record produced", read, timeout=timeout)
    return sum(len(s) for s in producer.produced.values()), sum(len(g) - len(set(g)) for g in got.values())


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    job = tmp_path / "kmirror.yaml"
    if job.is_file():  # tear down: each query stops gracefully, the last one ends the driver; a kill if not
        desired = load_text(job.read_text()).state.with_source_path(job)
        for key in local_state_keys(desired.state.topic):
            runner = LocalRunner(
                tmp_path, desired.spark, state_topic=desired.state.topic, state_key=key, stop_timeout=60
            )
            for name in FLOWS:
                with contextlib.suppress(Exception):
                    runner.stop(name)
            process = runner.apps.process(runner.apps.folder("fleet"))
            if process.running and process.pid is not None:
                os.killpg(process.pid, signal.SIGKILL)


def starts(log: Path, since: int = 0) -> Counter[str]:
    """How many times the driver(s) started each flow's query, in the application's log from byte `since`."""
    text = log.read_bytes()[since:].decode(errors="replace")
    return Counter(re.findall(r"application fleet: starting flow (\w+) with", text))


def committed_exactly_once(producer: SequenceProducer, target: KafkaCluster, remote: str, timeout: float) -> int:
    """Wait until a `read_committed` reader finds every record produced; assert none twice, none lost, in order."""
    wanted = {p: len(s) for p, s in producer.produced.items()}

    def read() -> dict[int, list[int]] | None:
        got = {
            p: [int(r.value or b"-1") for r in read_partition(target, remote, p, read_committed=True)] for p in wanted
        }
        return got if all(len(got[p]) >= n for p, n in wanted.items()) else None

    got: dict[int, list[int]] = wait_for(f"{remote}: every record, read_committed ({wanted})", read, timeout=timeout)
    for p, seqs in producer.produced.items():
        twice = [seq for seq, n in Counter(got[p]).items() if n > 1]
        assert not twice, f"partition {p}: {len(twice)} records twice to read_committed, e.g. {twice[:10]}"
        assert got[p] == seqs, f"partition {p}: lost or out of order ({len(got[p])} read, {len(seqs)} produced)"
    return sum(wanted.values())


def _refuse(cluster: KafkaCluster, topic: str, refuse: bool) -> None:
    """Make `topic` refuse every batch (`max.message.bytes` 1) or take its default back."""
    op = AlterConfigOpType.SET if refuse else AlterConfigOpType.DELETE
    entry = ConfigEntry("max.message.bytes", "1" if refuse else None, incremental_operation=op)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    admin = AdminClient(cluster.config())  # held until the answer came: a dropped client fails its futures
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


@pytest.mark.timeout(1200)
def test_an_exactly_once_flow_in_an_application_keeps_running_and_copies_once(
    source: KafkaCluster, target: KafkaCluster, folder: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    topics = {name: f"ap{name}{tag}.one" for name in FLOWS}
    for topic in topics.values():
        create_topic(source, topic, 2)
    create_topic(source, f"apa{tag}.two", 1)
    spec = write(folder, source, target, tag, f"apa{tag}\\\\.one", "30000")
    desired = load_text(spec.read_text()).state
    remotes = {name: desired.flow(name).remote_topic(topic) for name, topic in topics.items()}
    state_topic = f"_kmirror.state.apps-eos-{tag}"
    with contextlib.ExitStack() as stack:
        producers = {
            name: stack.enter_context(SequenceProducer(source, topic, 2, per_round=10))
            for name, topic in topics.items()
        }
        applied = kmirror("apply", "-f", str(spec), "--auto-approve", cwd=folder)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        (key,) = local_state_keys(state_topic)
        runner = LocalRunner(folder, desired.spark, state_topic=state_topic, state_key=key)
        jobs = {name: runner.job(name) for name in FLOWS}
        assert all(j is not None and j.running and j.application == "fleet" for j in jobs.values()), jobs
        first = {j.pid for j in jobs.values() if j is not None}
        assert len(first) == 1, first
        e_status = jobs["e"].folder / "status.json"  # type: ignore[union-attr]
        e_started = read_report(e_status).get("started_at")
        log = runner.apps.folder("fleet").log
        wait_for(
            "both flows' records on the target",
            lambda: all(producers[n].copied(target, remotes[n]) > 50 for n in FLOWS),
            timeout=240,
        )

        # 1. A change to the at-least-once flow: only its query restarts, the exactly-once one runs on.
        spec = write(folder, source, target, tag, f"apa{tag}\\\\..*", "30000")
        plan = kmirror("plan", "-f", str(spec), cwd=folder)
        assert "in application fleet: flow a restarts, flow e keeps running" in plan.stdout, plan.stdout + plan.stderr
        applied = kmirror("apply", "-f", str(spec), "--auto-approve", cwd=folder)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert read_report(e_status).get("started_at") == e_started, "the exactly-once flow's query restarted"
        assert {runner.job(n).pid for n in FLOWS} == first  # type: ignore[union-attr]
        assert starts(log) == Counter({"e": 1, "a": 2}), starts(log)
        time.sleep(5)  # records of e go on through a's restart (the check below reads them all)

        # 2. A change to the application's own settings: one graceful redeploy, each flow's query started once.
        since = log.stat().st_size
        spec = write(folder, source, target, tag, f"apa{tag}\\\\..*", "20000")
        applied = kmirror("apply", "-f", str(spec), "--auto-approve", cwd=folder)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        second = {runner.job(n).pid for n in FLOWS}  # type: ignore[union-attr]
        assert len(second) == 1 and second != first, (first, second)
        time.sleep(10)  # a second start would come within the driver's next polls
        assert starts(log, since) == Counter({"e": 1, "a": 1}), starts(log, since)  # was e 2, a 1
        copied = producers["e"].copied(target, remotes["e"])
        wait_for("e's records after the redeploy", lambda: producers["e"].copied(target, remotes["e"]) > copied, 120)

        # 3. a's query fails (its remote topic refuses every batch, which a's producer retries until its delivery
        # timeout, 8 s here): it is restarted alone, after its backoff, in the same driver, while e's records keep
        # arriving.
        a_status = runner.job("a").folder / "status.json"  # type: ignore[union-attr]
        e_started = read_report(e_status).get("started_at")
        with Arrivals(target, {remotes["e"]: 2}) as arrivals:
            steady = time.time()  # e's hold-back in steady state first: what this loaded machine costs it anyway
            time.sleep(BASELINE_SECONDS)
            window_start = time.time()
            _refuse(target, remotes["a"], True)
            try:
                failed = wait_for(
                    "a's query failing",
                    lambda: (r := read_report(a_status)).get("state") == "restarting" and str(r.get("error"))[:200],
                    timeout=180,
                )
            finally:
                _refuse(target, remotes["a"], False)
            wait_for(
                "a's query restarted",
                lambda: (r := read_report(a_status)).get("state") == "running" and (r.get("restarts") or 0) >= 1,
                timeout=120,
            )
            copied = producers["a"].copied(target, remotes["a"])
            wait_for("a copying again", lambda: producers["a"].copied(target, remotes["a"]) > copied, timeout=120)
            window_end = time.time()
            wait_for("e's records created meanwhile", lambda: arrivals.passed(remotes["e"], window_end), timeout=120)
            before = arrivals.longest_wait(remotes["e"], steady, window_start)
            during = arrivals.longest_wait(remotes["e"], window_start, window_end)
        print(f"a failed ({failed}) and was restarted; e's records waited up to {during:.1f}s, {before:.1f}s before")
        assert during <= INTERVAL_SECONDS + before, (
            f"flow e's records waited up to {during:.1f}s while a's query failed and restarted, {before:.1f}s before"
        )
        assert read_report(e_status).get("started_at") == e_started, "e's query restarted with a's"
        assert {runner.job(n).pid for n in FLOWS} == second, "the driver was replaced"  # type: ignore[union-attr]
        assert starts(log, since) == Counter({"e": 1, "a": 1}), "a's restart is its query's, not a new start"
    # The stack stopped the producers: every record of e arrives exactly once, a's at least once.
    records = committed_exactly_once(producers["e"], target, remotes["e"], timeout=240)
    print(f"flow e: {records} records, each exactly once to read_committed, across both applies")
    records, duplicates = none_lost(producers["a"], target, remotes["a"], timeout=180)
    print(f"flow a: {records} records, 0 lost, {duplicates} duplicates")
    drift = kmirror("plan", "-f", str(spec), "--detailed-exitcode", cwd=folder)
    assert drift.returncode == 0, drift.stdout + drift.stderr
