"""Pure parts of the local-cluster tooling: broker configuration, jar names, cluster ids."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest

from reconciler.devenv.jars import _artifact_name
from reconciler.devenv.kafka_local import BrokerOptions, _random_cluster_id, _server_properties

pytestmark = pytest.mark.unit


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


@pytest.mark.parametrize(
    ("jar", "name"),
    [
        ("kafka-clients-3.9.0.jar", "kafka-clients"),
        ("spark-sql-kafka-0-10_2.13-4.0.0.jar", "spark-sql-kafka-0-10_2.13"),
        ("scala-library-2.13.16.jar", "scala-library"),
        ("jsr305-3.0.0.jar", "jsr305"),
        ("hadoop-client-runtime-3.4.1.jar", "hadoop-client-runtime"),
    ],
)
def test_artifact_name_drops_the_version(jar: str, name: str) -> None:
    assert _artifact_name(jar) == name


def test_plain_broker_is_kraft_combined_on_loopback(tmp_path: Path) -> None:
    props = _props(_server_properties(tmp_path, 19092, 19093, None, BrokerOptions()))
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert props["auto.create.topics.enable"] == "false"
    assert "authorizer.class.name" not in props
    assert "sasl.enabled.mechanisms" not in props


def test_authorizer_and_scram_listener(tmp_path: Path) -> None:
    options = BrokerOptions(authorizer=True, scram_users=(("alice", "s3cret"),))
    props = _props(_server_properties(tmp_path, 1, 2, 3, options))
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert props["super.users"] == "User:ANONYMOUS;User:admin"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert "SASL_PLAINTEXT://127.0.0.1:3" in props["advertised.listeners"]
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-256,SCRAM-SHA-512"
    # The password is given at format time only; it is never written into server.properties.
    assert "s3cret" not in _server_properties(tmp_path, 1, 2, 3, options)


def test_cluster_id_is_a_kafka_uuid() -> None:
    for _ in range(200):
        cid = _random_cluster_id()
        assert len(cid) == 22 and not cid.startswith("-")
        assert len(base64.urlsafe_b64decode(cid + "==")) == 16


def test_a_port_block_is_claimed_once_among_live_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two clusters started at the same moment (two test workers) must not pick overlapping ports: each block
    is claimed by one live process; a claim left by a process that is gone is taken over."""
    from reconciler.devenv import kafka_local

    monkeypatch.setattr(kafka_local, "_claims_folder", lambda: tmp_path)
    assert kafka_local._claim(12300)
    assert not kafka_local._claim(12300)  # this process holds it
    (tmp_path / "12400").write_text(f"{os.getpid()}\n")
    assert not kafka_local._claim(12400)  # another live claimant (here: this process, by its file)
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / "12500").write_text(f"{gone.pid}\n")
    assert kafka_local._claim(12500)
    assert (tmp_path / "12500").read_text().strip() == str(os.getpid())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["12300", "12400", "12500"]  # no temporary files left
    base = kafka_local._free_base(3)
    assert base % kafka_local._PORT_BLOCK == 0 and (tmp_path / str(base)).exists()
