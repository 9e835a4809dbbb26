"""Flows that are disabled and enabled again, or removed (with `prune.topics`) and added back, through the real
`kmirror` command with a real replication job (LocalRunner, spark-submit) on the real local clusters.

Before issue 15: removing a flow deleted its remote topics before its job was stopped, the still-running job
created them again, and adding the flow back failed with "not a mirror kmirror owns"; disabling a flow whose
clusters no enabled flow used made the plan forget its remote topics, and enabling it again failed the same way.
Both journeys must end with every source record on the target and a clean plan.
"""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from reconciler.runners import LocalRunner
from reconciler.spec.loader import load
from tests.conftest import KafkaCluster, applied_state_key
from tests.integration.plan.harness import World, create_topics, new_world, topic_exists
from tests.integration.replication.conftest import read_topic, stop_or_kill, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class FlowWorld(World):
    """A World whose one flow runs a real replication job, and can be disabled or removed."""

    @property
    def flow(self) -> str:
        return f"f{self.id}"

    def job_spec(self, flow: str = "on") -> Path:
        """`flow`: "on", "off" (enabled: false) or "removed" (no flow; prune.topics and prune.jobs on)."""
        body = f"""\
            - name: {self.flow}
              source: {self.src}
              target: {self.dst}
              enabled: {"false" if flow == "off" else "true"}
              topics: {{include: ['{self.prefix}.*']}}
              groups: {{include: ['{self.prefix}.*']}}
              naming: {{policy: prefix}}
              offsets: {{checkpoint_interval: 1h}}
              heartbeats: {{enabled: false}}
              sync: {{acls: false}}
        """
        flows = "flows: []" if flow == "removed" else "flows:\n" + textwrap.indent(textwrap.dedent(body), "  ")
        path = self.tmp / "kmirror.yaml"
        path.write_text(
            textwrap.dedent(f"""\
            version: 1
            clusters:
              {self.src}: {{bootstrap_servers: "{self.source.bootstrap_servers}"}}
              {self.dst}: {{bootstrap_servers: "{self.target.bootstrap_servers}"}}
            state: {{cluster: {self.dst}, topic: "{self.state_topic}"}}
            spark:
              deploy: local
              master: "local[2]"
              checkpoint_root: checkpoints
              conf: {{spark.kmirror.triggerInterval: "500 milliseconds"}}
            prune: {{topics: true, acls: true, jobs: true}}
            """)
            + flows
            + "\n"
        )
        return path

    def apply(self, flow: str) -> dict[str, str]:
        """Apply the spec; the outcome of each change by address (`[n/m] address (action) ok`)."""
        result = self.kmirror("apply", "-f", str(self.job_spec(flow)), "--auto-approve", check=True, timeout=300)
        lines = [line for line in result.stdout.splitlines() if line.startswith("[")]
        return {line.split()[1]: line for line in lines}

    def assert_clean_plan(self, flow: str) -> None:
        result = self.kmirror("plan", "-f", str(self.job_spec(flow)), "--detailed-exitcode", timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def world(tmp_path: Path, source: KafkaCluster, target: KafkaCluster) -> Iterator[FlowWorld]:
    base = new_world(tmp_path, source, target)
    w = FlowWorld(base.tmp, base.source, base.target, base.id)
    loaded = load(w.job_spec()).state
    runner = LocalRunner(
        tmp_path, loaded.spark, state_topic=loaded.state.topic, state_key=applied_state_key(loaded), stop_timeout=60
    )
    try:
        yield w
    finally:
        stop_or_kill(runner, w.flow)


def _produce(cluster: KafkaCluster, topic: str, start: int, count: int) -> None:
    producer = Producer(cluster.config(**{"enable.idempotence": True, "acks": "all"}))
    for i in range(start, start + count):
        producer.produce(topic, value=str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0


def _wait_all(cluster: KafkaCluster, topic: str, count: int, start: int = 0) -> tuple[int, int]:
    """Wait until the topic holds every value start..count-1; (records read, duplicates)."""

    def values() -> list[int] | None:
        if not topic_exists(cluster, topic):
            return None
        got = [int(r.value or b"-1") for recs in read_topic(cluster, topic).values() for r in recs]
        return got if set(range(start, count)) <= set(got) else None

    got: list[int] = wait_for(f"{topic} to hold records {start}..{count - 1}", values, timeout=240, interval=2)
    return len(got), len(got) - len(set(got))


def test_a_disabled_flow_keeps_its_topics_and_carries_on_when_enabled_again(world: FlowWorld) -> None:
    orders = f"{world.prefix}orders"
    remote = world.remote(orders)
    create_topics(world.source, (orders, 2, {}))
    _produce(world.source, orders, 0, 500)
    world.apply("on")
    _wait_all(world.target, remote, 500)

    disabled = world.apply("off")
    assert "ok" in disabled[f"job/{world.flow}"] and "(delete)" in disabled[f"job/{world.flow}"]
    assert not any(a.startswith("topic/") for a in disabled), disabled  # nothing deleted, nothing forgotten
    world.assert_clean_plan("off")
    shown = world.kmirror("state", "show", f"topic/{world.dst}/{remote}")
    assert shown.returncode == 0, shown.stderr  # still kmirror's
    _produce(world.source, orders, 500, 500)  # written while the flow is off

    enabled = world.apply("on")
    assert [a for a in enabled if a.startswith("topic/")] == [], enabled  # its topics were never forgotten
    assert "ok" in enabled[f"job/{world.flow}"]
    records, duplicates = _wait_all(world.target, remote, 1000)
    assert records - duplicates == 1000
    world.assert_clean_plan("on")


def test_a_flow_removed_with_prune_and_added_back_mirrors_everything_again(world: FlowWorld) -> None:
    orders = f"{world.prefix}orders"
    remote = world.remote(orders)
    create_topics(world.source, (orders, 2, {}))
    _produce(world.source, orders, 0, 500)
    world.apply("on")
    _wait_all(world.target, remote, 500)

    removed = world.kmirror("apply", "-f", str(world.job_spec("removed")), "--auto-approve", check=True, timeout=300)
    lines = [line for line in removed.stdout.splitlines() if line.startswith("[")]
    job_at = next(i for i, line in enumerate(lines) if f"job/{world.flow}" in line)
    topic_at = next(i for i, line in enumerate(lines) if f"topic/{world.dst}/{remote} " in line)
    assert job_at < topic_at, lines  # the job stopped before its topic was deleted
    assert all(" ok" in line for line in lines), lines
    time.sleep(5)  # a job still running would create the topic again within a second or two
    assert not topic_exists(world.target, remote)
    world.assert_clean_plan("removed")

    _produce(world.source, orders, 500, 500)
    readded = world.kmirror("apply", "-f", str(world.job_spec("on")), "--auto-approve", timeout=300)
    assert readded.returncode == 0, readded.stdout + readded.stderr  # was: "not a mirror kmirror owns"
    # The new mirror is whole: the removed flow's checkpoint was forgotten, so the job copies from the start again.
    records, duplicates = _wait_all(world.target, remote, 1000)
    assert records - duplicates == 1000
    plan = world.kmirror("plan", "-f", str(world.job_spec("on")), "--format", "json")
    assert plan.returncode == 0 and json.loads(plan.stdout)["changes"] == [], plan.stdout + plan.stderr
