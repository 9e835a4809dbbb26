"""Every example in examples/ applies on local clusters, and then plans no changes; applying again does nothing.

The examples name their own hosts; each is rewritten onto the local pair: a flow's source alias lands on the
3.9 cluster and its target alias on the 4.x cluster (first use wins), client security settings are dropped but
the key and certificate paths (`ssl.*.location`) kept, replication factors become the broker default (one
broker each), and each example gets its own state topic. kmirror runs with what the example's README exports
(`KMIRROR_FILE_ROOTS` for paths outside the example's folder), so a path the README does not allow fails here
as it would for a user. The clusters are emptied between examples.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from ruamel.yaml import YAML

from reconciler.devenv import kafka_local
from reconciler.devenv.jars import KAFKA_SOURCE_VERSION, KAFKA_TARGET_VERSION
from tests.conftest import KafkaCluster
from tests.examples import readme_env
from tests.integration.plan.harness import create_topics

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLES = sorted(p.parent.name for p in Path("examples").glob("*/kmirror.yaml") if p.parent.name != "gitops-repo")
SOURCE_TOPICS = ["orders", "orders.eu", "payments", "clicks", "inventory"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaCluster, KafkaCluster]]:
    root = tmp_path_factory.mktemp("examples-kafka")
    clusters = []
    for name, version in (("source", KAFKA_SOURCE_VERSION), ("target", KAFKA_TARGET_VERSION)):
        c = kafka_local.start(name, version, root / name)
        clusters.append(KafkaCluster(name, c.bootstrap_servers, c.version, Path(c.home)))
    try:
        yield clusters[0], clusters[1]
    finally:
        for c in clusters:
            assert c.home is not None
            kafka_local.stop(c.home)


def _empty(cluster: KafkaCluster) -> None:
    admin = AdminClient(cluster.config())
    names = [t for t in admin.list_topics(timeout=20).topics if not t.startswith("__")]
    if names:
        for f in admin.delete_topics(names, operation_timeout=30).values():
            f.result(timeout=40)


def _localize(example: str, source: KafkaCluster, target: KafkaCluster, out: Path) -> Path:
    yaml = YAML()
    doc = yaml.load((Path("examples") / example / "kmirror.yaml").read_text())
    physical: dict[str, KafkaCluster] = {}
    for flow in doc["flows"]:
        physical.setdefault(flow["source"], source)
        physical.setdefault(flow["target"], target)
    for alias, cluster in doc["clusters"].items():
        cluster["bootstrap_servers"] = physical.get(alias, target).bootstrap_servers
        # PLAINTEXT to the local brokers; the paths stay, checked against the allowed folders as the example's
        # (librdkafka does not open them without TLS)
        cluster["client"] = {k: v for k, v in (cluster.get("client") or {}).items() if k.endswith(".location")}
    doc["state"]["topic"] = f"_kmirror.state-{example}"
    doc["spark"] = {"deploy": "none"}  # topics, configs, ACLs and state; replication jobs are tested elsewhere
    for flow in doc["flows"]:  # one broker per local cluster: the examples' replication factors cannot be met
        flow.setdefault("topic_defaults", {})["replication_factor"] = -1
    buf = io.StringIO()
    yaml.dump(doc, buf)
    out.write_text(buf.getvalue())
    return out


def _kmirror(cwd: Path, example: str, *args: str) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if k != "KMIRROR_FILE_ROOTS"}  # only what the README sets
    env = {**inherited, "NO_COLOR": "1", **readme_env(example)}
    return subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("example", EXAMPLES)
def test_example_applies_then_plans_no_changes(
    example: str, pair: tuple[KafkaCluster, KafkaCluster], tmp_path: Path
) -> None:
    source, target = pair
    _empty(source)
    _empty(target)
    create_topics(source, *((t, 2, {"retention.ms": "86400000"}) for t in SOURCE_TOPICS))
    spec = _localize(example, source, target, tmp_path / "kmirror.yaml")

    first = _kmirror(tmp_path, example, "plan", "-f", str(spec), "--format", "json")
    assert first.returncode == 0, first.stderr
    planned = json.loads(first.stdout)
    assert any(c["kind"] == "topic" and c["action"] == "create" for c in planned["changes"]), planned["changes"]

    applied = _kmirror(tmp_path, example, "apply", "-f", str(spec), "--auto-approve")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    for _ in range(2):
        again = _kmirror(tmp_path, example, "plan", "-f", str(spec), "--detailed-exitcode")
        assert again.returncode == 0, again.stdout + again.stderr
    reapplied = _kmirror(tmp_path, example, "apply", "-f", str(spec), "--auto-approve")
    assert reapplied.returncode == 0 and "No changes" in reapplied.stdout
