"""`spark.checkpoint_root: s3a://...` for `deploy: local`, on a real S3 server (MinIO, `kmirror dev up --s3`'s),
real Kafka and real Spark.

The flow's checkpoint lives in the bucket (listed through S3, not the disk), reached through Hadoop's S3A with the
AWS SDK modules kmirror pins; the keys reach the job only as `spark.conf` references to environment variables that
are not the AWS SDK's own (so nothing but the references can have given them), and never a file kmirror writes, the
state topic or a command line. After `kill -9` of the job's process group, 100 more records are produced while it
is down; the next apply starts it again, it resumes from the S3 checkpoint (its report says so), and the target
holds every record exactly once, in order: a checkpoint ignored would copy the first 200 again, one lost would
resume from the end and miss the 100. A fresh checkout then plans no change; the flow removed from the file, apply
deletes its S3 checkpoint.

MinIO is built from its Go module on first use (`minio_local.minio_binary`, 2-5 minutes once; CI starts that build
in the background before the suite: `.ci/run`); S3A's jars are fetched on first use (~18 MB).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from reconciler.app import operations
from reconciler.devenv import minio_local
from reconciler.devenv.minio_local import LocalS3
from reconciler.devenv.s3_requests import list_keys
from reconciler.runners import FlowRunners
from reconciler.spec.loader import load_desired_state
from reconciler.spec.models import DesiredState
from tests.conftest import KafkaCluster
from tests.integration.replication.conftest import create_topic, end_offsets, read_partition, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FLOW = "repl"
ACCESS_ENV, SECRET_ENV = "KM_TEST_S3_ACCESS", "KM_TEST_S3_SECRET"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    """A MinIO with its bucket; its keys exported under names only the file's references use."""
    home = tmp_path_factory.mktemp("minio")
    started = time.monotonic()
    server = minio_local.start(home)
    print(f"MinIO up in {time.monotonic() - started:.1f}s (build included when it was not cached)")
    client = server.client()
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("AWS_")}  # S3A's chain would read them
    os.environ[ACCESS_ENV], os.environ[SECRET_ENV] = client.access_key, client.secret_key
    try:
        yield server
    finally:
        minio_local.stop(home)
        os.environ.pop(ACCESS_ENV, None)
        os.environ.pop(SECRET_ENV, None)
        os.environ.update(saved)


def write_file(base: Path, source: KafkaCluster, target: KafkaCluster, s3: LocalS3, tag: str) -> DesiredState:
    (base / "kmirror.yaml").write_text(f"""
version: 1
clusters:
  s{tag}: {{bootstrap_servers: "{source.bootstrap_servers}"}}
  t{tag}: {{bootstrap_servers: "{target.bootstrap_servers}"}}
state: {{cluster: t{tag}, topic: _kmirror.state.s3{tag}}}
spark:
  deploy: local
  master: "local[2]"
  checkpoint_root: "s3a://{s3.bucket}/checkpoints-{tag}"
  conf:
    spark.kmirror.triggerInterval: "200 milliseconds"
    spark.hadoop.fs.s3a.endpoint: "{s3.endpoint}"
    spark.hadoop.fs.s3a.endpoint.region: "{minio_local.REGION}"
    spark.hadoop.fs.s3a.path.style.access: "true"
    spark.hadoop.fs.s3a.access.key: "${{env:{ACCESS_ENV}}}"
    spark.hadoop.fs.s3a.secret.key: "${{env:{SECRET_ENV}}}"
flows:
  - name: {FLOW}
    source: s{tag}
    target: t{tag}
    topics: {{include: ['sss{tag}\\..*']}}
    sync: {{acls: false, group_offsets: false}}
    heartbeats: {{enabled: false}}
""")
    return load_desired_state(base / "kmirror.yaml")


def produce(source: KafkaCluster, topic: str, first: int, count: int) -> None:
    producer = Producer(source.config(**{"enable.idempotence": True}))
    for i in range(first, first + count):
        producer.produce(topic, value=str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0


def copied(target: KafkaCluster, remote: str) -> dict[int, list[int]]:
    return {p: [int(r.value or b"-1") for r in read_partition(target, remote, p)] for p in range(2)}


def kmirror(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


# On a fresh machine the fixture may wait for the MinIO build CI started (14 min was seen under load).
@pytest.mark.timeout(1500)
def test_a_killed_job_resumes_from_its_s3_checkpoint_with_every_record_once(
    source: KafkaCluster,
    target: KafkaCluster,
    s3: LocalS3,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tag = uuid.uuid4().hex[:6]
    monkeypatch.setenv("KMIRROR_HOME", str(tmp_path_factory.mktemp("kmirror-home")))
    checkout = tmp_path_factory.mktemp("checkout-a")
    desired = write_file(checkout, source, target, s3, tag)
    topic = f"sss{tag}.orders"
    create_topic(source, topic, 2)
    produce(source, topic, 0, 200)
    remote = desired.flow(FLOW).remote_topic(topic)
    client = s3.client()
    started = time.monotonic()
    try:
        result = operations.apply(desired)
        assert result is not None and not result.failed, result and result.failed
        wait_for("200 records on the target", lambda: sum(end_offsets(target, remote).values()) >= 200, 180)
        print(
            f"s3a local: apply -> 200 records copied in {time.monotonic() - started:.1f}s "
            f"(load {os.getloadavg()[0]:.1f})"
        )

        runner = operations.job_runner(desired, operations.read_state(desired).recorded())
        assert isinstance(runner, FlowRunners)
        job = runner.job(FLOW)
        assert job is not None and job.running and job.pid is not None
        # <root>/<state topic>@<state cluster id>/<flow>/checkpoint
        assert job.checkpoint is not None and job.checkpoint.endswith(f"/{FLOW}/checkpoint"), job.checkpoint
        assert job.checkpoint.startswith(f"s3a://{s3.bucket}/checkpoints-{tag}/_kmirror.state.s3{tag}"), job.checkpoint
        checkpoint = job.checkpoint.removeprefix(f"s3a://{s3.bucket}/")

        def committed_batch() -> int | None:
            keys = list_keys(client, s3.bucket, checkpoint + "/")
            offsets = {k.rsplit("/", 1)[1] for k in keys if f"{checkpoint}/offsets/" in k}
            commits = {k.rsplit("/", 1)[1] for k in keys if f"{checkpoint}/commits/" in k}
            done = sorted(int(n) for n in offsets & commits if n.isdigit())
            return done[-1] + 1 if done and offsets <= commits else None

        # The checkpoint is in the bucket (S3's listing), and the batch that copied the records is committed there.
        wait_for("a committed batch in the S3 checkpoint, none in flight", committed_batch, 60)
        assert not (Path(job.folder) / "checkpoints").exists()

        # The keys are in no file kmirror wrote, on no command line, and not in the state topic.
        secret = client.secret_key
        for path in Path(job.folder).iterdir():
            if path.is_file() and path.name != "driver.log":
                assert secret not in path.read_text(errors="replace"), path.name
        assert secret not in Path(job.folder, "driver.log").read_text(errors="replace")
        for pid in _group(job.pid):
            assert secret.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes(), pid
        assert secret not in _state_topic_text(target, f"_kmirror.state.s3{tag}")
        assert secret not in (Path(s3.home) / "logs" / "minio.log").read_text(errors="replace")

        os.killpg(job.pid, signal.SIGKILL)
        wait_for("the killed job seen stopped", lambda: not runner.status().jobs[FLOW].running, 60)
        produce(source, topic, 200, 100)  # while it is down

        restarted = time.monotonic()
        result = operations.apply(load_desired_state(checkout / "kmirror.yaml"))
        assert result is not None and not result.failed, result and result.failed
        got = wait_for(
            "all 300 records on the target",
            lambda: (c := copied(target, remote)) and sum(len(v) for v in c.values()) >= 300 and c,
            180,
        )
        print(f"s3a local: apply after kill -9 -> all 300 records in {time.monotonic() - restarted:.1f}s")
        time.sleep(3)  # a duplicate would come in the first batches
        got = copied(target, remote)
        for p, values in got.items():
            duplicates = [v for v, n in Counter(values).items() if n > 1]
            assert not duplicates, f"partition {p}: {len(duplicates)} records copied twice, e.g. {duplicates[:5]}"
            assert values == list(range(p, 300, 2)), f"partition {p}: not every record once and in order"
        again = runner.job(FLOW)
        assert again is not None and again.running
        report = json.loads((Path(again.folder) / "status.json").read_text())
        assert report.get("resumed_from") == "checkpoint", report

        checkout_b = tmp_path_factory.mktemp("checkout-b")
        shutil.copy(checkout / "kmirror.yaml", checkout_b / "kmirror.yaml")
        plan = kmirror("plan", "-f", "kmirror.yaml", "--detailed-exitcode", cwd=checkout_b)
        assert plan.returncode == 0, plan.stdout + plan.stderr
        assert secret not in plan.stdout + plan.stderr

        # The flow removed from the file: stopped, and its S3 checkpoint deleted (with the job's own settings).
        text = (checkout / "kmirror.yaml").read_text()
        (checkout / "kmirror.yaml").write_text(text[: text.index("flows:")] + "flows: []\n")
        removing = time.monotonic()
        result = operations.apply(load_desired_state(checkout / "kmirror.yaml"))
        assert result is not None and not result.failed, result and result.failed
        print(f"s3a local: flow removed -> its S3 checkpoint deleted in {time.monotonic() - removing:.1f}s")
        assert list_keys(client, s3.bucket, checkpoint + "/") == [], "the removed flow's S3 checkpoint is deleted"
    finally:
        runner = operations.job_runner(desired, operations.read_state(desired).recorded())
        runner.stop(FLOW)


def _group(pgid: int) -> list[int]:
    """The processes of a process group (spark-submit's JVM, the Python driver and its workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _state_topic_text(cluster: KafkaCluster, topic: str) -> str:
    consumer = Consumer(
        cluster.config(**{"group.id": f"probe-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    )
    try:
        consumer.subscribe([topic])
        texts, deadline = [], time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                if texts:
                    break
                continue
            if not msg.error():
                texts.append((msg.value() or b"").decode(errors="replace"))
        assert texts, f"nothing read from the state topic {topic}"
        return "\n".join(texts)
    finally:
        consumer.close()
