"""Many flows, one Spark application (`spark.application`) on a Spark standalone cluster (`deploy: standalone`), run
for real through `kmirror apply`: one master with its REST submission server and one worker, started locally with
spark-class, the worker without kmirror (an environment without kmirror's venv, PYTHONPATH or VIRTUAL_ENV: the
application's driver runs the environment the job carries on the shared checkpoint root).

In file order, on one deployment: apply deploys two flows (a, b) of one cluster pair as queries of one supervised
driver on the worker, and both copy their records; a fresh copy of the file in another folder plans no change
(`plan --detailed-exitcode` exits 0) and its apply starts no second driver; b's topics change: the plan says b
restarts and a keeps running, the master runs the same driver, only b's query starts again, and a's records keep
arriving with none lost and none twice; a change to the application's own Spark settings stops its driver
gracefully (FINISHED) and submits one new driver for both flows, nothing lost or copied twice; a driver JVM killed
with SIGKILL is launched again by the master with no apply, and both flows' queries run again in it, nothing lost;
b leaves the file: only its query stops, a runs on in the same driver; a
leaves the file, the last flow: the application's driver ends (FINISHED on the master, not launched again).
Last, an application whose folder is on HDFS (a MiniDFSCluster; nothing on a shared path): two flows copy, a fresh
checkout plans no change, a change to one flow restarts only its query, and removing both ends the driver.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer

from reconciler.app import operations
from reconciler.devenv import spark_standalone, yarn_local
from reconciler.devenv.spark_standalone import StandaloneCluster
from reconciler.devenv.yarn_local import YarnCluster
from reconciler.jobcontract.job_report import read_report
from reconciler.plan.definition import JobChange, Plan
from reconciler.resources.deployments import StandaloneDeployment
from reconciler.runners import FlowRunners, StandaloneJob
from reconciler.runners.hadoop import HadoopClient
from reconciler.runners.rest import RestClient
from reconciler.spec.loader import load_desired_state
from reconciler.spec.models import DesiredState
from tests.conftest import KafkaCluster, process_state
from tests.integration.replication.conftest import SequenceProducer, create_topic, end_offsets, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

APPLICATION = "fleet"


def worker_environment() -> dict[str, str]:
    """A worker with Java, Spark and Python only: this environment without kmirror's venv on PATH, without
    PYTHONPATH or VIRTUAL_ENV (as test_standalone_runner.py's worker)."""
    venv = Path(sys.prefix).resolve()
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not Path(p).resolve().is_relative_to(venv)]
    kept = {k: v for k, v in os.environ.items() if k in ("HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "JAVA_HOME")}
    return {**kept, "PATH": os.pathsep.join(path)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """Cores are what the worker offers, not limits: the application's driver takes one, its executor one."""
    home = tmp_path_factory.mktemp("spark-standalone-apps")
    started = time.monotonic()
    c = spark_standalone.start(home, cores=3, memory="3g", environment=worker_environment())
    print(f"standalone master and worker up in {time.monotonic() - started:.1f}s")
    try:
        yield c
    finally:
        spark_standalone.stop(home)


@dataclass
class Fleet:
    """The module's kmirror.yaml: flows a and b in application `fleet`, rewritten by the tests that change it."""

    base: Path
    source: KafkaCluster
    target: KafkaCluster
    cluster: StandaloneCluster
    tag: str
    shared: Path  # the checkpoint root every checkout and the worker share
    conf: str = ""  # more of the application's Spark settings
    root: str | None = None  # the checkpoint root when not `shared` (HDFS)
    hadoop_conf_dir: str | None = None

    def topic(self, flow: str, name: str) -> str:
        return f"sap{flow}{self.tag}.{name}"

    def write(self, flows: dict[str, str]) -> DesiredState:
        """`flows`: name -> its topics' include pattern."""
        body = "".join(
            f"""
  - name: {name}
    source: s{self.tag}
    target: t{self.tag}
    topics: {{include: [{json.dumps(include)}]}}
    sync: {{acls: false, group_offsets: false}}
    heartbeats: {{enabled: false}}
"""
            for name, include in flows.items()
        )
        hadoop = f'\n  hadoop_conf_dir: "{self.hadoop_conf_dir}"' if self.hadoop_conf_dir else ""
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
  checkpoint_root: "{self.root or self.shared}"{hadoop}
  application: {APPLICATION}
  conf: {{spark.kmirror.triggerInterval: "200 milliseconds", spark.executor.memory: 512m, spark.cores.max: 1,
          spark.driver.memory: 768m{self.conf}}}
flows:{body if flows else " []"}
""")
        return load_desired_state(self.base / "kmirror.yaml")

    def both(self, b_include: str | None = None) -> DesiredState:
        return self.write({"a": rf"sapa{self.tag}\..*", "b": b_include or rf"sapb{self.tag}\.orders"})

    def runner(self, desired: DesiredState) -> FlowRunners:
        runner = operations.job_runner(desired, operations.read_state(desired).recorded())
        assert isinstance(runner, FlowRunners) and runner.kind == "standalone"
        return runner

    def job(self, desired: DesiredState, flow: str) -> StandaloneJob:
        job = self.runner(desired).job(flow)
        assert isinstance(job, StandaloneJob)
        return job


@pytest.fixture(scope="module")
def fleet(
    source: KafkaCluster, target: KafkaCluster, cluster: StandaloneCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fleet]:
    f = Fleet(
        tmp_path_factory.mktemp("checkout-a"),
        source,
        target,
        cluster,
        uuid.uuid4().hex[:6],
        tmp_path_factory.mktemp("shared-checkpoints"),
    )
    try:
        yield f
    finally:  # each query gracefully; the last one ends the driver (the cluster fixture stops the rest)
        if (f.base / "kmirror.yaml").exists():
            desired = load_desired_state(f.base / "kmirror.yaml")
            runner = f.runner(desired)
            for flow in ("b", "a"):
                try:
                    runner.stop(flow)
                except Exception as exc:  # teardown: the cluster goes next anyway
                    print(f"teardown: could not stop {flow}: {exc}")


def job_rows(plan: Plan) -> dict[str, JobChange]:
    return {c.address.removeprefix("job/"): c for c in plan.changes if isinstance(c, JobChange)}


def active_drivers(cluster: StandaloneCluster) -> list[str]:
    with urllib.request.urlopen(f"{cluster.webui_url}/json/", timeout=10) as resp:
        return [d["id"] for d in json.loads(resp.read()).get("activedrivers", [])]


def kmirror(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=400
    )


def apply(desired: DesiredState) -> float:
    started = time.monotonic()
    result = operations.apply(desired)
    assert result is not None
    assert not result.failed, result.failed
    return time.monotonic() - started


def produce(cluster: KafkaCluster, topic: str, count: int) -> None:
    producer = Producer(cluster.config())
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def copied(fleet: Fleet, desired: DesiredState, flow: str, topic: str) -> int:
    try:
        return sum(end_offsets(fleet.target, desired.flow(flow).remote_topic(topic)).values())
    except Exception:  # not created yet
        return 0


@pytest.mark.timeout(420)
def test_two_flows_run_as_queries_of_one_driver_on_a_worker_without_kmirror(fleet: Fleet) -> None:
    a_topic, b_topic = fleet.topic("a", "orders"), fleet.topic("b", "orders")
    for name in (a_topic, fleet.topic("a", "live"), fleet.topic("a", "killed"), b_topic, fleet.topic("b", "extra")):
        create_topic(fleet.source, name, 2)
    produce(fleet.source, a_topic, 300)
    produce(fleet.source, b_topic, 200)
    desired = fleet.both()
    rows = job_rows(operations.make_plan(desired))
    assert set(rows) == {"a", "b"}, rows
    assert f"in application {APPLICATION}'s supervised driver" in rows["a"].reason, rows["a"].reason
    assert f"starts as a query of application {APPLICATION}" in rows["a"].reason, rows["a"].reason
    seconds = apply(desired)
    wait_for("a's 300 records", lambda: copied(fleet, desired, "a", a_topic) >= 300, timeout=180)
    wait_for("b's 200 records", lambda: copied(fleet, desired, "b", b_topic) >= 200, timeout=180)
    assert copied(fleet, desired, "a", a_topic) == 300 and copied(fleet, desired, "b", b_topic) == 200
    print(f"standalone application: apply of two flows took {seconds:.1f}s (load {os.getloadavg()[0]:.1f})")

    a, b = fleet.job(desired, "a"), fleet.job(desired, "b")
    assert a.running and b.running, (a, b)
    assert a.submission_id == b.submission_id and a.application == b.application == APPLICATION
    assert active_drivers(fleet.cluster) == [a.submission_id]  # one driver for both flows
    app = read_report(a.folder.parent / "status.json")
    assert sorted(app["flows"]) == ["a", "b"], app
    assert read_report(a.folder / "status.json")["pid"] == read_report(b.folder / "status.json")["pid"] == app["pid"]
    # The application's Python runs under the worker's driver JVM, in its folder, on the environment it carried.
    cwd = Path(os.readlink(f"/proc/{app['pid']}/cwd"))
    assert cwd == Path(fleet.cluster.home) / "work" / str(a.submission_id), cwd
    assert (cwd / "kmirror-env" / "pyvenv.cfg").is_file()
    worker_env = Path(f"/proc/{fleet.cluster.worker_pid}/environ").read_bytes().split(b"\0")
    assert not any(item.startswith((b"PYTHONPATH=", b"VIRTUAL_ENV=")) for item in worker_env)
    jvm = int(Path(f"/proc/{app['pid']}/stat").read_text().rpartition(")")[2].split()[1])  # its parent
    print(f"standalone application: one driver for both flows, resident {rss_mib(jvm):.0f} MiB (JVM) + "
          f"{rss_mib(app['pid']):.0f} MiB (Python)")  # fmt: skip
    status = operations.job_status(desired, fleet.runner(desired)).jobs
    assert status["a"].running and status["b"].running
    assert status["b"].spec_digest == desired.flow_digest("b")


def test_a_fresh_checkout_plans_no_change_and_starts_no_second_driver(
    fleet: Fleet, tmp_path_factory: pytest.TempPathFactory
) -> None:
    checkout_b = tmp_path_factory.mktemp("checkout-b")
    shutil.copy(fleet.base / "kmirror.yaml", checkout_b / "kmirror.yaml")
    drivers = active_drivers(fleet.cluster)
    assert len(drivers) == 1, drivers
    plan = kmirror("plan", "-f", "kmirror.yaml", "--detailed-exitcode", cwd=checkout_b)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    applied = kmirror("apply", "-f", "kmirror.yaml", "--auto-approve", cwd=checkout_b)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert active_drivers(fleet.cluster) == drivers


@pytest.mark.timeout(420)
def test_a_change_to_one_flow_restarts_only_its_query_in_the_same_driver(fleet: Fleet) -> None:
    before = load_desired_state(fleet.base / "kmirror.yaml")
    a_before, b_before = fleet.job(before, "a"), fleet.job(before, "b")
    a_started = read_report(a_before.folder / "status.json")["started_at"]
    b_started = read_report(b_before.folder / "status.json")["started_at"]
    live = fleet.topic("a", "live")
    changed = fleet.both(rf"sapb{fleet.tag}\..*")  # b also takes its `extra` topic
    produce(fleet.source, fleet.topic("b", "extra"), 100)
    with SequenceProducer(fleet.source, live, 2, per_round=20) as stream:
        wait_for("a's live records", lambda: stream.copied(fleet.target, changed.flow("a").remote_topic(live)) > 0)
        rows = job_rows(operations.make_plan(changed))
        assert set(rows) == {"b"}, rows
        assert f"in application {APPLICATION}: flow b restarts, flow a keeps running" in rows["b"].reason
        seconds = apply(changed)
        time.sleep(2)  # a few more of a's records after the change
    records, duplicates = stream.check(fleet.target, changed.flow("a").remote_topic(live))
    print(f"standalone application: b's redeploy took {seconds:.1f}s; a copied {records} live records meanwhile")
    assert duplicates == 0  # a's query never restarted: nothing of it copied twice
    a, b = fleet.job(changed, "a"), fleet.job(changed, "b")
    assert a.running and b.running and a.submission_id == a_before.submission_id == b.submission_id
    assert active_drivers(fleet.cluster) == [a.submission_id]
    assert read_report(a.folder / "status.json")["started_at"] == a_started  # a's query is the one it was
    assert read_report(b.folder / "status.json")["started_at"] > b_started  # b's started again
    wait_for("b's extra topic", lambda: copied(fleet, changed, "b", fleet.topic("b", "extra")) >= 100)
    assert job_rows(operations.make_plan(changed)) == {}


@pytest.mark.timeout(420)
def test_the_applications_own_settings_redeploy_it_gracefully_with_nothing_lost(fleet: Fleet) -> None:
    before = load_desired_state(fleet.base / "kmirror.yaml")
    old = fleet.job(before, "a").submission_id
    assert old is not None
    a_topic = fleet.topic("a", "orders")
    fleet.conf = ', spark.kmirror.restartBackoffMaxMs: "20000"'
    changed = fleet.both(rf"sapb{fleet.tag}\..*")
    rows = job_rows(operations.make_plan(changed))
    assert set(rows) == {"a", "b"}, rows
    said = f"application {APPLICATION} redeploys (its Spark settings changed): flows a and b restart"
    assert said in rows["a"].reason, rows["a"].reason
    seconds = apply(changed)
    print(f"standalone application: redeploy of the application took {seconds:.1f}s")
    a, b = fleet.job(changed, "a"), fleet.job(changed, "b")
    assert a.running and b.running and a.submission_id == b.submission_id != old
    assert active_drivers(fleet.cluster) == [a.submission_id]  # one driver: the new one
    assert RestClient(fleet.cluster.rest_url).status(old).state == "FINISHED"  # stopped gracefully, not killed
    produce(fleet.source, a_topic, 50)
    wait_for("a's 50 new records", lambda: copied(fleet, changed, "a", a_topic) >= 350)
    time.sleep(2)
    assert copied(fleet, changed, "a", a_topic) == 350  # nothing lost and nothing copied twice across the redeploy
    assert job_rows(operations.make_plan(changed)) == {}


@pytest.mark.timeout(420)
def test_a_killed_driver_is_launched_again_by_the_master_with_every_flow(fleet: Fleet) -> None:
    desired = load_desired_state(fleet.base / "kmirror.yaml")
    live = fleet.topic("a", "killed")  # a stream of its own: its sequence numbers meet no earlier stream's
    remote = desired.flow("a").remote_topic(live)
    a = fleet.job(desired, "a")
    app_status = a.folder.parent / "status.json"
    with SequenceProducer(fleet.source, live, 2, per_round=20) as stream:
        wait_for("a copies the live stream", lambda: stream.copied(fleet.target, remote) > 100)
        python = read_report(app_status)["pid"]
        jvm = int(Path(f"/proc/{python}/stat").read_text().rpartition(")")[2].split()[1])  # its parent
        killed_at = time.monotonic()
        os.kill(jvm, signal.SIGKILL)
        wait_for("the application's Python to end with its JVM", lambda: process_state(python) is None, timeout=15)

        def relaunched() -> bool:
            pid = read_report(app_status).get("pid")
            reports = [read_report(fleet.job(desired, f).folder / "status.json") for f in ("a", "b")]
            return pid != python and all(r.get("state") == "running" and r.get("pid") == pid for r in reports)

        wait_for("the master to launch the application's driver again", relaunched, timeout=180)
        print(f"standalone application: driver killed, both flows running again after "
              f"{time.monotonic() - killed_at:.1f}s with no apply")  # fmt: skip
        assert fleet.job(desired, "a").submission_id == a.submission_id  # the same supervised driver, relaunched
        assert job_rows(operations.make_plan(desired)) == {}
        time.sleep(3)
    total, duplicates = stream.check(fleet.target, remote)
    print(f"standalone application kill -9, relaunched by the master: {total} records, none lost, {duplicates} dup")


@pytest.mark.timeout(420)
def test_a_removed_flow_stops_only_its_query_and_the_last_one_ends_the_driver(fleet: Fleet) -> None:
    desired = load_desired_state(fleet.base / "kmirror.yaml")
    sid = fleet.job(desired, "a").submission_id
    only_a = fleet.write({"a": rf"sapa{fleet.tag}\..*"})
    rows = job_rows(operations.make_plan(only_a))
    assert set(rows) == {"b"} and rows["b"].action.value == "delete", rows
    apply(only_a)
    a = fleet.job(only_a, "a")
    assert a.running and a.submission_id == sid and active_drivers(fleet.cluster) == [sid]
    assert read_report(a.folder.parent / "status.json")["flows"] == ["a"]
    produce(fleet.source, fleet.topic("a", "orders"), 10)
    wait_for("a copies on", lambda: copied(fleet, only_a, "a", fleet.topic("a", "orders")) >= 360)

    none = fleet.write({})
    rows = job_rows(operations.make_plan(none))
    assert set(rows) == {"a"} and rows["a"].action.value == "delete", rows
    seconds = apply(none)
    print(f"standalone application: the last flow's stop took {seconds:.1f}s")
    wait_for("the application's driver to end", lambda: not active_drivers(fleet.cluster), timeout=60)
    job = fleet.runner(desired).job("a")
    assert job is None or not job.running
    finished = read_report(a.folder.parent / "status.json")
    assert finished["state"] == "stopped", finished
    assert job_rows(operations.make_plan(none)) == {}


@pytest.fixture(scope="module")
def hdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[YarnCluster]:
    """The local HDFS of `kmirror dev up --yarn`'s tooling (its MiniDFSCluster, no YARN), for the last test."""
    home = tmp_path_factory.mktemp("hdfs")
    started = time.monotonic()
    c = yarn_local.start(home, yarn=False)
    print(f"MiniDFSCluster up in {time.monotonic() - started:.1f}s")
    try:
        yield c
    finally:
        yarn_local.stop(home)


@pytest.mark.timeout(900)  # 159 s at load 10, 345 s at load 40 (the environment's first upload to this HDFS)
def test_an_application_with_its_folder_on_hdfs_runs_its_flows_from_a_mirror_of_it(
    fleet: Fleet, hdfs: YarnCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The checkpoint root on HDFS: nothing on a shared path. kmirror reads and writes the application's folder
    through WebHDFS; its driver keeps a copy in its working folder on the worker, in step every second. Runs after
    the first application ended (the worker's cores)."""
    h = Fleet(
        tmp_path_factory.mktemp("checkout-hdfs"),
        fleet.source,
        fleet.target,
        fleet.cluster,
        f"h{fleet.tag}",
        fleet.shared,
        root=f"{hdfs.hdfs}/kmirror",
        hadoop_conf_dir=hdfs.hadoop_conf_dir,
    )
    for name in (h.topic("a", "orders"), h.topic("b", "orders"), h.topic("b", "extra")):
        create_topic(fleet.source, name, 2)
    produce(fleet.source, h.topic("a", "orders"), 100)
    produce(fleet.source, h.topic("b", "orders"), 100)
    desired = h.both()
    seconds = apply(desired)
    print(f"standalone application on HDFS: apply of two flows took {seconds:.1f}s (load {os.getloadavg()[0]:.1f})")
    wait_for("a's 100 records", lambda: copied(h, desired, "a", h.topic("a", "orders")) >= 100, timeout=180)
    wait_for("b's 100 records", lambda: copied(h, desired, "b", h.topic("b", "orders")) >= 100, timeout=180)
    runner = h.runner(desired)
    records = {f: runner.deployments[f] for f in ("a", "b")}
    assert all(isinstance(r, StandaloneDeployment) for r in records.values()), records
    a_record, b_record = records["a"], records["b"]
    assert isinstance(a_record, StandaloneDeployment) and isinstance(b_record, StandaloneDeployment)
    assert str(a_record.folder).startswith(f"{hdfs.hdfs}/kmirror/") and str(a_record.folder).endswith("/_apps/fleet/a")
    sid = a_record.submission_id
    assert b_record.submission_id == sid and active_drivers(fleet.cluster) == [sid]
    client = HadoopClient.from_conf_dir(Path(hdfs.hadoop_conf_dir), yarn=False)
    app_uri = str(a_record.folder).rpartition("/")[0]

    def on_hdfs(name: str) -> dict[str, object]:
        found = json.loads(client.read(f"{app_uri}/{name}") or b"{}")
        assert isinstance(found, dict)
        return found

    assert on_hdfs("status.json").get("flows") == ["a", "b"], on_hdfs("status.json")
    assert on_hdfs("a/status.json").get("state") == on_hdfs("b/status.json").get("state") == "running"
    a_started, b_started = on_hdfs("a/status.json")["started_at"], on_hdfs("b/status.json")["started_at"]

    checkout = tmp_path_factory.mktemp("checkout-hdfs-b")
    shutil.copy(h.base / "kmirror.yaml", checkout / "kmirror.yaml")
    plan = kmirror("plan", "-f", "kmirror.yaml", "--detailed-exitcode", cwd=checkout)
    assert plan.returncode == 0, plan.stdout + plan.stderr

    changed = h.both(rf"sapb{h.tag}\..*")
    produce(fleet.source, h.topic("b", "extra"), 50)
    assert set(job_rows(operations.make_plan(changed))) == {"b"}
    apply(changed)
    assert active_drivers(fleet.cluster) == [sid]
    assert on_hdfs("a/status.json")["started_at"] == a_started  # a's query is the one it was
    assert on_hdfs("b/status.json")["started_at"] != b_started  # b's started again
    wait_for("b's extra topic", lambda: copied(h, changed, "b", h.topic("b", "extra")) >= 50)
    assert job_rows(operations.make_plan(changed)) == {}

    none = h.write({})
    apply(none)
    wait_for("the application's driver to end", lambda: not active_drivers(fleet.cluster), timeout=60)
    assert RestClient(fleet.cluster.rest_url).status(str(sid)).state == "FINISHED"
    assert on_hdfs("status.json").get("state") == "stopped", on_hdfs("status.json")
