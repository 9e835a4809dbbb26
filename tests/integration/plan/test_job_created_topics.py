"""A remote topic the running replication job created for a new source topic, through the real `kmirror` command.

`kmirror apply` creates the first mirror and deploys the flow's job (LocalRunner, spark-submit). A source topic
created afterwards matches the flow's filter, so the job's RemoteTopicKeeper creates its remote topic itself,
without apply. The next `kmirror plan` must not call that topic foreign ("kmirror did not create it"): it plans an
update recording it as kmirror's (plus the config the source changed since), apply records it as owned, and the
plan after that is clean.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.runners import LocalRunner
from reconciler.spec.loader import load
from tests.conftest import KafkaCluster, applied_state_key
from tests.integration.plan.harness import World, create_topics, describe, new_world, set_config, topic_exists
from tests.integration.replication.conftest import stop_or_kill, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class JobWorld(World):
    """A World whose flow runs a real replication job (the harness' default spec deploys none)."""

    @property
    def flow(self) -> str:
        return f"f{self.id}"

    def job_spec(self) -> Path:
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
            flows:
              - name: {self.flow}
                source: {self.src}
                target: {self.dst}
                topics: {{include: ['{self.prefix}.*']}}
                groups: {{include: ['{self.prefix}.*']}}
                naming: {{policy: prefix}}
                offsets: {{checkpoint_interval: 1h}}
                heartbeats: {{enabled: false}}
                sync: {{acls: false}}
            """)
        )
        return path


@pytest.fixture
def world(tmp_path: Path, source: KafkaCluster, target: KafkaCluster) -> Iterator[JobWorld]:
    base = new_world(tmp_path, source, target)
    w = JobWorld(base.tmp, base.source, base.target, base.id)
    spec = w.job_spec()
    loaded = load(spec).state
    runner = LocalRunner(
        tmp_path, loaded.spark, state_topic=loaded.state.topic, state_key=applied_state_key(loaded), stop_timeout=60
    )
    try:
        yield w
    finally:
        stop_or_kill(runner, w.flow)


def test_a_remote_topic_the_job_created_is_recorded_as_owned_by_the_next_apply(world: JobWorld) -> None:
    spec = world.job_spec()
    first, new = f"{world.prefix}first", f"{world.prefix}new"
    create_topics(world.source, (first, 2, {"retention.ms": "3600000"}))
    world.kmirror("apply", "-f", str(spec), "--auto-approve", check=True, timeout=300)
    assert topic_exists(world.target, world.remote(first))

    # A new source topic while the job runs: the job creates its mirror, apply is not involved.
    create_topics(world.source, (new, 3, {"retention.ms": "7200000"}))
    wait_for(f"the job to create {world.remote(new)}", lambda: topic_exists(world.target, world.remote(new)), 300, 1)
    assert describe(world.target, world.remote(new)) == (3, {"retention.ms": "7200000"})
    # The source changes after the mirror was made: the plan that records the mirror also syncs the change.
    set_config(world.source, new, "retention.ms", "10800000")

    result = world.kmirror("plan", "-f", str(spec), "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr  # was exit 1: "... but kmirror did not create it"
    plan = json.loads(result.stdout)
    address = f"topic/{world.dst}/{world.remote(new)}"
    assert [c["address"] for c in plan["changes"]] == [address], plan["changes"]
    [change] = plan["changes"]
    assert change["action"] == "update"
    assert change["reason"] == (
        f"{world.src}:{new} (flow {world.flow}): created by the flow's replication job (job/{world.flow}) for a new "
        "source topic; recording it as kmirror's; configs retention.ms"
    )
    assert change["before"]["configs"] == {"retention.ms": "7200000"}
    assert change["after"]["configs"] == {"retention.ms": "10800000"}
    assert change["after"]["partitions"] == change["before"]["partitions"] == 3

    world.kmirror("apply", "-f", str(spec), "--auto-approve", check=True, timeout=300)
    assert describe(world.target, world.remote(new)) == (3, {"retention.ms": "10800000"})
    shown = world.kmirror("state", "show", address, check=True)
    assert world.remote(new) in shown.stdout

    clean = world.kmirror("plan", "-f", str(spec), "--detailed-exitcode")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "No changes." in clean.stdout
