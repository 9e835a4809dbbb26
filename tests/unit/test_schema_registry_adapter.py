"""The requests kmirror sends to a schema registry, against a fake transport: the id-keeping path (IMPORT mode on a
Confluent Schema Registry) and the registering path (Apicurio and any registry without modes), credentials only in
headers, and apply's record of the source id -> target id map."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from reconciler.adapters.schema_registry import RegistryClient, RegistryError
from reconciler.app.schema_changes import apply_schema_change
from reconciler.plan.definition import Action, SchemaChange
from reconciler.plan.schema_forms import SchemaForm
from reconciler.spec.schema_registry import RegistryConnection

pytestmark = pytest.mark.unit

SCHEMA = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


class FakeRegistry:
    """Answers like a registry: with modes (Confluent) or without (Apicurio's ccompat: /mode is 404)."""

    def __init__(self, *, modes: bool, next_id: int = 100) -> None:
        self.modes = modes
        self.next_id = next_id
        self.calls: list[tuple[str, str, object, dict[str, str]]] = []

    def __call__(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None, timeout: float
    ) -> tuple[int, bytes]:
        path = url.removeprefix("http://sr:8081")
        sent = json.loads(body) if body else None
        self.calls.append((method, path, sent, dict(headers)))
        assert timeout > 0
        if path.startswith("/mode"):
            return (200, b'{"mode": "READWRITE"}') if self.modes else (404, b'{"error_code": 404}')
        if method == "GET" and path.endswith("/versions"):
            return 404, b'{"error_code": 40401, "message": "Subject not found"}'
        if method == "POST" and path.endswith("/versions"):
            assert isinstance(sent, dict)
            if "id" in sent:
                return 200, json.dumps({"id": sent["id"]}).encode()
            self.next_id += 1
            return 200, json.dumps({"id": self.next_id}).encode()
        if method == "PUT" and path.startswith("/config/"):
            return 200, body or b"{}"
        return 500, b'{"message": "unexpected"}'


def _change() -> SchemaChange:
    after = {
        "cluster": "dst",
        "subject": "src.orders-value",
        "flow": "f",
        "source_cluster": "src",
        "source_subject": "orders-value",
        "versions": {
            "1": {"source_id": 11, "schema_type": "AVRO", "schema": SCHEMA},
            "2": {"source_id": 12, "schema_type": "PROTOBUF", "schema": "syntax = 'proto3';"},
        },
        "compatibility": "BACKWARD",
        "ids": {},
    }
    return SchemaChange(
        address="schema/dst/src.orders-value", action=Action.CREATE, after=SchemaForm.model_validate(after)
    )


def _client(fake: FakeRegistry, headers: tuple[tuple[str, str], ...] = ()) -> RegistryClient:
    return RegistryClient(RegistryConnection("http://sr:8081", headers), transport=fake)


def test_a_registry_with_import_mode_keeps_the_source_ids_and_versions() -> None:
    fake = FakeRegistry(modes=True)
    outcome, recorded = apply_schema_change(_change(), {"dst": _client(fake)})
    assert outcome.ok, outcome.message
    assert "with the source's ids" in outcome.message
    assert recorded is not None and recorded.ids == {"11": 11, "12": 12}
    writes = [(m, p, b) for m, p, b, _ in fake.calls if m != "GET"]
    assert writes == [
        ("PUT", "/mode/src.orders-value", {"mode": "IMPORT"}),
        ("POST", "/subjects/src.orders-value/versions", {"schema": SCHEMA, "id": 11, "version": 1}),
        ("PUT", "/mode/src.orders-value", {"mode": "READWRITE"}),
        ("PUT", "/mode/src.orders-value", {"mode": "IMPORT"}),
        (
            "POST",
            "/subjects/src.orders-value/versions",
            {"schema": "syntax = 'proto3';", "schemaType": "PROTOBUF", "id": 12, "version": 2},
        ),
        ("PUT", "/mode/src.orders-value", {"mode": "READWRITE"}),
        ("PUT", "/config/src.orders-value", {"compatibility": "BACKWARD"}),
    ]


def test_a_registry_without_modes_gives_new_ids_which_apply_records() -> None:
    fake = FakeRegistry(modes=False, next_id=40)
    outcome, recorded = apply_schema_change(_change(), {"dst": _client(fake)})
    assert outcome.ok and "under new ids" in outcome.message
    assert recorded is not None and recorded.ids == {"11": 41, "12": 42}
    posts = [b for m, p, b, _ in fake.calls if m == "POST"]
    assert posts == [{"schema": SCHEMA}, {"schema": "syntax = 'proto3';", "schemaType": "PROTOBUF"}]


def test_credentials_travel_in_headers_and_never_in_messages() -> None:
    fake = FakeRegistry(modes=False)
    fake.modes = False
    client = _client(fake, (("Authorization", "Bearer s3cr3t-token"),))
    client.register("s", _change_version())
    assert fake.calls[-1][3]["Authorization"] == "Bearer s3cr3t-token"
    assert "s3cr3t" not in repr(client) and "s3cr3t" not in repr(
        RegistryConnection("http://sr:8081", (("A", "s3cr3t"),))
    )

    def refuse(
        method: str, url: str, headers: Mapping[str, str], body: bytes | None, timeout: float
    ) -> tuple[int, bytes]:
        return 401, b'{"message": "Unauthorized"}'

    with pytest.raises(RegistryError) as e:
        RegistryClient(
            RegistryConnection("http://sr:8081", (("Authorization", "Bearer s3cr3t-token"),)), transport=refuse
        ).subjects()
    assert "HTTP 401" in str(e.value) and "s3cr3t" not in str(e.value)


def _change_version():  # type: ignore[no-untyped-def]
    from reconciler.live.schemas import SchemaVersion

    return SchemaVersion(1, 11, SCHEMA)
