"""`kmirror import mm2` on the seed documents' MM2 configurations."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import main
from reconciler.importers.mm2_config import import_files, import_properties, parse_properties
from reconciler.spec import load_text

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mm2"
PROPERTIES = FIXTURES / "connect-mirror-maker.properties"
CONNECTORS = sorted(FIXTURES.glob("*.json"))


def test_properties_example_imports_as_mm2_would_run_it() -> None:
    result = import_files({str(PROPERTIES): PROPERTIES.read_text()})
    state = load_text(result.yaml_text).state
    assert set(state.clusters) == {"source", "target"}
    assert state.clusters["source"].bootstrap_servers == "apache-kafka-source:9092"
    (flow,) = state.flows
    assert (flow.source, flow.target, flow.name) == ("source", "target", "source-to-target")
    assert flow.topics.include == (".*",) and flow.groups.include == (".*",)
    assert flow.naming.policy == "prefix" and flow.remote_topic("orders") == "source.orders"
    assert flow.topic_defaults.replication_factor == 1
    assert flow.sync.configs and flow.sync.acls and not flow.sync.group_offsets  # MM2 defaults
    assert flow.offsets.emit_checkpoints and flow.heartbeats.enabled
    assert flow.offsets.checkpoint_interval.total_seconds() == 60
    # what MM2 would do with the topics: replicate everything but internal ones and cycles
    assert flow.topic_matches("orders") and not flow.topic_matches("__consumer_offsets")
    assert not flow.topic_matches("target.orders")
    assert any("source -> target.enabled" in n for n in result.notes)
    assert any(n.startswith("tasks.max:") for n in result.notes)
    assert "#   - tasks.max:" in result.yaml_text


def test_connector_json_example_imports_as_one_flow() -> None:
    result = import_files({str(p): p.read_text() for p in CONNECTORS})
    state = load_text(result.yaml_text).state
    (flow,) = state.flows
    assert (flow.source, flow.target) == ("emrsource", "emrdest")
    assert state.clusters["emrdest"].bootstrap_servers == "core-1-1:9092,core-1-2:9092,core-1-3:9092"
    assert state.clusters["emrsource"].client == {"security.protocol": "PLAINTEXT"}
    assert flow.topics.include == ("^foo.*",)
    assert flow.topic_matches("foo.bar") and not flow.topic_matches("bar")
    assert flow.topic_defaults.replication_factor == 3
    assert flow.offsets.checkpoint_interval.total_seconds() == 20
    assert flow.heartbeats.interval.total_seconds() == 20
    assert flow.replication.producer == {"enable.idempotence": "true"}
    assert any("';' between brokers" in n for n in result.notes)


def test_without_checkpoint_and_heartbeat_connectors_those_are_off() -> None:
    source_only = FIXTURES / "mm2-source-connector.json"
    state = load_text(import_files({"s.json": source_only.read_text()}).yaml_text).state
    assert not state.flows[0].offsets.emit_checkpoints
    assert not state.flows[0].heartbeats.enabled


def test_secrets_become_env_references() -> None:
    text = """clusters = a, b
a.bootstrap.servers = a:9092
b.bootstrap.servers = b:9092
b.security.protocol = SASL_SSL
b.sasl.mechanism = PLAIN
b.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \\
    username="mm2" password="t0ps3cret";
a.ssl.truststore.password = changeit
a->b.enabled = true
a->b.topics = orders.*, payments
a->b.topics.blacklist = orders\\\\.tmp
replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
sync.group.offsets.enabled = true
emit.checkpoints.interval.seconds = 5
offset.lag.max = 50
"""
    result = import_properties(text)
    assert "t0ps3cret" not in result.yaml_text and "changeit" not in result.yaml_text
    state = load_text(result.yaml_text).state
    assert state.clusters["b"].client["sasl.username"] == "mm2"
    assert str(state.clusters["b"].client["sasl.password"]) == "${env:B_SASL_PASSWORD}"
    assert str(state.clusters["a"].client["ssl.truststore.password"]) == "${env:A_SSL_TRUSTSTORE_PASSWORD}"
    assert result.env_vars == ["A_SSL_TRUSTSTORE_PASSWORD", "B_SASL_PASSWORD"]
    (flow,) = state.flows
    assert flow.naming.policy == "identity" and flow.remote_topic("orders") == "orders"
    assert flow.topics.include == ("orders.*", "payments") and flow.topics.exclude == (r"orders\.tmp",)
    assert flow.sync.group_offsets and flow.offsets.offset_lag_max == 50
    assert flow.topic_defaults.replication_factor == 2  # MM2's default, written out


def test_java_properties_parsing() -> None:
    props, notes = parse_properties("a = 1\nb: 2\nc 3\n# x = 9\n! y\nd = long \\\n   value\ne=\\u0041\\t\n")
    assert props == {"a": "1", "b": "2", "c": "3", "d": "long value", "e": "A\t"}
    assert notes == []


def test_cli_writes_a_valid_file(tmp_path: Path) -> None:
    out = tmp_path / "kmirror.yaml"
    result = CliRunner().invoke(main, ["import", "mm2", str(PROPERTIES), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "warning: tasks.max" in result.output
    assert CliRunner().invoke(main, ["validate", "-f", str(out)]).exit_code == 0
    again = CliRunner().invoke(main, ["import", "mm2", str(PROPERTIES), "-o", str(out)])
    assert again.exit_code == 1 and "--force" in again.output
