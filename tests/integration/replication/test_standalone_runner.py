"""`spark.deploy: standalone` end to end: apply runs the replication job as a driver on a real Spark standalone
cluster (one master with its REST submission server and one worker, started locally with spark-class), on the
session's Kafka 3.9 source and 4.x target; the GitOps loop from fresh checkouts. The worker has no kmirror: it is
started with an environment without kmirror's venv, PYTHONPATH or VIRTUAL_ENV, in which its Python cannot import
kmirror (checked); the job carries its packed environment, entry file and jars on the shared checkpoint root.
The master's REST server requires a token signed with a key (Spark's JWSFilter): refused without it, every step
below signs with the key the file references, and the key reaches no file and no command line.

One cluster and one flow serve the module (a driver start costs ~30 s here); in file order: apply from checkout
A deploys and records replicate; a fresh copy B of the same file (another folder, nothing of A's) plans no change
(`plan --detailed-exitcode` exits 0), applies nothing and starts no second driver (counted on the master), shows
the job in `kmirror status`, and still plans no change once A's folder is gone; a spec change redeploys
gracefully with nothing lost and no duplicate; a driver killed with SIGKILL is launched again by the master with
no apply and nothing lost; a job whose checkpoint was deleted resumes from the offset-syncs on the next apply
(nothing lost, at most offset_lag_max per partition copied again); a disabled flow has its driver stopped. Last,
a second flow with its checkpoint root on HDFS (the MiniDFSCluster of `kmirror dev up --yarn`'s tooling, without
its MiniYARNCluster, which these tests do not use): side files through WebHDFS and Hadoop's FileSystem API, the
environment shipped from HDFS, a graceful stop; and a third with its checkpoint on S3 (MinIO) and its folder on that
HDFS (`job_folder_root`), deleted from S3 when removed.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from confluent_kafka import Producer

from reconciler.app import operations
from reconciler.devenv import minio_local, spark_standalone, yarn_local
from reconciler.devenv.s3_requests import list_keys
from reconciler.devenv.spark_standalone import StandaloneCluster
from reconciler.devenv.yarn_local import YarnCluster
from reconciler.plan.definition import JobChange, Plan
from reconciler.resources.deployments import StandaloneDeployment
from reconciler.runners import FlowRunners, JobRunnerError
from reconciler.runners.hadoop import HadoopClient
from reconciler.runners.rest import RestClient
from reconciler.runners.standalone import StandaloneJob
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
KEY = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
KEY_ENV = "KM_SPARK_REST_KEY"
T = TypeVar("T")


def worker_environment() -> dict[str, str]:
    """A worker with Java, Spark and Python only: this environment without kmirror's venv on PATH, without
    PYTHONPATH or VIRTUAL_ENV; plus the variable the file's reference names (drivers resolve it on the worker)."""
    venv = Path(sys.prefix).resolve()
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not Path(p).resolve().is_relative_to(venv)]
    kept = {k: v for k, v in os.environ.items() if k in ("HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "JAVA_HOME")}
    return {**kept, "PATH": os.pathsep.join(path), KEY_ENV: KEY}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A master whose REST server requires a JWS signed with KEY (Spark's JWSFilter), as production's should; its
    worker runs in `worker_environment()`."""
    home = tmp_path_factory.mktemp("spark-standalone")
    started = time.monotonic()
    os.environ[KEY_ENV] = KEY  # what the file references (and what `kmirror` run as a command inherits)
    c = spark_standalone.start(home, rest_jws_key=KEY, environment=worker_environment())
    print(f"standalone master and worker up in {time.monotonic() - started:.1f}s")
    try:
        yield c
    finally:
        spark_standalone.stop(home)
        os.environ.pop(KEY_ENV, None)


@dataclass
class Setup:
    """The module's kmirror.yaml on the standalone cluster, rewritten by each test that changes the spec."""

    base: Path
    source: KafkaCluster
    target: KafkaCluster
    cluster: StandaloneCluster
    tag: str
    shared: Path  # the checkpoint root every checkout and the worker share

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
  rest_jws_secret_key: "${{env:{KEY_ENV}}}"
  checkpoint_root: "{self.shared}"
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

    def runner(self, desired: DesiredState) -> FlowRunners:
        """The runners as apply makes them: knowing what the state topic recorded."""
        runner = operations.job_runner(desired, operations.read_state(desired).recorded())
        assert isinstance(runner, FlowRunners) and runner.kind == "standalone"
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
    s = Setup(
        tmp_path_factory.mktemp("checkout-a"),
        source,
        target,
        cluster,
        uuid.uuid4().hex[:6],
        tmp_path_factory.mktemp("shared-checkpoints"),
    )
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
            return c.action.value, c.after.operation if isinstance(c, JobChange) and c.after else ""
    return None


def active_drivers(cluster: StandaloneCluster) -> list[str]:
    """The drivers the master runs or will run (its JSON status page)."""
    with urllib.request.urlopen(f"{cluster.webui_url}/json/", timeout=10) as resp:
        return [d["id"] for d in json.loads(resp.read()).get("activedrivers", [])]


def kmirror(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The `kmirror` command as a CI job runs it, in `cwd`."""
    return subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def apply(desired: DesiredState) -> float:
    """Run `kmirror apply` on `desired`; every change applied. The seconds it took."""
    started = time.monotonic()
    result = operations.apply(desired)
    assert result is not None
    assert not result.failed, result.failed
    return time.monotonic() - started


def test_the_rest_server_refuses_requests_without_the_key_or_with_another_clearly(cluster: StandaloneCluster) -> None:
    with pytest.raises(JobRunnerError, match=r"requires authentication; set spark\.rest_jws_secret_key"):
        RestClient(cluster.rest_url).status("driver-none")
    other = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    with pytest.raises(JobRunnerError, match="token kmirror signed was not accepted"):
        RestClient(cluster.rest_url, signing_key=other).status("driver-none")
    assert not RestClient(cluster.rest_url, signing_key=KEY).status("driver-none").found  # answered: no such driver


def test_apply_deploys_the_job_on_the_cluster_and_plan_shows_it_running(setup: Setup) -> None:
    desired = setup.write()
    topic = f"{setup.prefix}.orders"
    # Every topic of the module exists before the first apply, which creates and records their remote topics: a
    # remote topic the running job creates for a new source topic is not recorded as kmirror's, and the next plan
    # would refuse it as foreign (a planner limitation, not the runner's).
    for name in (topic, *(f"{setup.prefix}.{t}" for t in ("moving", "killed", "cpgone")), f"wide{setup.prefix}.extra"):
        create_topic(setup.source, name, 2)
    producer = Producer(setup.source.config())
    for i in range(200):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0

    plan = operations.make_plan(desired)
    assert job_change(plan) == ("create", "deploy")
    row = next(c for c in plan.changes if c.address == f"job/{FLOW}")
    assert f"runs on the Spark standalone master {setup.cluster.master_url} as a supervised driver" in row.reason
    remote = setup.remote(desired, topic)
    first: list[float] = []
    applying = threading.Event()

    def watch_first_record() -> None:
        while applying.is_set() and not first:
            try:
                if sum(end_offsets(setup.target, remote).values()) > 0:
                    first.append(time.monotonic())
                    return
            except Exception:  # the remote topic does not exist yet
                pass
            time.sleep(0.2)

    applying.set()
    watcher = threading.Thread(target=watch_first_record, daemon=True)
    applied_at = time.monotonic()
    watcher.start()
    seconds = apply(desired)
    wait_for("the first record on the target", lambda: first, timeout=180)
    applying.clear()
    load = os.getloadavg()[0]
    print(
        f"standalone: apply (remote topics + job deploy until its query runs) took {seconds:.1f}s; apply -> first "
        f"record on the target {first[0] - applied_at:.1f}s (load average {load:.1f})"
    )
    started = time.monotonic()

    job = setup.job(desired)
    assert job.running and job.driver is not None and job.driver.state == "RUNNING", job
    status = json.loads((job.folder / "status.json").read_text())
    # The Python job runs under the worker's driver JVM, in the worker's folder for this driver.
    cwd = os.readlink(f"/proc/{status['pid']}/cwd")
    assert cwd == str(Path(setup.cluster.home) / "work" / (job.submission_id or "?")), cwd
    # No kmirror on the worker: in the worker's environment its Python cannot import kmirror. The driver runs that
    # base Python, with the environment the job carried (on the shared root) unpacked in the driver's folder.
    worker_env = dict(
        item.split("=", 1)
        for item in Path(f"/proc/{setup.cluster.worker_pid}/environ").read_text().split("\0")
        if "=" in item
    )
    assert not {"PYTHONPATH", "VIRTUAL_ENV"} & set(worker_env), sorted(worker_env)
    python = Path(f"/proc/{status['pid']}/cmdline").read_bytes().split(b"\0")[0].decode()
    assert python == sys._base_executable and not python.startswith(sys.prefix), python  # type: ignore[attr-defined]
    probe = subprocess.run(
        [python, "-c", "import reconciler"], env=worker_env, cwd=setup.cluster.home, capture_output=True, timeout=60
    )
    assert probe.returncode != 0 and b"No module named 'reconciler'" in probe.stderr, probe
    assert (Path(cwd) / "kmirror-env" / "pyvenv.cfg").is_file()
    shipped = json.loads((job.folder / "runner.json").read_text())["job_environment"]
    assert Path(shipped).is_relative_to(setup.shared) and Path(shipped).is_file(), shipped
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


def test_a_fresh_checkout_plans_the_same_and_starts_no_second_driver(
    setup: Setup, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The GitOps loop: every plan, apply and status runs in a fresh checkout on another machine."""
    checkout_b = tmp_path_factory.mktemp("checkout-b")
    shutil.copy(setup.base / "kmirror.yaml", checkout_b / "kmirror.yaml")
    drivers = active_drivers(setup.cluster)
    assert len(drivers) == 1, drivers
    started = time.monotonic()
    plan = kmirror("plan", "-f", "kmirror.yaml", "--detailed-exitcode", cwd=checkout_b)
    print(f"standalone: plan from a fresh checkout took {time.monotonic() - started:.1f}s")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    applied = kmirror("apply", "-f", "kmirror.yaml", "--auto-approve", cwd=checkout_b)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert active_drivers(setup.cluster) == drivers  # the same driver, and no second one
    status = kmirror("status", "-f", "kmirror.yaml", "--format", "json", cwd=checkout_b)
    assert status.returncode == 0, status.stdout + status.stderr
    flows = json.loads(status.stdout)
    flows = flows.get("flows", flows) if isinstance(flows, dict) else flows
    mine = next(f for f in flows if f["flow"] == FLOW)
    assert mine["running"] and mine["job_state"] == "running", mine
    # Checkout A is gone (the CI runner that applied is long recycled): B still sees the job.
    shutil.rmtree(setup.base / ".kmirror", ignore_errors=True)
    again = kmirror("plan", "-f", "kmirror.yaml", "--detailed-exitcode", cwd=checkout_b)
    assert again.returncode == 0, again.stdout + again.stderr


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
    old_driver = RestClient(setup.cluster.rest_url, signing_key=KEY).status(before.submission_id or "?")
    assert old_driver.state == "FINISHED", old_driver  # it stopped itself (SIGTERM), not killed
    total, duplicates = seq.check(setup.target, setup.remote(widened, old))
    print(f"standalone redeploy mid-stream: {total} records, none lost, {duplicates} duplicates")
    assert duplicates == 0, "a graceful stop finishes its batch and writes nothing after it"
    wait_for(
        "the newly included topic", lambda: sum(end_offsets(setup.target, setup.remote(widened, extra)).values()) >= 100
    )


def test_a_killed_driver_is_launched_again_by_the_master_with_no_apply(setup: Setup) -> None:
    desired = load_desired_state(setup.base / "kmirror.yaml")
    topic = f"{setup.prefix}.killed"
    with SequenceProducer(setup.source, topic, 2, per_round=40) as seq:
        wait_for(
            "the job to copy some records", lambda: seq.copied(setup.target, setup.remote(desired, seq.topic)) > 200
        )
        job = setup.job(desired)
        python = json.loads((job.folder / "status.json").read_text())["pid"]
        jvm = int(Path(f"/proc/{python}/stat").read_text().rpartition(")")[2].split()[1])  # its parent
        killed_at = time.monotonic()
        os.kill(jvm, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while (state := process_state(python)) is not None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert state is None, f"the Python job {python} still runs 10 s after its driver was killed: {state}"

        def relaunched() -> bool:
            now = setup.job(desired)
            report = json.loads((now.folder / "status.json").read_text() or "{}")
            return now.running and report.get("state") == "running" and report.get("pid") != python

        wait_for("the master to launch the driver again", relaunched, timeout=180)
        print(f"standalone: driver killed, running again after {time.monotonic() - killed_at:.1f}s with no apply")
        again = setup.job(desired)
        assert again.submission_id == job.submission_id  # the same supervised driver, launched again
        assert job_change(operations.make_plan(desired)) is None
        time.sleep(3)
    total, duplicates = seq.check(setup.target, setup.remote(desired, topic))
    print(f"standalone kill -9 of the driver, relaunched by the master: {total} records, none lost, {duplicates} dup")


def test_a_job_whose_checkpoint_was_deleted_resumes_from_the_offset_syncs(setup: Setup) -> None:
    desired = load_desired_state(setup.base / "kmirror.yaml")
    topic = f"{setup.prefix}.cpgone"
    remote = setup.remote(desired, topic)
    with SequenceProducer(setup.source, topic, 2, per_round=40) as seq:
        wait_for("the job to copy more records", lambda: seq.copied(setup.target, remote) > 1000)
        runner = setup.runner(desired)
        job = runner.job(FLOW)
        assert job is not None and job.checkpoint is not None
        runner.stop(FLOW)  # gracefully: the held offset-syncs are sent
        before = {p: n for p, n in end_offsets(setup.target, remote).items()}
        shutil.rmtree(job.checkpoint)
        plan = operations.make_plan(desired)
        change = next(c for c in plan.changes if c.address == f"job/{FLOW}")
        assert change.action.value == "update" and "resumes from the offset-syncs" in change.reason, change.reason
        apply(desired)
        report = json.loads((setup.job(desired).folder / "status.json").read_text())
        assert report["resumed_from"] == "offset-syncs", report
        time.sleep(3)
    total, duplicates = seq.check(setup.target, remote)
    lag_max = desired.flow(FLOW).offsets.offset_lag_max
    for p, end in before.items():
        got = [int(r.value or b"-1") for r in read_partition(setup.target, remote, p)]
        again = sum(c - 1 for c in Counter(got).values())
        assert again <= lag_max, f"partition {p}: {again} records copied again (offset_lag_max {lag_max}); end {end}"
    print(f"standalone checkpoint deleted, resumed from the offset-syncs: {total} records, none lost, {duplicates} dup")


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
    shared = [p for p in setup.shared.rglob("*") if p.is_file() and p.stat().st_size < 10_000_000]
    assert shared and all(KEY.encode() not in p.read_bytes() for p in shared), "the REST key in a job's file"
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            assert KEY.encode() not in cmdline.read_bytes(), f"the REST key in process {cmdline.parent.name}"
        except OSError:
            continue


@dataclass
class Backing:
    """The local HDFS (the MiniDFSCluster of `kmirror dev up --yarn`'s tooling, without YARN) and S3 (MinIO) of the
    last two tests, each started in the background from the module's first test on (on a loaded machine each takes
    20-60 s, and the tests before mostly wait on their driver)."""

    hadoop_home: Path
    s3_home: Path
    hadoop: Future[YarnCluster]
    s3: Future[minio_local.LocalS3]


def _timed(what: str, start: Callable[[], T]) -> T:
    started = time.monotonic()
    value = start()
    print(f"standalone: {what} up in {time.monotonic() - started:.1f}s (in the background)")
    return value


@pytest.fixture(scope="module", autouse=True)
def backing(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backing | None]:
    """Started only when a selected test of this module asks for `hadoop` or `s3`."""
    wanted = {"hadoop", "s3"}
    here = request.node.path
    if not any(item.path == here and wanted & set(getattr(item, "fixturenames", ())) for item in request.session.items):
        yield None
        return
    hadoop_home = tmp_path_factory.mktemp("dev-root") / "yarn"
    s3_home = tmp_path_factory.mktemp("minio")
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="standalone-backing") as pool:
        started = Backing(
            hadoop_home,
            s3_home,
            pool.submit(_timed, "MiniDFSCluster", lambda: yarn_local.start(hadoop_home, yarn=False)),
            pool.submit(_timed, "MinIO", lambda: minio_local.start(s3_home)),
        )
        try:
            yield started
        finally:
            for future in (started.hadoop, started.s3):  # a start still under way is stopped once it is up
                future.exception()
            yarn_local.stop(hadoop_home)
            minio_local.stop(s3_home)


@pytest.fixture(scope="module")
def hadoop(backing: Backing | None) -> YarnCluster:
    """The local HDFS of `kmirror dev up --yarn`'s tooling, for the last two tests."""
    assert backing is not None
    return backing.hadoop.result(timeout=600)


@pytest.fixture(scope="module")
def s3(backing: Backing | None) -> minio_local.LocalS3:
    """The local S3 (MinIO), for the last test."""
    assert backing is not None
    return backing.s3.result(timeout=600)


def test_a_flow_with_its_checkpoint_on_hdfs_runs_on_the_same_worker_and_stops_gracefully(
    setup: Setup, hadoop: YarnCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The checkpoint root on HDFS: nothing of the job is on a shared path. It runs after the first flow stopped
    (the worker's cores)."""
    base = tmp_path_factory.mktemp("checkout-hdfs")
    tag = f"h{setup.tag}"
    topic = f"{tag}.orders"
    create_topic(setup.source, topic, 2)
    producer = Producer(setup.source.config())
    for i in range(100):
        producer.produce(topic, value=f"h{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0

    def write(enabled: bool) -> DesiredState:
        (base / "kmirror.yaml").write_text(f"""
version: 1
clusters:
  s{tag}: {{bootstrap_servers: "{setup.source.bootstrap_servers}"}}
  t{tag}: {{bootstrap_servers: "{setup.target.bootstrap_servers}"}}
state: {{cluster: t{tag}, topic: _kmirror.state.{tag}}}
spark:
  deploy: standalone
  master: "{setup.cluster.master_url}"
  rest_url: "{setup.cluster.rest_url}"
  rest_jws_secret_key: "${{env:{KEY_ENV}}}"
  hadoop_conf_dir: "{hadoop.hadoop_conf_dir}"
  checkpoint_root: "{hadoop.hdfs}/kmirror"
  conf: {{spark.kmirror.triggerInterval: "200 milliseconds", spark.executor.memory: 512m, spark.cores.max: 1}}
flows:
  - name: {FLOW}
    enabled: {str(enabled).lower()}
    source: s{tag}
    target: t{tag}
    topics: {{include: ["{tag}\\\\..*"]}}
    sync: {{acls: false, group_offsets: false}}
""")
        return load_desired_state(base / "kmirror.yaml")

    desired = write(True)
    row = next(c for c in operations.make_plan(desired).changes if c.address == f"job/{FLOW}")
    assert f"checkpoint on {hadoop.hdfs}/kmirror" in row.reason, row.reason
    applied_at = time.monotonic()
    apply(desired)
    remote = desired.flow(FLOW).remote_topic(topic)
    wait_for("the 100 records on the target", lambda: sum(end_offsets(setup.target, remote).values()) >= 100)
    print(f"standalone, checkpoint on HDFS: apply -> 100 records on the target {time.monotonic() - applied_at:.1f}s")
    assert [r.value for r in read_partition(setup.target, remote, 0)] == [f"h{i}".encode() for i in range(0, 100, 2)]
    runner = setup.runner(desired)
    job = runner.job(FLOW)
    assert isinstance(job, StandaloneJob) and job.running and job.state == "running", job
    record = runner.deployments[FLOW]
    assert isinstance(record, StandaloneDeployment) and record.checkpoint is not None, record
    folder = str(record.folder)  # keyed by the state: <state topic>@<the state cluster's id>
    assert folder.startswith(f"{hadoop.hdfs}/kmirror/_kmirror.state.{tag}@") and folder.endswith(f"/{FLOW}"), record
    assert record.checkpoint == f"{folder}/checkpoint", record
    assert str(record.job_environment).startswith(f"{hadoop.hdfs}/kmirror/_kmirror/envs/"), record
    client = HadoopClient.from_conf_dir(Path(hadoop.hadoop_conf_dir), yarn=False)
    status = json.loads(client.read(f"{folder}/status.json") or b"{}")
    assert status.get("state") == "running" and status.get("digest") == desired.flow_digest(FLOW), status
    assert client.exists(f"{record.checkpoint}/offsets"), "the Spark checkpoint is on HDFS"
    python = Path(f"/proc/{status['pid']}/cmdline").read_bytes().split(b"\0")[0].decode()
    assert python == sys._base_executable, python  # type: ignore[attr-defined]
    assert job_change(operations.make_plan(desired)) is None
    # `kmirror status` says where the driver's output is: on its worker, not a driver.log this host lacks.
    shown = kmirror("status", "-f", "kmirror.yaml", "--format", "json", cwd=base)
    assert "the driver's stdout and stderr on worker" in shown.stdout, shown.stdout + shown.stderr
    assert "driver.log" not in shown.stdout, shown.stdout

    disabled = write(False)
    apply(disabled)
    job = setup.runner(disabled).job(FLOW)
    assert isinstance(job, StandaloneJob) and not job.running and job.state == "stopped", job
    assert job.driver is not None and job.driver.state == "FINISHED"  # it stopped itself: stop.request on HDFS


@pytest.mark.timeout(900)
def test_a_flow_with_its_checkpoint_on_s3_keeps_its_folder_on_hdfs_and_loses_its_checkpoint_when_removed(
    setup: Setup, hadoop: YarnCluster, s3: minio_local.LocalS3, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`checkpoint_root: s3a://` (MinIO) with `job_folder_root` on HDFS: S3A's jars shipped beside the environment,
    the keys in a Hadoop credential provider on HDFS (as on YARN), in no job file; the flow removed from the file
    stops gracefully and its S3 checkpoint is deleted by apply."""
    began = time.monotonic()
    minio = s3
    keys = minio.client()
    client = HadoopClient.from_conf_dir(Path(hadoop.hadoop_conf_dir), yarn=False)
    provider = yarn_local.store_credentials(
        hadoop, f"/user/{client.user}/sa-{setup.tag}.jceks",
        {"fs.s3a.access.key": keys.access_key, "fs.s3a.secret.key": keys.secret_key},
    )  # fmt: skip
    base = tmp_path_factory.mktemp("checkout-s3")
    tag = f"x{setup.tag}"
    topic = f"{tag}.orders"
    create_topic(setup.source, topic, 2)
    producer = Producer(setup.source.config())
    for i in range(100):
        producer.produce(topic, value=f"x{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0

    def write(with_flow: bool) -> DesiredState:
        flows = (
            f"""
  - name: {FLOW}
    source: s{tag}
    target: t{tag}
    topics: {{include: ["{tag}\\\\..*"]}}
    sync: {{acls: false, group_offsets: false}}
"""
            if with_flow
            else " []\n"
        )
        (base / "kmirror.yaml").write_text(f"""
version: 1
clusters:
  s{tag}: {{bootstrap_servers: "{setup.source.bootstrap_servers}"}}
  t{tag}: {{bootstrap_servers: "{setup.target.bootstrap_servers}"}}
state: {{cluster: t{tag}, topic: _kmirror.state.{tag}}}
spark:
  deploy: standalone
  master: "{setup.cluster.master_url}"
  rest_url: "{setup.cluster.rest_url}"
  rest_jws_secret_key: "${{env:{KEY_ENV}}}"
  hadoop_conf_dir: "{hadoop.hadoop_conf_dir}"
  checkpoint_root: "s3a://{minio.bucket}/sa-{tag}"
  job_folder_root: "{hadoop.hdfs}/kmirror"  # the flow above's root: its packed environment is there already
  conf:
    spark.kmirror.triggerInterval: "200 milliseconds"
    spark.executor.memory: 512m
    spark.cores.max: 1
    spark.hadoop.fs.s3a.endpoint: "{minio.endpoint}"
    spark.hadoop.fs.s3a.endpoint.region: "{minio_local.REGION}"
    spark.hadoop.fs.s3a.path.style.access: "true"
    spark.hadoop.fs.s3a.security.credential.provider.path: "{provider}"
flows:{flows}""")
        return load_desired_state(base / "kmirror.yaml")

    desired = write(True)
    applied_at = time.monotonic()
    apply(desired)
    remote = desired.flow(FLOW).remote_topic(topic)
    wait_for("the 100 records on the target", lambda: sum(end_offsets(setup.target, remote).values()) >= 100)
    print(f"standalone, checkpoint on S3: apply -> 100 records on the target {time.monotonic() - applied_at:.1f}s")
    runner = setup.runner(desired)
    record = runner.deployments[FLOW]
    assert isinstance(record, StandaloneDeployment) and record.checkpoint is not None, record
    assert record.checkpoint.startswith(f"s3a://{minio.bucket}/sa-{tag}/_kmirror.state.{tag}@"), record
    folder = str(record.folder)
    assert folder.startswith(f"{hadoop.hdfs}/kmirror/_kmirror.state.{tag}@"), record
    assert any(str(j).endswith(".jar") and "hadoop-aws" in str(j) for j in client_jars(client, record)), record
    status = json.loads(client.read(f"{folder}/status.json") or b"{}")
    assert status.get("state") == "running", status
    prefix = record.checkpoint.removeprefix(f"s3a://{minio.bucket}/") + "/"
    wait_for(
        "commits in the S3 checkpoint",
        lambda: any("/commits/" in k for k in list_keys(keys, minio.bucket, prefix)),
        60,
    )
    for name in ("spec.json", "status.json", "runner.json"):
        assert keys.secret_key not in (client.read(f"{folder}/{name}") or b"").decode(errors="replace"), name
    assert job_change(operations.make_plan(desired)) is None

    apply(write(False))
    assert list_keys(keys, minio.bucket, prefix) == [], "the removed flow's S3 checkpoint is deleted"
    print(f"standalone+s3 test: {time.monotonic() - began:.1f}s (load {os.getloadavg()[0]:.1f})")


def client_jars(client: HadoopClient, record: StandaloneDeployment) -> list[str]:
    """The jars shipped beside the job's environment on HDFS (WebHDFS's listing)."""
    env = str(record.job_environment)
    folder = env.rsplit("/", 1)[0] + "/jars"
    path = urllib.parse.urlsplit(folder).path
    url = f"{client.namenode_http}/webhdfs/v1{path}?op=LISTSTATUS&user.name={client.user}"
    with urllib.request.urlopen(url, timeout=15) as resp:
        return [f["pathSuffix"] for f in json.loads(resp.read())["FileStatuses"]["FileStatus"]]
