"""Flows taken away and given back while records flow: disabled and enabled again (the job stops and resumes from
where it stopped: nothing lost), and removed with `prune.topics` then added back (the remote topic is deleted with
the flow, so the new mirror must be whole again: every acknowledged record, including those copied before)."""

from __future__ import annotations

import time

import pytest

from tests.faults.conftest import FaultWorld, Load, create_topic, read_values, report, wait_copied, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def _apply(world: FaultWorld, flow: str) -> None:
    world.kmirror("apply", "-f", str(world.spec(flow=flow)), "--auto-approve", check=True)


def _copied(world: FaultWorld, remote: str) -> int:
    return sum(len(v) for v in read_values(world.target, remote).values())


def _copying_again(world: FaultWorld, remote: str) -> None:
    """Wait until the job, given back its flow, copies records written since (the load runs on until then)."""
    before = _copied(world, remote)
    wait_until(f"the job to copy to {remote} again", lambda: _copied(world, remote) > before, 180, 0.5)


@pytest.mark.timeout(600)
def test_a_flow_disabled_and_enabled_again_while_records_flow_loses_nothing(world: FaultWorld) -> None:
    topic = f"{world.prefix}toggled"
    create_topic(world.source, topic, 3)
    remote = world.remote(topic)
    with Load(world.source, topic, 3, rate=1000) as load:
        _apply(world, "on")
        wait_until(f"records on {remote}", lambda: any(read_values(world.target, remote).values()), 180)
        _apply(world, "off")
        time.sleep(2)  # records written while the flow is disabled (2,000 at this rate)
        enabled_at = time.monotonic()
        _apply(world, "on")
        _copying_again(world, remote)
    result, recovery = wait_copied(load, world.target, remote, 300)
    report(
        "disable_enable",
        records=result.records,
        lost=result.lost,
        duplicates=result.duplicates,
        recovery_s=round(time.monotonic() - enabled_at, 1),
        caught_up_after_load_s=round(recovery, 1),
    )
    assert result.lost == 0, f"{result.lost} acknowledged records missing, e.g. {result.lost_examples}"
    clean = world.kmirror("plan", "-f", str(world.spec()), "--detailed-exitcode")
    assert clean.returncode == 0, clean.stdout + clean.stderr


@pytest.mark.timeout(600)
def test_a_flow_removed_with_prune_and_added_back_mirrors_every_record_again(world: FaultWorld) -> None:
    topic = f"{world.prefix}readded"
    create_topic(world.source, topic, 3)
    remote = world.remote(topic)
    with Load(world.source, topic, 3, rate=1000) as load:
        _apply(world, "on")
        wait_until(f"records on {remote}", lambda: any(read_values(world.target, remote).values()), 180)
        _apply(world, "removed")
        time.sleep(2)  # records written while the flow is gone (2,000 at this rate)
        added_at = time.monotonic()
        _apply(world, "on")
        _copying_again(world, remote)
    result, _ = wait_copied(load, world.target, remote, 180)
    report(
        "remove_readd",
        records=result.records,
        lost=result.lost,
        duplicates=result.duplicates,
        recovery_s=round(time.monotonic() - added_at, 1),
    )
    assert result.lost == 0, f"{result.lost} acknowledged records missing, e.g. {result.lost_examples}"
