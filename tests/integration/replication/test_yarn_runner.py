"""`spark.deploy: yarn` end to end: apply runs the replication job as a cluster-mode application on a real YARN
(MiniYARNCluster, one NodeManager) with its checkpoint and side files on a real HDFS (MiniDFSCluster), both started
the way `kmirror dev up --yarn` starts them (and `kmirror dev status --format json` names them), on the session's
Kafka 3.9 source and 4.x target, with the real spark-submit.

An application takes 20-140 s to start on a busy 2-core machine, so one deployment serves the module, in file
order: apply deploys the flow (every record counted on the target; the checkpoint, spec and status sit on HDFS;
the ResourceManager runs the application; the driver runs the packed environment's interpreter); a fresh checkout
plans 0 changes and `kmirror status` shows the application; the ApplicationMaster's JVM killed with SIGKILL is
replaced by YARN's next attempt, which resumes from the HDFS checkpoint with nothing lost, without an apply; a spec
change redeploys gracefully mid-stream (a new application; the old one FINISHED, SUCCEEDED; nothing lost, no
duplicate); the flow disabled stops it gracefully (FINISHED, SUCCEEDED, no kill). Last, a second flow with its
checkpoint on S3 (MinIO) and its keys in a Hadoop credential provider on HDFS: copies, plans nothing from a fresh
checkout, and removed from the file stops gracefully and loses its S3 checkpoint.
"""

from __future__ import annotations

import contextlib
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer

from reconciler.app import operations
from reconciler.artifacts.job_env import job_env_archive
from reconciler.devenv import minio_local, yarn_local
from reconciler.devenv.minio_local import LocalS3
from reconciler.devenv.s3_requests import list_keys
from reconciler.devenv.yarn_local import YarnCluster
from reconciler.plan.definition import Plan
from reconciler.runners import FlowRunners, YarnJob
from reconciler.runners.hadoop import HadoopClient
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
from tests.integration.replication.test_s3_checkpoints import _state_topic_text

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FLOW = "yarnflow"


@pytest.fixture(scope="module")
def hadoop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[YarnCluster]:
    home = tmp_path_factory.mktemp("dev-root") / "yarn"  # where `kmirror dev up --yarn --root ROOT` puts it
    started = time.monotonic()
    cluster = yarn_local.start(home)
    print(f"yarn: MiniDFSCluster + MiniYARNCluster up in {time.monotonic() - started:.1f}s")
    try:
        yield cluster
    finally:
        yarn_local.stop(home)


@dataclass
class Setup:
    base: Path
    source: KafkaCluster
    target: KafkaCluster
    hadoop: YarnCluster
    tag: str

    @property
    def prefix(self) -> str:
        return f"yn{self.tag}"

    @property
    def client(self) -> HadoopClient:
        return HadoopClient.from_conf_dir(Path(self.hadoop.hadoop_conf_dir))

    def write(self, *, enabled: bool = True, heartbeat: str = "1s") -> DesiredState:
        (self.base / "kmirror.yaml").write_text(f"""
version: 1
clusters:
  s{self.tag}: {{bootstrap_servers: "{self.source.bootstrap_servers}"}}
  t{self.tag}: {{bootstrap_servers: "{self.target.bootstrap_servers}"}}
state: {{cluster: t{self.tag}, topic: _kmirror.state.{self.tag}}}
spark:
  deploy: yarn
  master: yarn
  hadoop_conf_dir: "{self.hadoop.hadoop_conf_dir}"
  checkpoint_root: "{self.hadoop.hdfs}/kmirror/checkpoints"
  conf:
    spark.kmirror.mode: microbatch
    spark.kmirror.triggerInterval: "500 milliseconds"
    spark.executor.instances: 1
    spark.executor.memory: 512m
    spark.driver.memory: 512m
flows:
  - name: {FLOW}
    enabled: {str(enabled).lower()}
    source: s{self.tag}
    target: t{self.tag}
    topics: {{include: ["{self.prefix}\\\\..*"]}}
    sync: {{acls: false, group_offsets: false}}
    heartbeats: {{enabled: true, interval: {heartbeat}}}
""")
        return load_desired_state(self.base / "kmirror.yaml")

    def runner(self, desired: DesiredState) -> FlowRunners:
        runner = operations.job_runner(desired, operations.read_state(desired).recorded())
        assert isinstance(runner, FlowRunners) and runner.kind == "yarn"
        return runner

    def job(self, desired: DesiredState) -> YarnJob:
        job = self.runner(desired).job(FLOW)
        assert isinstance(job, YarnJob)
        return job

    def remote(self, desired: DesiredState, topic: str) -> str:
        return desired.flow(FLOW).remote_topic(topic)


@pytest.fixture(scope="module")
def setup(
    source: KafkaCluster, target: KafkaCluster, hadoop: YarnCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Setup]:
    s = Setup(tmp_path_factory.mktemp("yarn-checkout-a"), source, target, hadoop, uuid.uuid4().hex[:6])
    try:
        yield s
    finally:
        if (s.base / "kmirror.yaml").exists():
            s.runner(load_desired_state(s.base / "kmirror.yaml")).stop(FLOW)


def job_change(plan: Plan) -> tuple[str, str] | None:
    for c in plan.changes:
        if c.address == f"job/{FLOW}":
            return c.action.value, c.after.model_dump(mode="json").get("operation", "") if c.after else ""
    return None


def kmirror(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_dev_status_names_the_local_hadoop(hadoop: YarnCluster, tmp_path: Path) -> None:
    """The contract of `kmirror dev status --format json` (../shared/DESIGN.md): a "yarn" object."""
    root = Path(hadoop.home).parent
    result = kmirror("dev", "status", "--root", str(root), "--format", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    yarn = json.loads(result.stdout)["yarn"]
    assert yarn["resource_manager"] == hadoop.resource_manager and yarn["resource_manager"].startswith("http://")
    assert yarn["hdfs"] == hadoop.hdfs and yarn["hdfs"].startswith("hdfs://")
    assert yarn["hadoop_conf_dir"] == hadoop.hadoop_conf_dir and yarn["running"] is True
    assert (Path(yarn["hadoop_conf_dir"]) / "yarn-site.xml").is_file()


def test_apply_deploys_the_flow_to_yarn_with_its_checkpoint_on_hdfs(setup: Setup) -> None:
    desired = setup.write()
    topic = f"{setup.prefix}.orders"
    for name in (topic, f"{setup.prefix}.killed", f"{setup.prefix}.moving"):
        create_topic(setup.source, name, 2)
    producer = Producer(setup.source.config())
    for i in range(300):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    assert job_change(operations.make_plan(desired)) == ("create", "deploy")

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
    started = time.monotonic()
    watcher.start()
    result = operations.apply(desired)
    assert result is not None and not result.failed, result.failed if result else None
    applied = time.monotonic() - started
    wait_for("the first record on the target", lambda: first, timeout=180)
    applying.clear()
    print(f"yarn: apply took {applied:.1f}s; apply -> first record on the target {first[0] - started:.1f}s")

    wait_for("the 300 records on the target", lambda: sum(end_offsets(setup.target, remote).values()) >= 300)
    for p in range(2):  # every record, in order, once
        got = [r.value for r in read_partition(setup.target, remote, p)]
        assert got == [f"v{i}".encode() for i in range(p, 300, 2)], f"partition {p}"

    job = setup.job(desired)
    assert job.running and job.yarn_state == "RUNNING" and job.app_id is not None, job
    assert job.app_id.startswith("application_")
    record = operations.read_state(desired).recorded().get(f"job/{FLOW}")
    assert record is not None
    deployment = record.get("deployment") or {}
    assert deployment.get("application_id") == job.app_id and deployment.get("runner") == "yarn", deployment
    checkpoint = deployment["checkpoint"]
    assert checkpoint.startswith(f"{setup.hadoop.hdfs}/kmirror/checkpoints/"), checkpoint
    client = setup.client
    assert client.exists(f"{checkpoint}/offsets"), "the Spark checkpoint is on HDFS"
    status = json.loads(client.read(f"{job.remote_folder}/status.json") or b"{}")
    assert status.get("state") == "running" and status.get("app_id") == job.app_id, status
    assert json.loads(client.read(f"{job.remote_folder}/spec.json") or b"{}").get("digest") == desired.flow_digest(FLOW)
    # The job carries its own Python: the packed environment, uploaded once beside the checkpoints, unpacked by YARN
    # in the driver's container, whose interpreter runs the job (not this machine's venv).
    environment = deployment.get("job_environment")
    assert isinstance(environment, str) and environment.startswith(setup.hadoop.hdfs) and client.exists(environment)
    python = Path(f"/proc/{status['pid']}/cmdline").read_bytes().split(b"\0")[0].decode()
    assert python.endswith("kmirror-env/bin/python") and not python.startswith(sys.prefix), python
    archive, _ = job_env_archive()
    print(f"yarn: the job's environment archive is {archive.stat().st_size / 1e6:.1f} MB ({environment})")
    info = operations.job_status(desired, setup.runner(desired)).jobs[FLOW]
    assert info.running and info.runner == "yarn" and info.spec_digest == desired.flow_digest(FLOW)
    assert job.app_id in info.detail and "RUNNING" in info.detail, info.detail


def test_a_fresh_checkout_plans_no_change_and_status_shows_the_application(
    setup: Setup, tmp_path_factory: pytest.TempPathFactory
) -> None:
    checkout_b = tmp_path_factory.mktemp("yarn-checkout-b")
    shutil.copy(setup.base / "kmirror.yaml", checkout_b / "kmirror.yaml")
    plan = kmirror("plan", "-f", "kmirror.yaml", "--detailed-exitcode", cwd=checkout_b)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    status = kmirror("status", "-f", "kmirror.yaml", "--format", "json", cwd=checkout_b)
    assert status.returncode == 0, status.stdout + status.stderr
    flows = json.loads(status.stdout)
    flows = flows.get("flows", flows) if isinstance(flows, dict) else flows
    mine = next(f for f in flows if f["flow"] == FLOW)
    desired = load_desired_state(setup.base / "kmirror.yaml")
    assert mine["running"] and mine["job_state"] == "running", mine
    assert mine["runner"] == "yarn" and mine["application"] == setup.job(desired).app_id, mine
    text = kmirror("status", "-f", "kmirror.yaml", cwd=checkout_b)
    assert f"(yarn {mine['application']})" in text.stdout, text.stdout


def test_the_application_master_killed_is_replaced_by_yarn_and_resumes_from_hdfs(setup: Setup) -> None:
    desired = load_desired_state(setup.base / "kmirror.yaml")
    topic = f"{setup.prefix}.killed"
    remote = setup.remote(desired, topic)
    client = setup.client
    with SequenceProducer(setup.source, topic, 2, per_round=40) as seq:
        wait_for("the job to copy some records", lambda: seq.copied(setup.target, remote) > 200, timeout=180)
        job = setup.job(desired)
        python = int(json.loads(client.read(f"{job.remote_folder}/status.json") or b"{}")["pid"])
        am = int(Path(f"/proc/{python}/stat").read_text().rpartition(")")[2].split()[1])  # the driver JVM: the AM
        assert "ApplicationMaster" in Path(f"/proc/{am}/cmdline").read_bytes().decode(errors="replace")
        killed_at = time.monotonic()
        os.kill(am, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while (state := process_state(python)) is not None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert state is None, f"the Python job {python} still runs 15 s after its AM was killed: {state}"

        def next_attempt() -> bool:
            report = json.loads(client.read(f"{job.remote_folder}/status.json") or b"{}")
            return bool(report.get("state") == "running" and report.get("pid") != python)

        wait_for("YARN's next attempt to run the job", next_attempt, timeout=240)
        print(f"yarn: AM killed, next attempt running after {time.monotonic() - killed_at:.1f}s with no apply")
        again = setup.job(desired)
        assert again.app_id == job.app_id and again.attempts >= 2 and again.running, again
        assert job_change(operations.make_plan(desired)) is None
        time.sleep(3)
    total, duplicates = seq.check(setup.target, remote, timeout=240)
    print(f"yarn kill -9 of the AM, next attempt: {total} records, none lost, {duplicates} duplicates")


def test_a_spec_change_redeploys_gracefully_with_nothing_lost(setup: Setup) -> None:
    desired = load_desired_state(setup.base / "kmirror.yaml")
    before = setup.job(desired)
    assert before.app_id is not None
    topic = f"{setup.prefix}.moving"
    remote = setup.remote(desired, topic)
    with SequenceProducer(setup.source, topic, 2, per_round=40) as seq:
        wait_for("the job to copy some records", lambda: seq.copied(setup.target, remote) > 200, timeout=180)
        changed = setup.write(heartbeat="2s")
        assert job_change(operations.make_plan(changed)) == ("replace", "redeploy")
        started = time.monotonic()
        result = operations.apply(changed)
        assert result is not None and not result.failed, result.failed if result else None
        print(f"yarn: redeploy (graceful stop + a new application running) took {time.monotonic() - started:.1f}s")
        after = setup.job(changed)
        assert after.running and after.app_id != before.app_id and after.digest == changed.flow_digest(FLOW)
        time.sleep(3)
    old = setup.client.application(before.app_id)
    assert old is not None and (old["state"], old["finalStatus"]) == ("FINISHED", "SUCCEEDED"), old
    total, duplicates = seq.check(setup.target, remote, timeout=240)
    print(f"yarn redeploy mid-stream: {total} records, none lost, {duplicates} duplicates")
    assert duplicates == 0, "a graceful stop finishes its batch and writes nothing after it"


def test_a_disabled_flow_stops_its_application_gracefully(setup: Setup) -> None:
    desired = load_desired_state(setup.base / "kmirror.yaml")
    job = setup.job(desired)
    assert job.app_id is not None
    disabled = setup.write(enabled=False, heartbeat="2s")
    assert job_change(operations.make_plan(disabled)) == ("delete", "")
    started = time.monotonic()
    result = operations.apply(disabled)
    assert result is not None and not result.failed
    print(f"yarn: graceful stop took {time.monotonic() - started:.1f}s")
    app = setup.client.application(job.app_id)
    assert app is not None
    assert (app["state"], app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), app  # stopped itself, not killed
    report = json.loads(setup.client.read(f"{job.remote_folder}/status.json") or b"{}")
    assert report.get("state") == "stopped", report


# -- an s3a: checkpoint root on YARN (last: the flow above is stopped, so the NodeManager has room) -------------------

S3_FLOW = "s3flow"


@pytest.fixture(scope="module")
def minio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    home = tmp_path_factory.mktemp("minio")
    server = minio_local.start(home)  # built once into the cache (CI builds it in the background)
    try:
        yield server
    finally:
        minio_local.stop(home)


def write_s3_file(base: Path, setup: Setup, s3: LocalS3, provider: str, *, with_flow: bool = True) -> DesiredState:
    tag = setup.tag
    flows = (
        f"""
  - name: {S3_FLOW}
    source: s{tag}
    target: t{tag}
    topics: {{include: ["ys3{tag}\\\\..*"]}}
    sync: {{acls: false, group_offsets: false}}
    heartbeats: {{enabled: false}}
"""
        if with_flow
        else " []\n"
    )
    (base / "kmirror.yaml").write_text(f"""
version: 1
clusters:
  s{tag}: {{bootstrap_servers: "{setup.source.bootstrap_servers}"}}
  t{tag}: {{bootstrap_servers: "{setup.target.bootstrap_servers}"}}
state: {{cluster: t{tag}, topic: _kmirror.state.s3y{tag}}}
spark:
  deploy: yarn
  hadoop_conf_dir: "{setup.hadoop.hadoop_conf_dir}"
  checkpoint_root: "s3a://{s3.bucket}/yarn-{tag}"
  conf:
    spark.kmirror.mode: microbatch
    spark.kmirror.triggerInterval: "500 milliseconds"
    spark.executor.instances: 1
    spark.executor.memory: 512m
    spark.driver.memory: 512m
    spark.hadoop.fs.s3a.endpoint: "{s3.endpoint}"
    spark.hadoop.fs.s3a.endpoint.region: "{minio_local.REGION}"
    spark.hadoop.fs.s3a.path.style.access: "true"
    spark.hadoop.fs.s3a.security.credential.provider.path: "{provider}"
flows:{flows}""")
    return load_desired_state(base / "kmirror.yaml")


@pytest.mark.timeout(900)
def test_an_s3_checkpoint_on_yarn_with_the_clusters_credentials_copies_and_is_deleted_with_its_flow(
    setup: Setup, minio: LocalS3, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """`checkpoint_root: s3a://` with deploy yarn: the checkpoint in the bucket, the job's folder on the cluster's
    HDFS (`/user/<user>/kmirror`), S3A's jars shipped with the application, and the keys only in a Hadoop credential
    provider on HDFS (jceks, 600), as an operator's cluster keeps them: in no job file, command line, state record
    or plan. A fresh checkout plans nothing; the flow removed from the file stops gracefully and its S3 checkpoint
    is deleted."""
    began = time.monotonic()
    keys = minio.client()
    client = setup.client
    provider = yarn_local.store_credentials(
        setup.hadoop,
        f"/user/{client.user}/s3-{setup.tag}.jceks",
        {"fs.s3a.access.key": keys.access_key, "fs.s3a.secret.key": keys.secret_key},
    )
    store = urllib.parse.urlsplit(provider).path
    with urllib.request.urlopen(
        f"{client.namenode_http}/webhdfs/v1{store}?op=GETFILESTATUS&user.name={client.user}", timeout=15
    ) as resp:
        assert json.loads(resp.read())["FileStatus"]["permission"] == "600"

    checkout = tmp_path_factory.mktemp("yarn-s3-checkout-a")
    desired = write_s3_file(checkout, setup, minio, provider)
    topic = f"ys3{setup.tag}.orders"
    create_topic(setup.source, topic, 2)
    producer = Producer(setup.source.config())
    for i in range(200):
        producer.produce(topic, value=f"s{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    remote = desired.flow(S3_FLOW).remote_topic(topic)
    started = time.monotonic()
    result = operations.apply(desired)
    assert result is not None and not result.failed, result.failed if result else None
    wait_for("the 200 records on the target", lambda: sum(end_offsets(setup.target, remote).values()) >= 200, 180)
    print(f"yarn+s3: apply -> 200 records on the target in {time.monotonic() - started:.1f}s")
    for p in range(2):
        got = [r.value for r in read_partition(setup.target, remote, p)]
        assert got == [f"s{i}".encode() for i in range(p, 200, 2)], f"partition {p}"

    runner = operations.job_runner(desired, operations.read_state(desired).recorded())
    job = runner.job(S3_FLOW)
    assert isinstance(job, YarnJob) and job.running and job.checkpoint is not None, job
    assert job.checkpoint.startswith(f"s3a://{minio.bucket}/yarn-{setup.tag}/_kmirror.state.s3y{setup.tag}@")
    prefix = job.checkpoint.removeprefix(f"s3a://{minio.bucket}/") + "/"
    # The side files are on the cluster's HDFS, in this user's folder; the checkpoint only in the bucket.
    assert job.remote_folder.startswith(f"{setup.hadoop.hdfs}/user/{client.user}/kmirror/"), job.remote_folder
    status = json.loads(client.read(f"{job.remote_folder}/status.json") or b"{}")
    assert status.get("state") == "running" and status.get("app_id") == job.app_id, status
    wait_for(
        "committed batches in the S3 checkpoint",
        lambda: any("/commits/" in k for k in list_keys(keys, minio.bucket, prefix)),
        60,
    )

    secret = keys.secret_key
    for name in ("spec.json", "status.json", "runner.json"):
        assert secret not in (client.read(f"{job.remote_folder}/{name}") or b"").decode(errors="replace"), name
    for path in Path(job.folder).iterdir():
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path
    containers = yarn_local._container_pids(Path(setup.hadoop.home))
    assert containers, "the application's containers"
    for pid in containers:
        with contextlib.suppress(OSError):
            assert secret.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes(), pid
            assert secret.encode() not in Path(f"/proc/{pid}/environ").read_bytes(), pid
    assert secret not in _state_topic_text(setup.target, f"_kmirror.state.s3y{setup.tag}")

    checkout_b = tmp_path_factory.mktemp("yarn-s3-checkout-b")
    shutil.copy(checkout / "kmirror.yaml", checkout_b / "kmirror.yaml")
    plan = kmirror("plan", "-f", "kmirror.yaml", "--detailed-exitcode", "--format", "json", cwd=checkout_b)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert secret not in plan.stdout + plan.stderr

    # The flow leaves the file: stopped gracefully (no kill), its S3 checkpoint deleted.
    removed = write_s3_file(checkout, setup, minio, provider, with_flow=False)
    stopping = time.monotonic()
    result = operations.apply(removed)
    assert result is not None and not result.failed, result.failed if result else None
    print(f"yarn+s3: flow removed -> stopped and its checkpoint deleted in {time.monotonic() - stopping:.1f}s")
    app = client.application(job.app_id or "")
    assert app is not None and (app["state"], app["finalStatus"]) == ("FINISHED", "SUCCEEDED"), app
    assert list_keys(keys, minio.bucket, prefix) == [], "the removed flow's S3 checkpoint is deleted"
    print(f"yarn+s3 test: {time.monotonic() - began:.1f}s (load {os.getloadavg()[0]:.1f})")
