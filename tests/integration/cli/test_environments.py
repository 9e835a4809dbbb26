"""One `kmirror.yaml` for staging and production: `${env:..}` in bootstrap_servers picks the clusters.

On the real local pair, "staging" replicates source -> target and "production" target -> source, from the same
file. Each plan reads its own clusters; a plan saved in staging is refused in production (its spec digest is of
another environment), even when both states are empty and its changes look the same, and changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import KafkaCluster
from tests.integration.plan.harness import KMIRROR, describe, topic_exists

pytestmark = pytest.mark.integration


def _create(cluster: KafkaCluster, topic: str, partitions: int) -> None:
    """Create a topic; TOPIC_ALREADY_EXISTS is success (the client retries a slow request on a busy machine)."""
    admin = AdminClient(cluster.config())  # kept alive until the answer: a collected client cancels its requests
    future = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=60)[topic]
    try:
        future.result(timeout=90)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def _kmirror(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*KMIRROR, *args], capture_output=True, text=True, timeout=180, cwd=cwd, check=False,
        env={**os.environ, "NO_COLOR": "1", **env},
    )  # fmt: skip


def test_one_file_two_environments_two_clusters(kafka_pair: tuple[KafkaCluster, KafkaCluster], tmp_path: Path) -> None:
    source, target = kafka_pair
    tag = uuid.uuid4().hex[:6]
    topic = f"env{tag}-orders"
    # The same topic name in both environments' source clusters, with different partition counts.
    _create(source, topic, 1)
    _create(target, topic, 3)
    spec = tmp_path / "kmirror.yaml"
    spec.write_text(
        textwrap.dedent(f"""\
            version: 1
            clusters:
              upstream: {{bootstrap_servers: "${{env:KM_{tag}_UPSTREAM}}"}}
              central: {{bootstrap_servers: "${{env:KM_{tag}_CENTRAL}}"}}
            state: {{cluster: central, topic: _kmirror.state-{tag}}}
            spark: {{deploy: none}}
            flows:
              - name: orders
                source: upstream
                target: central
                topics: {{include: ["env{tag}-.*"]}}
                offsets: {{emit_checkpoints: false}}
            """)
    )
    staging = {f"KM_{tag}_UPSTREAM": source.bootstrap_servers, f"KM_{tag}_CENTRAL": target.bootstrap_servers}
    production = {f"KM_{tag}_UPSTREAM": target.bootstrap_servers, f"KM_{tag}_CENTRAL": source.bootstrap_servers}
    remote = f"upstream.{topic}"

    def plan(env: dict[str, str], *extra: str) -> dict[str, Any]:
        result = _kmirror(tmp_path, env, "plan", "-f", str(spec), "--format", "json", *extra)
        assert result.returncode == 0, result.stdout + result.stderr
        doc: dict[str, Any] = json.loads(result.stdout)
        return doc

    staged, produced = plan(staging), plan(production)
    changes = {e: {c["address"]: c for c in doc["changes"]} for e, doc in (("staging", staged), ("prod", produced))}
    address = f"topic/central/{remote}"
    assert changes["staging"][address]["after"]["partitions"] == 1, "staging read the staging upstream cluster"
    assert changes["prod"][address]["after"]["partitions"] == 3, "production read the production upstream cluster"
    assert staged["spec_digest"] != produced["spec_digest"]

    saved = tmp_path / "staging-plan.json"
    plan(staging, "--out", str(saved))
    refused = _kmirror(tmp_path, production, "apply", "-f", str(spec), str(saved))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "Saved plan is stale" in refused.stderr and "environment" in refused.stderr
    assert not topic_exists(source, remote), "the refused staging plan changed production"

    # a field added to the plan within format_version 1 (a review tool's) is accepted by apply
    reviewed = json.loads(saved.read_text()) | {"reviewed_by": "alice"}
    saved.write_text(json.dumps(reviewed, indent=2))
    applied = _kmirror(tmp_path, staging, "apply", "-f", str(spec), str(saved))
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert describe(target, remote)[0] == 1

    unset = _kmirror(tmp_path, {}, "validate", "-f", str(spec), "--format", "json")
    assert unset.returncode == 1
    problems = json.loads(unset.stdout)["diagnostics"]
    assert {d["field"] for d in problems} == {
        "clusters.upstream.bootstrap_servers",
        "clusters.central.bootstrap_servers",
    }
    assert all(d["line"] in (3, 4) and f"KM_{tag}_" in d["summary"] for d in problems)
