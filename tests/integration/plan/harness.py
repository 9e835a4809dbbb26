"""Runs the real `kmirror` command against the real local clusters, one isolated world per test.

Each world has its own cluster aliases, topic prefix and state topic, so tests share brokers without seeing
each other's topics or state.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from tests.conftest import KafkaCluster

KMIRROR = [sys.executable, "-m", "reconciler.cli"]


@dataclass
class World:
    tmp: Path
    source: KafkaCluster
    target: KafkaCluster
    id: str

    @property
    def src(self) -> str:
        return f"s{self.id}"

    @property
    def dst(self) -> str:
        return f"d{self.id}"

    @property
    def prefix(self) -> str:
        return f"w{self.id}-"

    @property
    def state_topic(self) -> str:
        return f"_kmirror.state-{self.id}"

    def spec(self, flow: str = "", prune: str = "", name: str = "kmirror.yaml", naming: str = "prefix") -> Path:
        flow_body = textwrap.indent(textwrap.dedent(flow).strip(), "    ")
        text = f"""\
version: 1
clusters:
  {self.src}: {{bootstrap_servers: "{self.source.bootstrap_servers}"}}
  {self.dst}: {{bootstrap_servers: "{self.target.bootstrap_servers}"}}
state: {{cluster: {self.dst}, topic: "{self.state_topic}"}}
spark: {{deploy: none}}  # these tests are about topics, configs, ACLs and state: no replication job
flows:
  - name: f{self.id}
    source: {self.src}
    target: {self.dst}
    topics: {{include: ['{self.prefix}.*']}}
    naming: {{policy: {naming}}}
    offsets: {{emit_checkpoints: false}}
{flow_body}
{prune}
"""
        path = self.tmp / name
        path.write_text(text)
        return path

    def remote(self, topic: str) -> str:
        return f"{self.src}.{topic}"

    def kmirror(self, *args: str, check: bool = False, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "NO_COLOR": "1"}
        result = subprocess.run(
            [*KMIRROR, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=self.tmp, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kmirror {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return result

    def plan_json(self, spec: Path, *extra: str) -> dict[str, Any]:
        result = self.kmirror("plan", "-f", str(spec), "--format", "json", *extra)
        assert result.returncode in (0, 2), result.stderr
        doc: dict[str, Any] = json.loads(result.stdout)
        return doc


def new_world(tmp: Path, source: KafkaCluster, target: KafkaCluster) -> World:
    return World(tmp, source, target, uuid.uuid4().hex[:6])


def create_topics(cluster: KafkaCluster, *topics: tuple[str, int, dict[str, str]]) -> None:
    admin = AdminClient(cluster.config())
    futures = admin.create_topics([NewTopic(n, p, 1, config=c) for n, p, c in topics], request_timeout=30)
    for f in futures.values():
        f.result(timeout=40)


def set_config(cluster: KafkaCluster, topic: str, key: str, value: str | None) -> None:
    admin = AdminClient(cluster.config())
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(
        ResourceType.TOPIC, topic, incremental_configs=[ConfigEntry(key, value, incremental_operation=op)]
    )
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(timeout=30)


def add_partitions(cluster: KafkaCluster, topic: str, total: int) -> None:
    admin = AdminClient(cluster.config())
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(timeout=30)


def describe(cluster: KafkaCluster, topic: str) -> tuple[int, dict[str, str]]:
    """(partitions, explicitly set configs) of a topic, read independently of kmirror's adapter."""
    admin = AdminClient(cluster.config())
    meta = admin.list_topics(topic, timeout=20).topics[topic]
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(timeout=20)
    explicit = {
        k: e.value
        for k, e in entries.items()
        if e.source in (ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    }
    return len(meta.partitions), explicit


def topic_exists(cluster: KafkaCluster, topic: str) -> bool:
    return topic in AdminClient(cluster.config()).list_topics(timeout=20).topics
