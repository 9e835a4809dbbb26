"""The job's schema translation settings: registries' urls, credentials resolved in the driver into the
Authorization value under a name Spark redacts, learnt by the scrubber; nothing for a flow without sync.schemas."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from reconciler.jobcontract.spec import EffectiveSpec, JobSpec
from reconciler.replication.schema_ids import schema_id_settings
from reconciler.spec import load_text
from reconciler.spec.redaction import scrub

pytestmark = pytest.mark.unit


def _spec(sync: bool) -> JobSpec:
    desired = load_text(
        f"""
version: 1
clusters:
  a:
    bootstrap_servers: "127.0.0.1:1"
    schema_registry: {{url: "https://sr-a:8081", basic_auth: {{username: svc, password: "${{env:SR_A_PASSWORD}}"}}}}
  b:
    bootstrap_servers: "127.0.0.1:2"
    schema_registry: {{url: "http://sr-b:8080/apis/ccompat/v7", bearer_token: "${{env:SR_B_TOKEN}}"}}
state: {{cluster: b}}
flows:
  - {{name: f, source: a, target: b, sync: {{schemas: {str(sync).lower()}}}}}
"""
    ).state
    return JobSpec("f", EffectiveSpec.of(desired, "f"), desired.flow_digest("f"), Path("."))


def test_credentials_become_redacted_authorization_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SR_A_PASSWORD", "pw-a-0123456789")
    monkeypatch.setenv("SR_B_TOKEN", "tok-b-0123456789")
    spec = _spec(True)
    settings = schema_id_settings(spec, spec.flow)
    basic = "Basic " + base64.b64encode(b"svc:pw-a-0123456789").decode()
    assert settings == {
        "kmirror.schemas.source.url": "https://sr-a:8081",
        "kmirror.schemas.source.auth.token": basic,
        "kmirror.schemas.target.url": "http://sr-b:8080/apis/ccompat/v7",
        "kmirror.schemas.target.auth.token": "Bearer tok-b-0123456789",
    }
    assert "pw-a" not in str(spec.effective) and "tok-b" not in str(spec.effective)  # the spec keeps references
    assert basic.split()[1] not in scrub(f"producer config {basic}")  # the derived value is scrubbed too
    assert schema_id_settings(_spec(False), _spec(False).flow) == {}


def test_the_registry_ca_travels_as_pem_text_and_only_from_allowed_folders(tmp_path: Path) -> None:
    from reconciler.spec.issues import SecretResolutionError
    from reconciler.spec.schema_registry import RegistryTlsSpec, SchemaRegistrySpec, connection

    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    spec = SchemaRegistrySpec(url="https://sr:8081", tls=RegistryTlsSpec(ca_location="ca.pem"))
    assert connection(spec, tmp_path).ca_file == str(tmp_path / "ca.pem")
    outside = SchemaRegistrySpec(url="https://sr:8081", tls=RegistryTlsSpec(ca_location="/etc/hostname"))
    with pytest.raises(SecretResolutionError, match="outside the folders kmirror may read"):
        connection(outside, tmp_path)


def test_a_flow_without_sync_schemas_keeps_its_digest_when_a_registry_is_added() -> None:
    base = """
version: 1
clusters:
  a: {bootstrap_servers: "127.0.0.1:1"REG}
  b: {bootstrap_servers: "127.0.0.1:2"}
state: {cluster: b}
flows:
  - {name: f, source: a, target: b}
"""
    without = load_text(base.replace("REG", "")).state
    with_registry = load_text(base.replace("REG", ', schema_registry: {url: "http://sr:8081"}')).state
    assert without.flow_digest("f") == with_registry.flow_digest("f")  # no redeploy of flows that do not sync
    assert "schema_registry" not in with_registry.flow_effective_spec("f")["clusters"]["a"]
