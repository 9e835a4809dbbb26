"""`kmirror dev up --tls`, the pure parts: the broker's TLS listeners and `kmirror dev status --format json`'s
`tls` entry (the listener itself is exercised end to end in tests/e2e/test_tls_security.py)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import main
from reconciler.devenv.kafka_local import BrokerOptions, LocalCluster, TlsMaterial, _server_properties, _with_tls

pytestmark = pytest.mark.unit


def _props(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in text.splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            props[key] = value  # a later line wins, as in java.util.Properties
    return props


def test_tls_adds_an_mtls_listener_and_a_sasl_ssl_one_for_scram_and_oauthbearer(tmp_path: Path) -> None:
    tls = TlsMaterial(str(tmp_path / "tls"))
    options = BrokerOptions(scram_users=(("u", "pw-not-written"),), tls=tls, oauth=True)
    text = _with_tls(_server_properties(tmp_path, 1, 2, 3, options), 4, 5, options)
    props = _props(text)
    assert props["listeners"].split(",") == [
        "PLAINTEXT://127.0.0.1:1", "CONTROLLER://127.0.0.1:2", "SASL_PLAINTEXT://127.0.0.1:3",
        "SSL://127.0.0.1:4", "SASL_SSL://127.0.0.1:5",
    ]  # fmt: skip
    assert "SSL:SSL" in props["listener.security.protocol.map"].split(",")
    assert props["listener.name.ssl.ssl.client.auth"] == "required"
    assert props["listener.name.sasl_ssl.ssl.client.auth"] == "none"
    assert props["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
    assert props["ssl.keystore.type"] == "PEM" and props["ssl.keystore.location"] == tls.server_bundle_pem
    assert props["ssl.truststore.location"] == tls.ca_pem
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert "pw-not-written" not in text


def test_without_tls_nothing_changes(tmp_path: Path) -> None:
    base = _server_properties(tmp_path, 1, 2, None, BrokerOptions())
    assert _with_tls(base, None, None, BrokerOptions()) == base


def test_dev_status_json_names_the_tls_listener_and_pem_files(tmp_path: Path) -> None:
    for name, port in (("source", 19092), ("target", 29092)):
        home = tmp_path / name
        home.mkdir()
        record = LocalCluster(
            name=name, version="x", home=str(home), port=port, controller_port=port + 1,
            tls_port=port + 5, tls_dir=str(tmp_path / "tls"),
        )  # fmt: skip
        (home / "cluster.json").write_text(json.dumps(asdict(record)))
    result = CliRunner().invoke(main, ["dev", "status", "--root", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["clusters"]["source"]["bootstrap_servers"] == "127.0.0.1:19092"
    assert doc["clusters"]["source"]["tls"] == {
        "bootstrap_servers": "127.0.0.1:19097",
        "ca_pem": str(tmp_path / "tls" / "ca.pem"),
        "client_cert_pem": str(tmp_path / "tls" / "client.pem"),
        "client_key_pem": str(tmp_path / "tls" / "client.key"),
    }
    assert doc["clusters"]["target"]["tls"]["bootstrap_servers"] == "127.0.0.1:29097"
