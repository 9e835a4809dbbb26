"""Schemas travel with their topics, end to end: real Kafka clusters, a real replication job (LocalRunner,
spark-submit) and two real schema registries (Apicurio, Confluent API).

The target registry holds unrelated schemas first, so the source's ids mean other schemas there. Avro records
written with the Confluent wire format (magic byte 0, 4-byte schema id) on the source are copied; a consumer on the
target decodes every one with the schema the target registry gives for the id in the record. A second version
registered on the source while the job runs reaches the target registry with (before) its first record. The plan
after each apply is empty. About 1.5-2 minutes.
"""

from __future__ import annotations

import json
import struct
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from reconciler.runners import LocalRunner
from reconciler.spec.loader import load
from tests.conftest import KafkaCluster, RegistryPair, applied_state_key
from tests.integration.plan.harness import World, create_topics, new_world, topic_exists
from tests.integration.replication.conftest import read_topic, stop_or_kill, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string"}]}
V2 = {
    "type": "record",
    "name": "Order",
    "fields": [*V1["fields"], {"name": "qty", "type": "int", "default": 1}],  # type: ignore[list-item]
}
FIRST, SECOND = 150, 100


# -- a little Avro (long, int and string fields are all these records have) --------------------------------------
def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _encode(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = b""
    for field in schema["fields"]:
        value = record[field["name"]]
        if field["type"] == "string":
            raw = value.encode()
            out += _zigzag(len(raw)) + raw
        else:
            out += _zigzag(value)
    return out


def _decode(schema: dict[str, Any], data: bytes) -> dict[str, Any]:
    pos, record = 0, {}

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)

    for field in schema["fields"]:
        if field["type"] == "string":
            n = varint()
            record[field["name"]] = data[pos : pos + n].decode()
            pos += n
        else:
            record[field["name"]] = varint()
    assert pos == len(data), "the schema read the whole record"
    return record


def _framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


# -- registries --------------------------------------------------------------------------------------------------
def _call(method: str, url: str, body: object | None = None) -> Any:
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _register(url: str, subject: str, schema: dict[str, Any]) -> int:
    return int(_call("POST", f"{url}/subjects/{subject}/versions", {"schema": json.dumps(schema)})["id"])


class SchemaWorld(World):
    registries: RegistryPair

    @property
    def flow(self) -> str:
        return f"f{self.id}"

    def job_spec(self) -> Path:
        path = self.tmp / "kmirror.yaml"
        path.write_text(
            textwrap.dedent(f"""\
            version: 1
            clusters:
              {self.src}:
                bootstrap_servers: "{self.source.bootstrap_servers}"
                schema_registry: {{url: "{self.registries.source}"}}
              {self.dst}:
                bootstrap_servers: "{self.target.bootstrap_servers}"
                schema_registry: {{url: "{self.registries.target}"}}
            state: {{cluster: {self.dst}, topic: "{self.state_topic}"}}
            spark:
              deploy: local
              master: "local[2]"
              checkpoint_root: checkpoints
              conf: {{spark.kmirror.triggerInterval: "500 milliseconds"}}
            flows:
              - name: {self.flow}
                source: {self.src}
                target: {self.dst}
                topics: {{include: ['{self.prefix}.*']}}
                offsets: {{checkpoint_interval: 1h}}
                heartbeats: {{enabled: false}}
                sync: {{acls: false, schemas: true}}
            """)
        )
        return path

    def schema_rows(self) -> dict[str, dict[str, Any]]:
        plan = self.plan_json(self.job_spec())
        assert not [w for w in plan["warnings"] if "schema registry" in w], plan["warnings"]
        return {c["address"]: c for c in plan["changes"] if c["kind"] == "schema"}

    def assert_clean_plan(self) -> None:
        result = self.kmirror("plan", "-f", str(self.job_spec()), "--detailed-exitcode", timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def world(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster, registry_pair: RegistryPair
) -> Iterator[SchemaWorld]:
    base = new_world(tmp_path, source, target)
    w = SchemaWorld(base.tmp, base.source, base.target, base.id)
    w.registries = registry_pair
    loaded = load(w.job_spec()).state
    runner = LocalRunner(
        tmp_path, loaded.spark, state_topic=loaded.state.topic, state_key=applied_state_key(loaded), stop_timeout=60
    )
    try:
        yield w
    finally:
        stop_or_kill(runner, w.flow)


def _produce(cluster: KafkaCluster, topic: str, schema_id: int, schema: dict[str, Any], ids: range) -> None:
    producer = Producer(cluster.config(**{"enable.idempotence": True, "acks": "all"}))
    for i in ids:
        record = {"id": i, "note": f"order {i} " + "x" * 40, "qty": i % 7}
        producer.produce(
            topic, key=f"k{i}".encode(), value=_framed(schema_id, _encode(schema, record)), partition=i % 2
        )
    assert producer.flush(30) == 0


def test_avro_records_are_copied_with_target_ids_and_a_new_version_is_synced_mid_stream(world: SchemaWorld) -> None:
    registries = world.registries
    topic = f"{world.prefix}orders"
    remote = world.remote(topic)
    # Unrelated schemas on the target first: ids there mean something else.
    for i in range(4):
        _register(
            registries.target,
            f"{world.prefix}unrelated-{i}-value",
            {"type": "enum", "name": f"U{i}", "symbols": ["A", "B"]},
        )
    v1_id = _register(registries.source, f"{topic}-value", V1)
    create_topics(world.source, (topic, 2, {}))
    _produce(world.source, topic, v1_id, V1, range(FIRST))

    rows = world.schema_rows()
    row = rows[f"schema/{world.dst}/{remote}-value"]
    assert row["action"] == "create" and row["after"]["source_subject"] == f"{topic}-value"
    assert {n: v["source_id"] for n, v in row["after"]["versions"].items()} == {"1": v1_id}
    applied = world.kmirror("apply", "-f", str(world.job_spec()), "--auto-approve", check=True, timeout=300).stdout
    assert f"schema/{world.dst}/{remote}-value" in applied
    target_v1 = _call("GET", f"{registries.target}/subjects/{remote}-value/versions/1")
    assert json.loads(target_v1["schema"]) == V1 and target_v1["id"] != v1_id  # the ids differ: translation needed
    world.assert_clean_plan()

    # Mid-stream: a second version on the source, and records written with it.
    v2_id = _register(registries.source, f"{topic}-value", V2)
    _produce(world.source, topic, v2_id, V2, range(FIRST, FIRST + SECOND))

    def copied() -> list[Any] | None:
        if not topic_exists(world.target, remote):
            return None
        records = [r for recs in read_topic(world.target, remote).values() for r in recs]
        return records if len({r.key for r in records}) >= FIRST + SECOND else None

    records = wait_for(f"{remote} to hold {FIRST + SECOND} records", copied, timeout=240, interval=2)
    schemas: dict[int, dict[str, Any]] = {}
    seen = set()
    for r in records:
        assert r.value[0] == 0, "the wire format is kept"
        (schema_id,) = struct.unpack(">I", r.value[1:5])
        if schema_id not in schemas:  # the target registry's schema for the id in the record
            schemas[schema_id] = json.loads(_call("GET", f"{registries.target}/schemas/ids/{schema_id}")["schema"])
        decoded = _decode(schemas[schema_id], r.value[5:])
        i = decoded["id"]
        assert r.key == f"k{i}".encode(), "keys without the magic byte are copied unchanged"
        assert decoded["note"] == f"order {i} " + "x" * 40
        assert ("qty" in decoded) == (i >= FIRST) and decoded.get("qty", i % 7) == i % 7
        seen.add(i)
    assert seen == set(range(FIRST + SECOND))
    assert sorted(json.dumps(s, sort_keys=True) for s in schemas.values()) == sorted(
        json.dumps(s, sort_keys=True) for s in (V1, V2)
    )
    assert v1_id not in schemas or schemas[v1_id] == V1  # an id of the source is never left pointing elsewhere
    versions = _call("GET", f"{registries.target}/subjects/{remote}-value/versions")
    assert len(versions) == 2  # the job registered version 2 under the remote topic's subject

    # The plan records what the job registered, and is empty after that apply.
    rows = world.schema_rows()
    assert rows[f"schema/{world.dst}/{remote}-value"]["action"] == "update"
    world.kmirror("apply", "-f", str(world.job_spec()), "--auto-approve", check=True, timeout=300)
    world.assert_clean_plan()
    shown = world.kmirror(
        "state", "show", "-f", str(world.job_spec()), f"schema/{world.dst}/{remote}-value", check=True
    )
    recorded = json.loads(shown.stdout)
    ids = (recorded.get("attributes") or recorded)["ids"]
    assert set(ids) == {str(v1_id), str(v2_id)}  # the state records the source id -> target id map
    assert {int(v) for v in ids.values()} == set(schemas)
