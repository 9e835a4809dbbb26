"""Secret references: resolved only at use, never shown resolved, clear errors when missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.spec import ClusterSpec, DesiredState, SecretRef, SecretResolutionError, kafka_client_config
from reconciler.spec.client_config import java_client_properties

pytestmark = pytest.mark.unit


def cluster(**client: object) -> ClusterSpec:
    return ClusterSpec.model_validate({"bootstrap_servers": "k:9092", "client": client})


def test_reference_is_kept_and_shown_as_written() -> None:
    spec = cluster(**{"sasl.password": "${env:PW}", "security.protocol": "SASL_SSL"})
    value = spec.client["sasl.password"]
    assert isinstance(value, SecretRef)
    assert str(value) == "${env:PW}" and repr(value) == "SecretRef('${env:PW}')"
    assert spec.model_dump()["client"]["sasl.password"] == "${env:PW}"
    assert "hunter2" not in repr(spec) + spec.model_dump_json()


def test_resolution_at_use(tmp_path: Path) -> None:
    (tmp_path / "pw.txt").write_text("from-file\n")
    spec = cluster(**{"sasl.password": "${env:PW}", "ssl.key.password": "${file:pw.txt}", "linger.ms": 5})
    config = kafka_client_config(spec, base_dir=tmp_path, environ={"PW": "hunter2"})
    assert config == {
        "bootstrap.servers": "k:9092",
        "sasl.password": "hunter2",
        "ssl.key.password": "from-file",
        "linger.ms": 5,
    }
    assert "hunter2" not in repr(spec)


def test_missing_secrets_are_all_named(tmp_path: Path) -> None:
    spec = cluster(**{"sasl.password": "${env:NOPE}", "ssl.key.password": "${file:no/such/file}"})
    with pytest.raises(SecretResolutionError) as caught:
        kafka_client_config(spec, alias="cloud", base_dir=tmp_path, environ={})
    message = str(caught.value)
    assert "clusters.cloud.client.sasl.password: environment variable NOPE is not set (export NOPE" in message
    assert f"clusters.cloud.client.ssl.key.password: cannot read secret file {tmp_path}/no/such/file" in message


def test_embedded_reference_and_escape() -> None:
    ref = SecretRef('x required username="u" password="${env:P}"; cost: $${literal}')
    assert ref.resolve(environ={"P": "s3"}) == 'x required username="u" password="s3"; cost: ${literal}'
    assert [str(r) for r in ref.references] == ["${env:P}"]


def test_jaas_and_username_password_translate_between_clients() -> None:
    spec = cluster(**{"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u", "sasl.password": "${env:P}"})
    java = java_client_properties(spec, environ={"P": "pw"})
    assert java["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="pw";'
    )
    assert "sasl.password" not in java
    jaas = cluster(**{"sasl.jaas.config": 'x.PlainLoginModule required username="u" password="${env:P}";'})
    assert kafka_client_config(jaas, environ={"P": "pw"}) == {
        "bootstrap.servers": "k:9092",
        "sasl.username": "u",
        "sasl.password": "pw",
    }


def test_desired_state_client_config_uses_the_file_folder(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("p")
    state = DesiredState.model_validate(
        {
            "version": 1,
            "clusters": {"a": {"bootstrap_servers": "a:1", "client": {"sasl.password": "${file:pw}"}}},
            "state": {"cluster": "a"},
        }
    ).with_source_path(tmp_path / "kmirror.yaml")
    assert state.client_config("a")["sasl.password"] == "p"
