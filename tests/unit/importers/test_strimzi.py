"""`kmirror import mm2` on Strimzi `KafkaMirrorMaker2` resources (Strimzi's own examples), connector JSON and
properties told apart by content, and input errors that name the file and the line."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import main
from reconciler.importers.mm2_config import MM2ImportError, import_files, input_format
from reconciler.spec import load

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
STRIMZI = FIXTURES / "strimzi"


def _import_and_validate(tmp_path: Path, *inputs: Path) -> tuple[Path, str]:
    out = tmp_path / "kmirror.yaml"
    imported = CliRunner().invoke(main, ["import", "mm2", *map(str, inputs), "-o", str(out)])
    assert imported.exit_code == 0, imported.output
    validated = CliRunner().invoke(main, ["validate", "-f", str(out)])
    assert validated.exit_code == 0, validated.output
    return out, imported.stderr


def test_strimzis_example_imports_into_a_file_that_validates(tmp_path: Path) -> None:
    out, warnings = _import_and_validate(tmp_path, STRIMZI / "kafka-mirror-maker-2.yaml")
    state = load(out).state
    assert {a: c.bootstrap_servers for a, c in state.clusters.items()} == {
        "my-source-cluster": "my-source-cluster-kafka-bootstrap:9092",
        "my-target-cluster": "my-target-cluster-kafka-bootstrap:9092",
    }
    (flow,) = state.flows
    assert (flow.source, flow.target) == ("my-source-cluster", "my-target-cluster")
    assert state.state.cluster == "my-target-cluster"
    assert flow.topics.include == (".*",) and flow.groups.include == (".*",)
    assert flow.topic_defaults.replication_factor == 1  # sourceConnector.config.replication.factor
    assert flow.sync.acls is False  # sync.topic.acls.enabled: "false"
    assert flow.heartbeats.enabled and flow.offsets.emit_checkpoints  # all three connectors are there
    assert flow.remote_topic("orders") == "my-source-cluster.orders"  # MM2's default policy
    # what does not map is named, as a warning each
    assert "warning: " in warnings and "spec.replicas" in warnings and "spec.connectCluster" in warnings
    assert "config.storage.replication.factor" in warnings


def test_tls_example_keeps_tls_and_asks_for_the_ca_without_heartbeats(tmp_path: Path) -> None:
    out, warnings = _import_and_validate(tmp_path, STRIMZI / "kafka-mirror-maker-2-tls.yaml")
    state = load(out).state
    client = {k: str(v) for k, v in state.clusters["cluster-a"].client.items()}
    assert client == {"security.protocol": "SSL", "ssl.ca.location": "${env:CLUSTER_A_SSL_CA_LOCATION}"}
    assert "cluster-a-cluster-ca-cert/ca.crt" in warnings and "tasksMax" in warnings
    (flow,) = state.flows
    assert flow.topic_defaults.replication_factor == -1 and not flow.heartbeats.enabled
    assert "CLUSTER_A_SSL_CA_LOCATION" in out.read_text().splitlines()[2]  # the header lists what to set


def test_identity_replication_policy_becomes_identity_naming(tmp_path: Path) -> None:
    out, warnings = _import_and_validate(tmp_path, STRIMZI / "kafka-mirror-maker-2-custom-replication-policy.yaml")
    (flow,) = load(out).state.flows
    assert flow.naming.policy == "identity" and flow.remote_topic("orders") == "orders"
    assert "separator" not in warnings  # irrelevant with identity naming


V1_SCRAM = """\
apiVersion: kafka.strimzi.io/v1
kind: KafkaMirrorMaker2
metadata:
  name: central
spec:
  replicas: 3
  target:
    alias: central
    bootstrapServers: central-kafka-bootstrap:9093
    groupId: mm2-group
    tls: {trustedCertificates: [{secretName: central-ca, certificate: ca.crt}]}
    authentication:
      type: scram-sha-512
      username: mirror
      passwordSecret: {secretName: mirror-user, password: password}
  sourceClusters:
    - alias: east
      bootstrapServers: east-kafka-bootstrap:9092
  mirrors:
    - source: {alias: east}
      sourceConnector:
        config: {replication.factor: 3, topics.exclude: "internal\\\\..*"}
      checkpointConnector:
        config: {sync.group.offsets.enabled: "true"}
      topicsPattern: "orders\\\\..*,payments"
      groupsExcludePattern: "console-.*"
"""


def test_the_v1_layout_with_scram_authentication(tmp_path: Path) -> None:
    manifest = tmp_path / "mm2.yaml"
    manifest.write_text(V1_SCRAM)
    out, warnings = _import_and_validate(tmp_path, manifest)
    state = load(out).state
    client = {k: str(v) for k, v in state.clusters["central"].client.items()}
    assert client["security.protocol"] == "SASL_SSL" and client["sasl.mechanism"] == "SCRAM-SHA-512"
    assert client["sasl.username"] == "mirror" and client["sasl.password"] == "${env:CENTRAL_SASL_PASSWORD}"
    assert "mirror-user/password" in warnings and "groupId" in warnings
    (flow,) = state.flows
    assert (flow.source, flow.target, flow.topic_defaults.replication_factor) == ("east", "central", 3)
    assert flow.topics.include == (r"orders\..*", "payments") and flow.groups.exclude == ("console-.*",)
    assert flow.sync.group_offsets and flow.topic_matches("payments") and not flow.topic_matches("paymentsx")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            V1_SCRAM.replace("source: {alias: east}", "source: {alias: west}"),
            "mm2.yaml:20: spec.mirrors[0].source.alias: 'west'",
        ),
        ("apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker\nmetadata: {name: x}\n", "MirrorMaker 1"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "mm2.yaml:1: kind 'ConfigMap'"),
        ("hello: [1, 2]\n", "mm2.yaml: unknown input format"),
        ("just some words\n", "mm2.yaml: unknown input format"),
        ('{"name": "x", "config": {"connector.class": "FileStreamSource"}}', "is not an MM2 connector"),
        ('{"name": "x", "config": {', "mm2.yaml:1:"),
    ],
    ids=["unknown alias", "mm1", "other kind", "other yaml", "text", "other connector", "broken json"],
)
def test_input_errors_name_the_file_and_line(text: str, needle: str, tmp_path: Path) -> None:
    path = tmp_path / "mm2.yaml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["import", "mm2", str(path)])
    assert result.exit_code == 1
    assert needle in result.stderr and "bug in kmirror" not in result.stderr


def test_formats_are_told_apart_and_not_mixed() -> None:
    properties = (FIXTURES / "mm2" / "connect-mirror-maker.properties").read_text()
    connector = (FIXTURES / "mm2" / "mm2-source-connector.json").read_text()
    strimzi = (STRIMZI / "kafka-mirror-maker-2.yaml").read_text()
    assert [input_format("f", t) for t in (properties, connector, strimzi)] == ["properties", "connector", "strimzi"]
    with pytest.raises(MM2ImportError, match=r"one format at a time.*a.json \(Kafka Connect connector JSON\)"):
        import_files({"a.json": connector, "b.yaml": strimzi})


def test_an_import_that_would_not_validate_names_the_inputs_not_a_phantom_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reconciler.cli import import_mm2
    from reconciler.importers.mm2_config import ImportResult

    bad = ImportResult("version: 1\nclusters: {}\nstate: {cluster: x}\n", {"clusters": {}, "flows": []})
    monkeypatch.setattr(import_mm2, "import_files", lambda texts: bad)
    source = STRIMZI / "kafka-mirror-maker-2.yaml"
    result = CliRunner().invoke(main, ["import", "mm2", str(source)])
    assert result.exit_code == 1
    assert f"Error: {source}: the translated configuration would not be a valid kmirror.yaml" in result.stderr
    assert "clusters: must not be empty" in result.stderr and "kmirror.yaml:" not in result.stderr
