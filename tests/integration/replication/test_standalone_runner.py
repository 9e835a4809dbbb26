"""`spark.deploy: standalone` end to end: apply runs the replication job as a driver on a real Spark standalone
cluster (one master with its REST submission server and one worker, started locally with spark-class), on the
session's Kafka 3.9 source and 4.x target.

One cluster and one flow serve the module (a driver start costs ~30 s here); in file order: apply deploys and
records replicate, plan then shows the job running with the spec's digest; a spec change (a widened topic
filter) redeploys it gracefully with nothing lost and no duplicate; a driver killed with SIGKILL is restarted by
the next apply with nothing lost; a disabled flow has its driver stopped by apply.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer

from reconciler import operations
from reconciler.devenv import spark_standalone
from reconciler.devenv.spark_standalone import StandaloneCluster
from reconciler.plan.definition import Plan
from reconciler.runners.standalone import StandaloneJob, StandaloneRunner
from reconciler.spec.loader import load_desired_state
from reconciler.spec.models import DesiredState
from tests.conftest import KafkaCluster, process_state
from tests.integration.replication.conftest import (
    SequenceProducer,
    create_topic,
    end_offsets,
    read_partition,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FLOW = "repl"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    home = tmp_path_factory.mktemp("spark-standalone")
    started = time.monotonic()
    c = spark_standalone.start(home)
    print(f"standalone master and worker up in {time.monotonic() - started:.1f}s")
    try:
        yield c
    finally:
        spark_standalone.stop(home)


@dataclass
class Setup:
    """The module's kmirror.yaml on the standalone cluster, rewritten by each test that changes the spec."""

    base: Path
    source: KafkaCluster
    target: KafkaCluster
    cluster: StandaloneCluster
    tag: str

    @property
    def prefix(self) -> str:
        return f"sa{self.tag}"

    def write(self, *include: str, enabled: bool = True) -> DesiredState:
        includes = ", ".join(json.dumps(i) for i in (self.prefix + r"\..*", *include))
        (self.base / "kmirror.yaml").write_text(f"""
version: 1
clusters:
  s{self.tag}: {{bootstrap_servers: "{self.source.bootstrap_servers}"}}
  t{self.tag}: {{bootstrap_servers: "{self.target.bootstrap_servers}"}}
state: {{cluster: t{self.tag}, topic: _kmirror.state.{self.tag}}}
spark:
  deploy: standalone
  master: "{self.cluster.master_url}"
  rest_url: "{self.cluster.rest_url}"
  checkpoint_root: checkpoints
  conf: {{spark.kmirror.triggerInterval: "200 milliseconds", spark.executor.memory: 512m, spark.cores.max: 1}}
flows:
  - name: {FLOW}
    enabled: {str(enabled).lower()}
    source: s{self.tag}
    target: t{self.tag}
    topics: {{include: [{includes}]}}
    sync: {{acls: false, group_offsets: false}}
    heartbeats: {{enabled: true, interval: 1s}}
""")
        return load_desired_state(self.base / "kmirror.yaml")

    def runner(self, desired: DesiredState) -> StandaloneRunner:
        runner = operations.job_runner(desired)
        assert isinstance(runner, StandaloneRunner)
        return runner

    def job(self, desired: DesiredState) -> StandaloneJob:
        job = self.runner(desired).job(FLOW)
        assert isinstance(job, StandaloneJob)
        return job

    def remote(self, desired: DesiredState, topic: str) -> str:
        return desired.flow(FLOW).remote_topic(topic)


@pytest.fixture(scope="module")
def setup(
    source: KafkaCluster, target: KafkaCluster, cluster: StandaloneCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Setup]:
    s = Setup(tmp_path_factory.mktemp("standalone-flow"), source, target, cluster, uuid.uuid4().hex[:6])
    try:
        yield s
    finally:
        desired = load_desired_state(s.base / "kmirror.yaml") if (s.base / "kmirror.yaml").exists() else None
        if desired is not None:
            s.runner(desired).stop(FLOW)


def job_change(plan: Plan) -> tuple[str, str] | None:
    """(action, operation) of the plan's job/<flow> change, None if it has none."""
    for c in plan.changes:
        if c.address == f"job/{FLOW}":
            return c.action.value, (c.after or {}).get("operation", "")
    return None


def apply(desired: DesiredState) -> float:
    """Run `kmirror apply` on `desired`; every change applied. The seconds it took."""
    started = time.monotonic()
    result = operations.apply(desired)
    assert result is not None
    assert not result.failed, result.failed
    return time.monotonic() - started


def test_apply_deploys_the_job_on_the_cluster_and_plan_shows_it_running(setup: Setup) -> None:
    desired = setup.write()
    topic = f"{setup.prefix}.orders"
    # Every topic of the module exists before the first apply, which creates and records their remote topics: a
    # remote topic the running job creates for a new source topic is not recorded as kmirror's, and the next plan
    # would refuse it as foreign (a planner limitation, not the runner's).
    for name in (topic, f"{setup.prefix}.moving", f"{setup.prefix}.killed", f"wide{setup.prefix}.extra"):
        create_topic(setup.source, name, 2)
    producer = Producer(setup.source.config())
    for i in range(200):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0

    plan = operations.make_plan(desired)
    assert job_change(plan) == ("create", "deploy")
    seconds = apply(desired)
    print(f"standalone: apply (remote topics + job deploy until its query runs) took {seconds:.1f}s")
    started = time.monotonic()

    job = setup.job(desired)
    assert job.running and job.driver is not None and job.driver.state == "RUNNING", job
    status = json.loads((job.folder / "status.json").read_text())
    # The Python job runs under the worker's driver JVM, in the worker's folder for this driver.
    cwd = os.readlink(f"/proc/{status['pid']}/cwd")
    assert cwd == str(Path(setup.cluster.home) / "work" / (job.submission_id or "?")), cwd
    wait_for(
        "the 200 records on the target",
        lambda: sum(end_offsets(setup.target, setup.remote(desired, topic)).values()) >= 200,
    )
    assert [r.value for r in read_partition(setup.target, setup.remote(desired, topic), 1)] == [
        f"v{i}".encode() for i in range(1, 200, 2)
    ]
    info = operations.job_status(desired, setup.runner(desired)).jobs[FLOW]
    assert info.running and info.runner == "standalone"
    assert info.spec_digest == desired.flow_digest(FLOW)
    assert job.submission_id in info.detail and "RUNNING" in info.detail
    assert job_change(operations.make_plan(desired)) is None  # running with the spec's digest: nothing to do
    print(f"standalone: replicated and planned again in {time.monotonic() - started:.1f}s")


def test_spec_change_redeploys_gracefully_with_nothing_lost(setup: Setup) -> None:
    desired = load_desired_state(setup.base / "kmirror.yaml")
    before = setup.job(desired)
    old, extra = f"{setup.prefix}.moving", f"wide{setup.prefix}.extra"
    producer = Producer(setup.source.config())
    for i in range(100):
        producer.produce(extra, value=f"n{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    with SequenceProducer(setup.source, old, 2, per_round=40) as seq:
        wait_for(
            "the job to copy some records", lambda: seq.copied(setup.target, setup.remote(desired, seq.topic)) > 200
        )
        widened = setup.write(rf"wide{setup.prefix}\..*")
        plan = operations.make_plan(widened)
        assert job_change(plan) == ("replace", "redeploy")
        seconds = apply(widened)
        print(f"standalone: redeploy (graceful stop + start) took {seconds:.1f}s")
        after = setup.job(widened)
        assert after.running and after.digest == widened.flow_digest(FLOW)
        assert after.submission_id != before.submission_id
        time.sleep(3)
    old_driver = StandaloneRunner(setup.base, widened.spark).rest.status(before.submission_id or "?")
    assert old_driver.state == "FINISHED", old_driver  # it stopped itself (SIGTERM), not killed
    total, duplicates = seq.check(setup.target, setup.remote(widened, old))
    print(f"standalone redeploy mid-stream: {total} records, none lost, {duplicates} duplicates")
    assert duplicates == 0, "a graceful stop finishes its batch and writes nothing after it"
    wait_for(
        "the newly included topic", lambda: sum(end_offsets(setup.target, setup.remote(widened, extra)).values()) >= 100
    )


def test_a_killed_driver_is_restarted_by_the_next_apply(setup: Setup) -> None:
    desired = load_desired_state(setup.base / "kmirror.yaml")
    topic = f"{setup.prefix}.killed"
    with SequenceProducer(setup.source, topic, 2, per_round=40) as seq:
        wait_for(
            "the job to copy some records", lambda: seq.copied(setup.target, setup.remote(desired, seq.topic)) > 200
        )
        job = setup.job(desired)
        python = json.loads((job.folder / "status.json").read_text())["pid"]
        jvm = int(Path(f"/proc/{python}/stat").read_text().rpartition(")")[2].split()[1])  # its parent
        os.kill(jvm, signal.SIGKILL)
        wait_for("the killed driver to be reported", lambda: not setup.job(desired).running, timeout=60)
        deadline = time.monotonic() + 10
        while (state := process_state(python)) is not None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert state is None, f"the Python job {python} still runs 10 s after its driver was killed: {state}"
        plan = operations.make_plan(desired)
        assert job_change(plan) == ("update", "restart")
        assert "not running" in next(c.reason for c in plan.changes if c.address == f"job/{FLOW}")
        time.sleep(2)  # records keep arriving while the job is down
        seconds = apply(desired)
        print(f"standalone: restart of a killed driver took {seconds:.1f}s")
        restarted = setup.job(desired)
        assert restarted.running and restarted.submission_id != job.submission_id
        time.sleep(3)
    total, duplicates = seq.check(setup.target, setup.remote(desired, topic))
    print(f"standalone kill -9 of the driver and apply: {total} records, none lost, {duplicates} duplicates")


def test_a_disabled_flow_has_its_driver_stopped_by_apply(setup: Setup) -> None:
    desired = load_desired_state(setup.base / "kmirror.yaml")
    running = setup.job(desired)
    assert running.running
    disabled = setup.write(rf"wide{setup.prefix}\..*", enabled=False)
    plan = operations.make_plan(disabled)
    assert job_change(plan) == ("delete", "")
    seconds = apply(disabled)
    print(f"standalone: graceful stop took {seconds:.1f}s")
    job = setup.job(disabled)
    assert not job.running and job.state == "stopped", job
    assert job.driver is not None and job.driver.state == "FINISHED"
    info = operations.job_status(disabled, setup.runner(disabled)).jobs[FLOW]
    assert not info.running and info.detail.startswith(f"driver {job.submission_id} stopped"), info.detail
    assert job_change(operations.make_plan(disabled)) is None
