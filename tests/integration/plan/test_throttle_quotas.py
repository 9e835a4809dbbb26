"""A throttled flow on real clusters, the whole journey: apply sets a fetch quota on the source and a produce quota on
the target for the ids kmirror names (through Kafka's Java Admin client), the brokers hold them (read back through the
adapter and, independently, with Kafka's own ConfigCommand), the next plan is empty, a changed throttle updates them,
and removing the setting removes them; kmirror's state records them while they are its own."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from reconciler.artifacts import jars
from reconciler.artifacts.quota_tool import quota_tool_command
from reconciler.kafka_clients.admin import KafkaAdmin
from tests.conftest import KafkaCluster
from tests.integration.plan.harness import World, new_world

pytestmark = pytest.mark.integration


def _config_command(cluster: KafkaCluster, *args: str) -> str:
    """Kafka's kafka-configs.sh (`kafka.admin.ConfigCommand`) from the target version's jars."""
    libs = jars.kafka_libs(cluster.version or "4.3.1")
    result = subprocess.run(
        [os.environ.get("KMIRROR_JAVA", "java"), "-cp", f"{libs}/*", "kafka.admin.ConfigCommand", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _quota_rows(world: World, spec: Path) -> dict[str, dict[str, object]]:
    plan = world.plan_json(spec)
    assert not [w for w in plan["warnings"] if "client quotas" in w], plan["warnings"]  # read from the brokers
    return {c["address"]: c for c in plan["changes"] if c["kind"] == "quota"}


def _apply(world: World, spec: Path) -> None:
    world.kmirror("apply", "-f", str(spec), "--auto-approve", check=True)


def test_a_throttle_is_set_read_back_changed_and_removed_on_the_brokers(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster
) -> None:
    world: World = new_world(tmp_path, source, target)
    source_id = f"kmirror.{world.state_topic}.f{world.id}.source"
    target_id = f"kmirror.{world.state_topic}.f{world.id}.target"
    src_row, dst_row = f"quota/{world.src}/{source_id}", f"quota/{world.dst}/{target_id}"
    src_admin, dst_admin = KafkaAdmin(world.src, source.config()), KafkaAdmin(world.dst, target.config())

    def on_brokers() -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
        return src_admin.describe_client_quotas([source_id]), dst_admin.describe_client_quotas([target_id])

    # Set: the plan reads the (absent) quotas, apply sets both, the brokers hold them.
    spec = world.spec("replication: {throttle: 10MB}")
    rows = _quota_rows(world, spec)
    assert {a: r["action"] for a, r in rows.items()} == {src_row: "create", dst_row: "create"}
    _apply(world, spec)
    assert on_brokers() == ({source_id: {"consumer_byte_rate": 1e7}}, {target_id: {"producer_byte_rate": 1e7}})
    describe = ["--describe", "--entity-type", "clients", "--entity-name", source_id]
    shown = _config_command(target, "--bootstrap-server", source.bootstrap_servers, *describe)
    assert "consumer_byte_rate=1.0E7" in shown  # Kafka's own tool sees what kmirror set
    listed = world.kmirror("state", "list", "-f", str(spec), check=True).stdout
    assert src_row in listed and dst_row in listed
    assert _quota_rows(world, spec) == {}  # applied: nothing left to do

    # Change: both quotas updated in place, from what the brokers hold.
    spec = world.spec("replication: {throttle: 20MB}")
    rows = _quota_rows(world, spec)
    assert {a: r["action"] for a, r in rows.items()} == {src_row: "update", dst_row: "update"}
    assert rows[src_row]["before"] == {
        "cluster": world.src,
        "client_id": source_id,
        "flow": f"f{world.id}",
        "consumer_byte_rate": 10_000_000,
    }
    _apply(world, spec)
    assert on_brokers() == ({source_id: {"consumer_byte_rate": 2e7}}, {target_id: {"producer_byte_rate": 2e7}})

    # Remove the setting: the quotas go from the brokers and from kmirror's state.
    spec = world.spec("")
    rows = _quota_rows(world, spec)
    assert {a: r["action"] for a, r in rows.items()} == {src_row: "delete", dst_row: "delete"}
    _apply(world, spec)
    assert on_brokers() == ({}, {})
    assert "consumer_byte_rate" not in _config_command(
        target, "--bootstrap-server", source.bootstrap_servers, *describe
    )
    listed = world.kmirror("state", "list", "-f", str(spec), check=True).stdout
    assert "quota/" not in listed
    assert _quota_rows(world, spec) == {}


def test_the_quota_tool_refuses_a_bad_request_without_echoing_it() -> None:
    """The real Java tool: a request it cannot read is exit 2 and one JSON error that names no part of it (the
    request carries the cluster's secrets)."""
    secret = "do-not-print-this-password"
    truncated = f'{{"properties": {{"sasl.jaas.config": "{secret}"}}, "op": "describe", "client_ids": ['
    result = subprocess.run(quota_tool_command(), input=truncated, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert json.loads(result.stdout) == {
        "error": f"bad request: invalid JSON at character {len(truncated)} (unexpected end)",
        "transient": False,
    }
    assert secret not in result.stdout + result.stderr
