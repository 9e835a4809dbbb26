"""`kmirror plan` and `kmirror apply` on the real local clusters (Kafka 3.9 source, 4.x target)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from reconciler.state.store import StateStore
from tests.conftest import KafkaCluster, process_state
from tests.integration.plan.harness import (
    KMIRROR,
    World,
    add_partitions,
    create_topics,
    describe,
    new_world,
    set_config,
    topic_exists,
)

pytestmark = pytest.mark.integration

#: `kmirror apply` that freezes itself at one step of its work (see that file).
STEPPER = Path(__file__).parents[2] / "faults" / "apply_steps.py"


@pytest.fixture
def world(tmp_path: Path, source: KafkaCluster, target: KafkaCluster) -> World:
    return new_world(tmp_path, source, target)


def _topic_changes(plan: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {c["address"]: c for c in plan["changes"] if c["kind"] == "topic"}


def test_plan_creates_exact_mirrors_then_stays_empty_and_shows_one_source_change(world: World) -> None:
    a, b = f"{world.prefix}orders", f"{world.prefix}clicks"
    create_topics(
        world.source,
        (a, 3, {"retention.ms": "3600000", "cleanup.policy": "compact", "min.insync.replicas": "1"}),
        (b, 2, {}),  # broker defaults only
    )
    spec = world.spec()

    plan = world.plan_json(spec)
    topics = _topic_changes(plan)
    ra, rb = world.remote(a), world.remote(b)
    assert set(topics) == {
        f"topic/{world.dst}/{ra}",
        f"topic/{world.dst}/{rb}",
        f"topic/{world.dst}/{world.src}.heartbeats",
    }
    assert topics[f"topic/{world.dst}/{ra}"]["after"]["partitions"] == 3
    # exactly the explicitly set source configs, minus MM2's exclusion list (min.insync.replicas)
    assert topics[f"topic/{world.dst}/{ra}"]["after"]["configs"] == {
        "cleanup.policy": "compact",
        "retention.ms": "3600000",
    }
    assert topics[f"topic/{world.dst}/{rb}"]["after"]["configs"] == {}

    applied = world.kmirror("apply", "-f", str(spec), "--auto-approve")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert describe(world.target, ra) == (3, {"cleanup.policy": "compact", "retention.ms": "3600000"})
    assert describe(world.target, rb) == (2, {})

    for _ in range(2):  # no perpetual diff: broker defaults never show up as changes
        again = world.kmirror("plan", "-f", str(spec), "--detailed-exitcode")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "No changes" in again.stdout
    reapplied = world.kmirror("apply", "-f", str(spec), "--auto-approve")
    assert reapplied.returncode == 0 and "No changes" in reapplied.stdout

    set_config(world.source, a, "retention.ms", "7200000")
    add_partitions(world.source, b, 5)
    changed = world.plan_json(spec)
    assert [(c["address"], c["action"]) for c in changed["changes"]] == [
        (f"topic/{world.dst}/{rb}", "update"),
        (f"topic/{world.dst}/{ra}", "update"),
    ]
    by = _topic_changes(changed)
    assert by[f"topic/{world.dst}/{ra}"]["after"]["configs"]["retention.ms"] == "7200000"
    assert by[f"topic/{world.dst}/{rb}"]["after"]["partitions"] == 5
    assert world.kmirror("apply", "-f", str(spec), "--auto-approve").returncode == 0
    assert describe(world.target, rb)[0] == 5
    assert world.kmirror("plan", "-f", str(spec), "--detailed-exitcode").returncode == 0


def test_drift_made_by_hand_on_the_target_is_planned_back(world: World) -> None:
    a = f"{world.prefix}orders"
    create_topics(world.source, (a, 1, {"retention.ms": "3600000"}))
    spec = world.spec()
    world.kmirror("apply", "-f", str(spec), "--auto-approve", check=True)
    set_config(world.target, world.remote(a), "retention.ms", "1")
    set_config(world.target, world.remote(a), "segment.ms", "600000")
    drift = world.kmirror("plan", "-f", str(spec), "--detailed-exitcode")
    assert drift.returncode == 2
    assert 'retention.ms = "1" -> "3600000"' in drift.stdout and "segment.ms" in drift.stdout
    world.kmirror("apply", "-f", str(spec), "--auto-approve", check=True)
    assert describe(world.target, world.remote(a))[1] == {"retention.ms": "3600000"}


def test_existing_target_topic_not_owned_is_refused_at_plan_time(world: World) -> None:
    a = f"{world.prefix}orders"
    create_topics(world.source, (a, 1, {}))
    create_topics(world.target, (a, 1, {}))
    spec = world.spec(naming="identity")
    result = world.kmirror("plan", "-f", str(spec))
    assert result.returncode == 1
    assert f"topic/{world.dst}/{a}" in result.stderr and "adopt_existing" in result.stderr
    adopt = world.spec("replication: {adopt_existing: true}", naming="identity", name="adopt.yaml")
    world.kmirror("apply", "-f", str(adopt), "--auto-approve", check=True)
    assert world.kmirror("plan", "-f", str(adopt), "--detailed-exitcode").returncode == 0


def test_saved_plan_is_refused_when_the_world_changed(world: World) -> None:
    a, b = f"{world.prefix}a", f"{world.prefix}b"
    create_topics(world.source, (a, 1, {}), (b, 1, {}))
    spec = world.spec()
    plan_file = world.tmp / "plan.json"
    world.kmirror("plan", "-f", str(spec), "--out", str(plan_file), check=True)

    # Someone creates one of the planned remote topics by hand.
    create_topics(world.target, (world.remote(a), 1, {}))
    refused = world.kmirror("apply", "-f", str(spec), str(plan_file))
    assert refused.returncode == 1
    assert "stale" in refused.stderr.lower() or "kmirror did not create it" in refused.stderr
    assert not topic_exists(world.target, world.remote(b)), "a refused plan changed nothing"

    # Another apply runs between plan and apply: the state serial moved.
    other = new_world(world.tmp, world.source, world.target)
    create_topics(world.source, (f"{other.prefix}x", 1, {}))
    spec2 = other.spec(name="other.yaml")
    plan2 = world.tmp / "plan2.json"
    other.kmirror("plan", "-f", str(spec2), "--out", str(plan2), check=True)
    other.kmirror("apply", "-f", str(spec2), "--auto-approve", check=True)
    stale = other.kmirror("apply", "-f", str(spec2), str(plan2))
    assert stale.returncode == 1 and "Saved plan is stale" in stale.stderr
    assert "serial 0" in stale.stderr and "serial 1" in stale.stderr


def test_saved_plan_applies_exactly_what_was_reviewed(world: World) -> None:
    a = f"{world.prefix}a"
    create_topics(world.source, (a, 2, {"retention.ms": "60000"}))
    spec = world.spec()
    plan_file = world.tmp / "plan.json"
    world.kmirror("plan", "-f", str(spec), "--out", str(plan_file), check=True)
    applied = world.kmirror("apply", "-f", str(spec), str(plan_file))
    assert applied.returncode == 0, applied.stderr
    assert describe(world.target, world.remote(a)) == (2, {"retention.ms": "60000"})
    history = json.loads(world.kmirror("state", "history", "-f", str(spec), "--format", "json", check=True).stdout)
    assert [h["plan_id"] for h in history["applies"]] == [json.loads(plan_file.read_text())["plan_id"]]
    assert history["applies"][0]["status"] == "completed"


def test_an_apply_started_while_another_holds_the_lock_is_refused_and_the_first_finishes(world: World) -> None:
    """The first apply is frozen (SIGSTOP, `tests/faults/apply_steps.py`) right after it took the lock and made its
    plan, so the second starts while it holds the lock for certain: started merely together, the first often
    finishes its 40 creates before the second begins on a busy machine, and the second then plans nothing."""
    create_topics(world.source, *((f"{world.prefix}t{i}", 1, {}) for i in range(40)))
    spec = world.spec()
    env = {**os.environ, "NO_COLOR": "1"}
    first = subprocess.Popen(
        [sys.executable, str(STEPPER), "planned", "apply", "-f", str(spec), "--auto-approve"],
        cwd=world.tmp,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (process_state(first.pid) or "").startswith("T"):  # T: stopped at its step, the lock held
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first apply did not reach its plan within 120 s"
            time.sleep(0.05)
        second = world.kmirror("apply", "-f", str(spec), "--auto-approve")
        assert second.returncode == 1, (second.stdout, second.stderr)
        assert "the state is locked: lock" in second.stderr and "held by" in second.stderr
        assert "Apply complete" not in second.stdout
    finally:
        first.send_signal(signal.SIGCONT)
    out, err = first.communicate(timeout=180)
    assert first.returncode == 0, (out, err)
    assert "applied, 0 failed" in out and "t39 (create) ok" in out
    history = json.loads(world.kmirror("state", "history", "-f", str(spec), "--format", "json", check=True).stdout)
    assert len(history["applies"]) == 1 and history["applies"][0]["status"] == "completed"
    assert world.kmirror("plan", "-f", str(spec), "--detailed-exitcode").returncode == 0


def test_apply_killed_half_way_leaves_true_state_and_the_next_apply_finishes(world: World) -> None:
    n = 400
    spec = world.spec()
    watch = AdminClient(world.target.config())  # one client: a new one per look took long enough to miss the window
    # Kill the apply as soon as the broker shows the first of its topics, i.e. while it waits for them to be visible
    # and records them. On a loaded machine the kill can still land after the apply recorded them all (its history
    # then says "completed"): that attempt tested nothing, so it is made again with new topics, at most three times.
    for attempt in range(3):
        names = [f"{world.prefix}a{attempt}t{i:03d}" for i in range(n)]
        create_topics(world.source, *((t, 1, {"retention.ms": "600000"}) for t in names))
        proc = subprocess.Popen(
            [*KMIRROR, "apply", "-f", str(spec), "--auto-approve"], cwd=world.tmp,
            env={**os.environ, "NO_COLOR": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        first = world.remote(names[0])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            found = watch.list_topics(first, timeout=10).topics.get(first)
            if found is not None and found.error is None:
                break
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if _history(world, spec)[-1] != "completed":
            break
    else:
        pytest.fail("three applies finished before they could be killed")

    after = world.plan_json(spec)
    wanted = {f"topic/{world.dst}/{world.remote(t)}" for t in names}
    existing = {a for a in wanted if topic_exists(world.target, a.rsplit("/", 1)[1])}
    creates = {c["address"] for c in after["changes"] if c["address"] in wanted and c["action"] == "create"}
    confirms = {c["address"] for c in after["changes"] if c["address"] in wanted and c["action"] == "update"}
    # The next plan is exactly the remaining work and no error: what is missing is created; what the killed
    # apply created but did not record as done was recorded as pending before the broker call, so it is
    # kmirror's own and is only confirmed (not a foreign topic); what it recorded as done is not touched.
    assert creates == wanted - existing
    assert confirms <= existing
    assert all(c["action"] in ("create", "update") for c in after["changes"])
    recorded = StateStore(world.dst, world.target.config(), world.state_topic).read()
    done = {a for a, r in recorded.resources.items() if not r.pending}
    assert not (confirms & done) and not (creates & done)

    finished = world.kmirror("apply", "-f", str(spec), "--auto-approve")
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert world.kmirror("plan", "-f", str(spec), "--detailed-exitcode").returncode == 0
    assert all(topic_exists(world.target, a.rsplit("/", 1)[1]) for a in wanted)
    statuses = _history(world, spec)[attempt:]
    assert statuses[0] == "interrupted"
    assert statuses[1:] == (["completed"] if after["changes"] else [])


def _history(world: World, spec: Path) -> list[str]:
    """The statuses of the applies recorded in the state topic, oldest first."""
    history = json.loads(world.kmirror("state", "history", "-f", str(spec), "--format", "json", check=True).stdout)
    return [h["status"] for h in history["applies"]]


def test_a_change_the_broker_refuses_is_warned_in_the_plan_reported_by_apply_and_the_rest_applied(
    world: World,
) -> None:
    good, bad, gone = f"{world.prefix}good", f"{world.prefix}bad", f"{world.prefix}gone"
    create_topics(
        world.source,
        (good, 1, {"retention.ms": "60000"}),
        (bad, 1, {"segment.bytes": "100000"}),  # valid on 3.9; Kafka 4.x requires at least 1 MiB
        (gone, 1, {"message.downconversion.enable": "false"}),  # a config Kafka 4.0 removed
    )
    spec = world.spec()
    plan = world.plan_json(spec)
    warned = [w for w in plan["warnings"] if "the broker refuses this change" in w]
    assert any(w.startswith(f"topic/{world.dst}/{world.remote(bad)}:") and "segment.bytes" in w for w in warned)
    assert any(w.startswith(f"topic/{world.dst}/{world.remote(gone)}:") and "downconversion" in w for w in warned)
    assert len(warned) == 2

    result = world.kmirror("apply", "-f", str(spec), "--auto-approve")
    assert result.returncode == 1
    assert f"topic/{world.dst}/{world.remote(bad)}" in result.stderr and "segment.bytes" in result.stderr
    assert topic_exists(world.target, world.remote(good))
    assert not topic_exists(world.target, world.remote(bad))
    remaining = world.plan_json(spec)
    assert sorted(c["address"] for c in remaining["changes"]) == sorted(
        f"topic/{world.dst}/{world.remote(t)}" for t in (bad, gone)
    )

    # The documented fix: leave the config out of the sync.
    fixed = world.spec(
        "sync: {config_exclude: ['segment\\.bytes', 'message\\.downconversion\\.enable']}", name="fixed.yaml"
    )
    world.kmirror("apply", "-f", str(fixed), "--auto-approve", check=True)
    assert world.kmirror("plan", "-f", str(fixed), "--detailed-exitcode").returncode == 0
