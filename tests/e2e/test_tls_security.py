"""Production security end to end, on local clusters that share a private CA (the `tls_pair` fixture):

- plan, apply and replicate from a source reached over mTLS (SSL listener, client certificate required) to a
  target reached over SASL_SSL with SCRAM-SHA-512, both stacks (librdkafka in the CLI, Java in Spark) configured
  from the same librdkafka-style PEM keys; the plaintext ports appear nowhere kmirror or its job looked;
- the sentinel: one random secret in every secret reference of the desired state (`${env:}` and `${file:}`), every
  command run, failing ones included (a client property librdkafka rejects, an MM2 import), and no output,
  written file, state record, log or process command line holds it;
- OAUTHBEARER (unsecured JWT) on both stacks over SASL_SSL;
- a client without the certificate gets nothing: there is no fallback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reconciler.runners import LocalRunner
from reconciler.spec import kafka_client_config
from reconciler.spec.loader import load
from tests.conftest import SCRAM_USER, KafkaCluster, applied_state_key

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SENTINEL_ENV = "KMIRROR_TEST_SENTINEL"


def _key(desired: Any, target: KafkaCluster) -> str:
    """The applied jobs' state key; the state cluster's id, asked on its plaintext listener (the same cluster)."""
    return applied_state_key(desired, {"bootstrap.servers": target.bootstrap_servers})


def _copy_tls(cluster: KafkaCluster, folder: Path) -> None:
    assert cluster.tls is not None
    (folder / "tls").mkdir(exist_ok=True)
    for name in (cluster.tls.ca_pem, cluster.tls.client_cert_pem, cluster.tls.client_key_pem):
        shutil.copy(name, folder / "tls" / Path(name).name)


def _mtls(cluster: KafkaCluster, folder: Path, **extra: object) -> dict[str, object]:
    """A librdkafka client for the SSL listener, with the fixture's CA and client certificate."""
    assert cluster.tls is not None
    return {
        "bootstrap.servers": cluster.tls_bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": cluster.tls.ca_pem,
        "ssl.certificate.location": cluster.tls.client_cert_pem,
        "ssl.key.location": cluster.tls.client_key_pem,
        **extra,
    }


def _produce(cluster: KafkaCluster, folder: Path, topic: str, count: int) -> None:
    admin = AdminClient(_mtls(cluster, folder))
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=30)
    producer = Producer(_mtls(cluster, folder))
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0


def _consume(
    cluster: KafkaCluster, folder: Path, topic: str, count: int, timeout: float = 240, partitions: int = 2
) -> int:
    consumer = Consumer(
        _mtls(cluster, folder, **{"group.id": f"verify-{uuid.uuid4().hex}", "enable.auto.commit": False})
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    deadline = time.monotonic() + timeout
    while got < count and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(500, timeout=2) if m.error() is None)
    consumer.close()
    return got


def _kmirror(folder: Path, env: dict[str, str], outputs: list[str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([sys.executable, "-m", "reconciler.cli", *args], cwd=folder, env=env,
                           capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
        outputs.extend([r.stdout, r.stderr])
        return r

    return run


def _mtls_and_scram_spec(source: KafkaCluster, target: KafkaCluster, cloud_extra: str = "") -> str:
    return f"""
version: 1
clusters:
  onprem:
    bootstrap_servers: "{source.tls_bootstrap_servers}"
    client:
      security.protocol: SSL
      ssl.ca.location: tls/ca.pem
      ssl.certificate.location: tls/client.pem
      ssl.key.location: tls/client.key
  cloud:
    bootstrap_servers: "{target.sasl_ssl_bootstrap_servers}"
    client:
      security.protocol: SASL_SSL
      sasl.mechanism: SCRAM-SHA-512
      sasl.username: {SCRAM_USER}
      sasl.password: "${{env:{SENTINEL_ENV}}}"
      ssl.ca.location: tls/ca.pem{cloud_extra}
state: {{cluster: cloud}}
spark:
  deploy: local
  master: "local[2]"
  checkpoint_root: checkpoints
  conf: {{spark.hadoop.fs.s3a.secret.key: "${{file:secrets/s3.key}}", spark.kmirror.triggerInterval: "10 seconds"}}
flows:
  - name: secure
    source: onprem
    target: cloud
    topics: {{include: ['tls\\..*']}}
    naming: {{policy: prefix}}
    offsets: {{emit_checkpoints: false}}
"""


def test_mtls_and_sasl_ssl_scram_replicate_and_the_sentinel_secret_is_nowhere(
    tmp_path: Path, tls_pair: tuple[KafkaCluster, KafkaCluster], scram_secret: str
) -> None:
    source, target = tls_pair
    _copy_tls(source, tmp_path)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "s3.key").write_text(scram_secret + "\n")  # the same sentinel, read by ${file:}
    _produce(source, tmp_path, "tls.orders", 300)
    spec = tmp_path / "kmirror.yaml"
    spec.write_text(_mtls_and_scram_spec(source, target))
    # A client property librdkafka rejects, whose value is the secret: librdkafka quotes it in its error.
    bad = tmp_path / "bad.yaml"
    bad.write_text(_mtls_and_scram_spec(source, target).replace("SCRAM-SHA-512", f'"${{env:{SENTINEL_ENV}}}"'))
    mm2 = tmp_path / "secrets" / "mm2.properties"  # an MM2 config with the secret inline, as many are
    mm2.write_text(
        f"clusters = a, b\na.bootstrap.servers = a:9093\nb.bootstrap.servers = b:9093\n"
        f"b.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="u" password="{scram_secret}";\na->b.enabled = true\na->b.topics = x.*\n'
    )
    env = {**os.environ, SENTINEL_ENV: scram_secret, "NO_COLOR": "1"}
    outputs: list[str] = []
    kmirror = _kmirror(tmp_path, env, outputs)
    try:
        assert kmirror("validate", "-f", str(spec)).returncode == 0
        failed = kmirror("plan", "-f", str(bad))
        assert failed.returncode == 1 and "Unsupported SASL mechanism: ***" in failed.stderr, failed.stderr
        assert kmirror("--debug", "plan", "-f", str(bad)).returncode == 1  # the traceback too
        imported = kmirror("import", "mm2", str(mm2))
        assert imported.returncode == 0, imported.stderr
        plan = kmirror("plan", "-f", str(spec), "--format", "json", "--out", str(tmp_path / "plan.json"))
        assert plan.returncode == 0, plan.stderr
        assert kmirror("plan", "-f", str(spec), "--format", "markdown").returncode == 0
        applied = kmirror("apply", "-f", str(spec), str(tmp_path / "plan.json"))
        assert applied.returncode == 0, applied.stdout + applied.stderr

        assert _consume(target, tmp_path, "onprem.tls.orders", 300) == 300
        # The sink's interceptor (Java, its own producer) wrote MM2 offset-syncs into the source over mTLS.
        assert _consume(source, tmp_path, "mm2-offset-syncs.cloud.internal", 1, timeout=60, partitions=1) >= 1

        status = kmirror("status", "-f", str(spec), "--format", "json")
        assert status.returncode == 0, status.stderr
        kmirror("status", "-f", str(spec))
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                assert scram_secret.encode() not in cmdline.read_bytes(), f"secret in process {cmdline.parent.name}"
            except OSError:
                continue
        listed = kmirror("state", "list", "-f", str(spec)).stdout
        kmirror("state", "history", "-f", str(spec), "--format", "json")
        for line in listed.splitlines():
            kmirror("state", "show", "-f", str(spec), line.split()[0])
    finally:
        desired = load(spec).state
        LocalRunner(tmp_path, desired.spark, state_topic=desired.state.topic, state_key=_key(desired, target)).stop(
            "secure"
        )

    assert all(scram_secret not in o for o in outputs)
    state = Consumer(_mtls(target, tmp_path, **{"group.id": "raw", "enable.auto.commit": False}))
    state.assign([TopicPartition("_kmirror.state", 0, 0)])
    raw = b""
    for _ in range(10):
        raw += b"".join((m.key() or b"") + (m.value() or b"") for m in state.consume(1000, timeout=2))
    state.close()
    assert b"resource/" in raw and scram_secret.encode() not in raw
    # Every file but the test's own inputs that hold the secret (secrets/: the ${file:} target and the MM2 config),
    # and the job's folder wherever the runner keeps it.
    job_folder = (
        LocalRunner(tmp_path, desired.spark, state_topic=desired.state.topic, state_key=_key(desired, target))
        .folder("secure")
        .path
    )
    written = [
        p for folder in (tmp_path, job_folder) for p in folder.rglob("*") if p.is_file() and p.parent.name != "secrets"
    ]
    assert any(p.name == "driver.log" for p in written) and any(p.name == "plan.json" for p in written)
    plaintext = [c.bootstrap_servers.encode() for c in (source, target)]
    for p in written:
        data = p.read_bytes()
        assert scram_secret.encode() not in data, f"secret written to {p}"
        if "checkpoints" not in p.parts:
            assert not any(port in data for port in plaintext), f"a plaintext listener is named in {p}"
        if p.name in ("driver.log", "plan.json", "spec.json", "status.json"):  # by kmirror and its job
            assert p.stat().st_mode & 0o077 == 0, f"{p} is readable by others"


def test_oauthbearer_unsecured_jwt_on_both_stacks(tmp_path: Path, tls_pair: tuple[KafkaCluster, KafkaCluster]) -> None:
    source, target = tls_pair
    _copy_tls(source, tmp_path)
    _produce(source, tmp_path, "oauth.events", 200)
    client = (
        "{security.protocol: SASL_SSL, sasl.mechanism: OAUTHBEARER, sasl.oauthbearer.config: 'principal=admin', "
        "ssl.ca.location: tls/ca.pem}"
    )
    spec = tmp_path / "kmirror.yaml"
    spec.write_text(
        f"""
version: 1
clusters:
  east: {{bootstrap_servers: "{source.sasl_ssl_bootstrap_servers}", client: {client}}}
  west: {{bootstrap_servers: "{target.sasl_ssl_bootstrap_servers}", client: {client}}}
state: {{cluster: west, topic: _kmirror.state.oauth}}
spark:
  deploy: local
  master: "local[2]"
  checkpoint_root: checkpoints
  conf: {{spark.kmirror.triggerInterval: "10 seconds"}}  # real-time mode, two tasks; a quick stop at the end
flows:
  - name: oauth
    source: east
    target: west
    topics: {{include: ['oauth\\..*']}}
    naming: {{policy: prefix}}
    offsets: {{emit_checkpoints: false}}
"""
    )
    kmirror = _kmirror(tmp_path, {**os.environ, "NO_COLOR": "1"}, [])
    try:
        plan = kmirror("plan", "-f", str(spec), "--detailed-exitcode")
        assert plan.returncode == 2, plan.stdout + plan.stderr
        applied = kmirror("apply", "-f", str(spec), "--auto-approve")
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert _consume(target, tmp_path, "east.oauth.events", 200) == 200
        again = kmirror("plan", "-f", str(spec), "--detailed-exitcode")
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        desired = load(spec).state
        LocalRunner(tmp_path, desired.spark, state_topic=desired.state.topic, state_key=_key(desired, target)).stop(
            "oauth"
        )


def test_without_the_client_certificate_the_mtls_listener_gives_nothing(
    tmp_path: Path, tls_pair: tuple[KafkaCluster, KafkaCluster]
) -> None:
    source, _ = tls_pair
    _copy_tls(source, tmp_path)
    spec = tmp_path / "kmirror.yaml"
    spec.write_text(
        f"""
version: 1
clusters:
  onprem:
    bootstrap_servers: "{source.tls_bootstrap_servers}"
    client: {{security.protocol: SSL, ssl.ca.location: tls/ca.pem}}
state: {{cluster: onprem}}
"""
    )
    desired = load(spec).state
    with pytest.raises(KafkaException):
        AdminClient(kafka_client_config(desired.clusters["onprem"], base_dir=tmp_path)).list_topics(timeout=5)
    with_cert = {
        **kafka_client_config(desired.clusters["onprem"], base_dir=tmp_path),
        "ssl.certificate.location": str(tmp_path / "tls" / "client.pem"),
        "ssl.key.location": str(tmp_path / "tls" / "client.key"),
    }
    assert AdminClient(with_cert).list_topics(timeout=10).brokers
