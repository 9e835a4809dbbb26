"""Client quotas through Kafka's Java Admin client, without a broker or a JVM: the request the adapter writes on the
tool's stdin (properties, secrets included, never on its command line), the answers it decodes into one outcome per
client id, and the clear error when Java or the Kafka client jars are missing."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from reconciler.artifacts import quota_tool
from reconciler.artifacts.jars import ArtifactError
from reconciler.kafka_clients import client_quotas
from reconciler.kafka_clients.admin import KafkaAdmin
from reconciler.kafka_clients.client_quotas import ClientQuotaError, QuotaResult
from reconciler.spec.redaction import remember

pytestmark = pytest.mark.unit

SECRET = "s3cr3t-pa55word"
PROPS = {
    "bootstrap.servers": "broker:9093",
    "security.protocol": "SASL_SSL",
    "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required password="{SECRET}";',
}


def test_a_describe_request_carries_the_properties_the_ids_and_the_timeout() -> None:
    request = json.loads(client_quotas.describe_request(PROPS, ["b", "a", "b"], timeout=7.5))
    assert request == {"properties": PROPS, "timeout_ms": 7500, "op": "describe", "client_ids": ["a", "b"]}


def test_an_alter_request_sets_numbers_and_removes_with_null_all_in_one_batch() -> None:
    request = json.loads(
        client_quotas.alter_request(
            PROPS, {"x": {"consumer_byte_rate": 10_000_000}, "y": {"producer_byte_rate": None}}, timeout=30
        )
    )
    assert request["op"] == "alter"
    assert request["alterations"] == {"x": {"consumer_byte_rate": 1e7}, "y": {"producer_byte_rate": None}}


def test_answers_decode_into_quotas_and_one_result_per_client_id_in_the_order_asked() -> None:
    quotas = client_quotas.decode_describe({"quotas": {"x": {"consumer_byte_rate": 1.0e7}}})
    assert quotas == {"x": {"consumer_byte_rate": 10_000_000.0}}
    answer = {
        "results": {"y": {"ok": False, "error": "InvalidRequestException: bad", "transient": False}, "x": {"ok": True}}
    }
    assert client_quotas.decode_alter(answer, ["x", "y", "z"]) == [
        QuotaResult("x", True),
        QuotaResult("y", False, "InvalidRequestException: bad"),
        QuotaResult("z", False, "the client-quota tool gave no result for this client id"),
    ]
    # The whole call failed (no broker answered): every id fails with it, retryable.
    failed = client_quotas.decode_alter({"error": "TimeoutException: no answer", "transient": True}, ["x", "y"])
    assert [(r.client_id, r.ok, r.transient) for r in failed] == [("x", False, True), ("y", False, True)]
    with pytest.raises(ClientQuotaError, match="ClusterAuthorizationException") as caught:
        client_quotas.decode_describe({"error": "ClusterAuthorizationException: denied", "transient": False})
    assert not caught.value.transient


def test_the_answer_is_the_last_json_line_of_stdout() -> None:
    assert client_quotas.parse_answer('noise\n{"quotas": {}}\n') == {"quotas": {}}
    with pytest.raises(ClientQuotaError, match="gave no answer"):
        client_quotas.parse_answer("Exception in thread main\n")


#: A stand-in for the Java tool: records its argv and stdin, answers like the tool (per id, one failing).
FAKE_TOOL = """
import json, sys
request = json.load(sys.stdin)
open(sys.argv[1], "w").write(json.dumps({"argv": sys.argv, "request": request}))
if request["op"] == "describe":
    print(json.dumps({"quotas": {i: {"consumer_byte_rate": 5e6} for i in request["client_ids"] if i != "none"}}))
else:
    results = {i: {"ok": i != "bad", "error": "PolicyViolationException: no", "transient": False}
               for i in request["alterations"]}
    print(json.dumps({"results": results}))
"""


def _admin(tmp_path: Path, tool: str = FAKE_TOOL) -> tuple[KafkaAdmin, Path]:
    seen = tmp_path / "seen.json"

    def command() -> list[str]:
        return [sys.executable, "-c", tool, str(seen)]

    def java_properties() -> Mapping[str, str]:
        return PROPS

    admin = KafkaAdmin(
        "onprem", {"bootstrap.servers": "127.0.0.1:1"}, timeout=5, java_properties=java_properties, quota_tool=command
    )
    return admin, seen


def test_the_adapter_sends_secrets_on_stdin_only_and_returns_per_client_id_outcomes(tmp_path: Path) -> None:
    admin, seen = _admin(tmp_path)
    outcomes = admin.alter_client_quotas({"good": {"consumer_byte_rate": 1e7}, "bad": {"producer_byte_rate": None}})
    assert [(o.key, o.ok, o.transient) for o in outcomes] == [("good", True, False), ("bad", False, False)]
    assert outcomes[1].message == "PolicyViolationException: no"
    recorded = json.loads(seen.read_text())
    assert SECRET not in " ".join(recorded["argv"])  # never on the command line
    assert recorded["request"]["properties"] == PROPS  # the tool got them, on stdin
    assert admin.describe_client_quotas(["a", "none"]) == {"a": {"consumer_byte_rate": 5e6}}
    assert admin.round_trips == 2  # one process per batch


def test_a_tool_that_dies_fails_each_quota_with_its_scrubbed_output(tmp_path: Path) -> None:
    remember(SECRET)
    crash = f"import sys\nsys.stdin.read()\nprint('boom {SECRET}', file=sys.stderr)\nsys.exit(1)"
    admin, _ = _admin(tmp_path, crash)
    outcomes = admin.alter_client_quotas({"x": {"consumer_byte_rate": 1e7}})
    assert not outcomes[0].ok and "cluster 'onprem'" in outcomes[0].message and "boom ***" in outcomes[0].message
    assert SECRET not in outcomes[0].message
    with pytest.raises(ClientQuotaError, match="exited with 1"):
        admin.describe_client_quotas(["x"])


def test_without_java_each_quota_fails_saying_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quota_tool, "jdk_tool", lambda name: None)
    with pytest.raises(ArtifactError, match=r"install pip install 'kmirror\[spark\]'.*JDK 17"):
        quota_tool.quota_tool_command()
    admin = KafkaAdmin("onprem", {"bootstrap.servers": "127.0.0.1:1"}, timeout=1)
    outcomes = admin.alter_client_quotas({"x": {"consumer_byte_rate": 1e7}})
    assert not outcomes[0].ok and not outcomes[0].transient  # a retry cannot install Java
    assert "cluster 'onprem'" in outcomes[0].message and "kmirror[spark]" in outcomes[0].message
    assert admin.alter_client_quotas({}) == [] and admin.describe_client_quotas([]) == {}  # nothing asked: no Java


def test_an_admin_without_java_properties_refuses_a_config_it_cannot_translate(tmp_path: Path) -> None:
    admin = KafkaAdmin(
        "onprem",
        {"bootstrap.servers": "b:9093", "sasl.password": SECRET},
        timeout=1,
        quota_tool=lambda: [sys.executable, "-c", FAKE_TOOL, str(tmp_path / "seen.json")],
    )
    with pytest.raises(ClientQuotaError, match="Java client properties") as caught:
        admin.describe_client_quotas(["x"])
    assert SECRET not in str(caught.value) and "sasl.password" in str(caught.value)
