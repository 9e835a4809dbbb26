"""The job's schema id translation (jvm/SchemaIds.java, inside the sink producer's interceptor) against two real
registries: ids rewritten in keys and values from the target's registration of the source's schema, each id looked
up once, records without the magic byte untouched, an id the source does not know fails the send."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request

import pytest

from reconciler.artifacts import interceptor_jar
from tests.conftest import RegistryPair

pytestmark = [pytest.mark.integration]

CLASS = "io.kmirror.replication.SchemaIds"


def _register(url: str, subject: str, schema: object) -> int:
    body = json.dumps({"schema": json.dumps(schema)}).encode()
    request = urllib.request.Request(
        f"{url}/subjects/{subject}/versions",
        data=body,
        method="POST",
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(json.loads(response.read())["id"])


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _translate(registries: RegistryPair, lines: list[str]) -> list[str]:
    java = shutil.which("java")
    assert java is not None
    result = subprocess.run(
        [java, "-cp", str(interceptor_jar()), CLASS, registries.source, registries.target],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout.splitlines()


def _framed(schema_id: int, payload: bytes) -> str:
    return (b"\x00" + schema_id.to_bytes(4, "big") + payload).hex()


def test_ids_are_translated_in_keys_and_values_and_registered_once(registry_pair: RegistryPair) -> None:
    # Unrelated schemas on the target first: the source's ids mean other schemas there.
    for i in range(3):
        _register(registry_pair.target, f"other-{i}-value", {"type": "enum", "name": f"E{i}", "symbols": ["A"]})
    value_schema = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
    key_schema = {"type": "fixed", "name": "K", "size": 2}
    value_id = _register(registry_pair.source, "jvm-orders-value", value_schema)
    key_id = _register(registry_pair.source, "jvm-orders-key", key_schema)

    plain = b"not framed".hex()
    out = _translate(
        registry_pair,
        [
            f"src.jvm-orders {_framed(key_id, b'k1')} {_framed(value_id, b'payload-1')}",
            f"src.jvm-orders - {_framed(value_id, b'payload-2')}",
            f"src.jvm-orders {plain} {plain}",
            "src.jvm-orders 00 0001",  # shorter than magic byte + id: not framed
            f"src.jvm-orders - {_framed(987654, b'x')}",  # the source has no such id
        ],
    )
    target_value = _get(f"{registry_pair.target}/subjects/src.jvm-orders-value/versions/latest")
    target_key = _get(f"{registry_pair.target}/subjects/src.jvm-orders-key/versions/latest")
    assert isinstance(target_value, dict) and isinstance(target_key, dict)
    assert json.loads(target_value["schema"]) == value_schema and json.loads(target_key["schema"]) == key_schema
    new_value_id, new_key_id = int(target_value["id"]), int(target_key["id"])
    assert new_value_id != value_id  # the collision this exists for

    assert out[0] == f"{_framed(new_key_id, b'k1')} {_framed(new_value_id, b'payload-1')}"
    assert out[1] == f"- {_framed(new_value_id, b'payload-2')}"
    assert out[2] == f"{plain} {plain}"
    assert out[3] == "00 0001"
    assert out[4].startswith("error schema id 987654 of a record to src.jvm-orders could not be synced")
    assert out[5] == "lookups 2"  # one per source id, not per record
