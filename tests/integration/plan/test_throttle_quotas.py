"""A throttled flow on real clusters: the plan shows its two quotas, apply (which cannot set them: confluent-kafka has
no client-quota admin call) fails them with a command that does it by hand and records nothing, and that command,
run with Kafka's own tool, sets and removes the quota on the broker for the id kmirror named."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from reconciler.artifacts import jars
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


def test_a_throttled_flow_plans_its_quotas_and_apply_says_how_to_set_them(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster
) -> None:
    world: World = new_world(tmp_path, source, target)
    spec = world.spec("replication: {throttle: 10MB}")
    source_id = f"kmirror.{world.state_topic}.f{world.id}.source"
    target_id = f"kmirror.{world.state_topic}.f{world.id}.target"

    plan = world.plan_json(spec)
    quotas = {c["address"]: c for c in plan["changes"] if c["kind"] == "quota"}
    assert set(quotas) == {f"quota/{world.src}/{source_id}", f"quota/{world.dst}/{target_id}"}
    assert quotas[f"quota/{world.src}/{source_id}"]["after"]["consumer_byte_rate"] == 10_000_000
    assert quotas[f"quota/{world.dst}/{target_id}"]["after"]["producer_byte_rate"] == 10_000_000
    assert any("client quotas cannot be read" in w for w in plan["warnings"])

    applied = world.kmirror("apply", "-f", str(spec), "--auto-approve")
    output = applied.stdout + applied.stderr
    assert applied.returncode == 1, output
    assert "no client-quota admin call" in output
    listed = world.kmirror("state", "list", "-f", str(spec), check=True).stdout
    assert "quota/" not in listed  # not set, so not kmirror's: the next plan creates them again
    assert {c["address"] for c in world.plan_json(spec)["changes"] if c["kind"] == "quota"} == set(quotas)

    # The command apply printed for the source quota, run with Kafka's own tool, sets it on the broker.
    printed = re.search(
        rf"kafka-configs\.sh (--bootstrap-server \S+ .*?--entity-name {re.escape(source_id)} \S+ \S+)", output
    )
    assert printed is not None, output
    args = shlex.split(printed.group(1))
    assert args[1] == source.bootstrap_servers
    _config_command(target, *args)
    describe = ["--bootstrap-server", source.bootstrap_servers, "--describe", "--entity-type", "clients"]
    assert "consumer_byte_rate=1.0E7" in _config_command(target, *describe, "--entity-name", source_id)
    remove = [
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        source_id,
        "--delete-config",
        "consumer_byte_rate",
    ]
    _config_command(target, "--bootstrap-server", source.bootstrap_servers, *remove)
    assert "consumer_byte_rate" not in _config_command(target, *describe, "--entity-name", source_id)
