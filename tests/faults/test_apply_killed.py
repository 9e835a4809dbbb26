"""`kmirror apply` killed with SIGKILL at every step (after each admin batch and state write it reports, and in the
middle of the runner's deploy), then `plan` and `apply` converge: every remote topic exists and is kmirror's, none
is called foreign, none is forgotten, the job runs, and the plan after that is empty."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from tests.faults.conftest import KMIRROR, FaultWorld, create_topic, report

pytestmark = [pytest.mark.faults, pytest.mark.integration]


def _apply_killed(world: FaultWorld, spec: str, *, after_lines: int = 0, after_seconds: float = 0.0) -> int:
    """Run apply; SIGKILL it once it printed `after_lines` progress lines and `after_seconds` passed since it
    started. Returns how many progress lines (changes done and recorded) it printed before it died."""
    proc = subprocess.Popen(
        [*KMIRROR, "apply", "-f", spec, "--auto-approve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=world.tmp,
        env={**os.environ, "NO_COLOR": "1"},
        start_new_session=True,
    )
    assert proc.stdout is not None
    started = time.monotonic()
    seen = 0
    if after_lines:
        for line in proc.stdout:
            seen += line.startswith("[")
            if seen >= after_lines:
                break
    time.sleep(max(0.0, after_seconds - (time.monotonic() - started)))
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    rest = proc.stdout.read()
    return seen + sum(1 for line in rest.splitlines() if line.startswith("["))


@pytest.mark.timeout(600)
def test_apply_killed_at_every_step_then_plan_and_apply_converge(world: FaultWorld) -> None:
    none = str(world.spec(deploy="none"))
    started = time.monotonic()
    kills = []
    topics: list[str] = []
    # Killed at points spread over an apply's life: taking the lock, reading the clusters and the state, and around
    # its first batch (the pending record, the create call, its record) and the ones after, each time with new
    # topics to create. The points are fractions of the time a whole apply took here to report its first change.
    first = [f"{world.prefix}t-first-{i}" for i in range(3)]
    for t in first:
        create_topic(world.source, t, 2)
    topics += first
    t0 = time.monotonic()
    _apply_killed(world, none, after_lines=1)
    first_change = time.monotonic() - t0
    for n, fraction in enumerate((0.3, 0.6, 0.8, 0.9, 0.95, 1.0, 1.05, 1.2)):
        new = [f"{world.prefix}t{n}-{i}" for i in range(3)]
        for t in new:
            create_topic(world.source, t, 2)
        topics += new
        delay = round(first_change * fraction, 2)
        done = _apply_killed(world, none, after_seconds=delay)
        kills.append({"after_s": delay, "changes_done": done})
        plan = world.kmirror("plan", "-f", none, "--format", "json")
        assert plan.returncode in (0, 2), plan.stderr  # never "kmirror did not create it", never a stuck lock
    world.kmirror("apply", "-f", none, "--auto-approve", check=True)
    clean = world.kmirror("plan", "-f", none, "--detailed-exitcode")
    assert clean.returncode == 0, clean.stdout + clean.stderr

    # The runner call: killed while the job is being deployed (spark-submit starting), then apply again.
    local = str(world.spec())
    kills.append({"during": "deploy", "changes_done": _apply_killed(world, local, after_seconds=10.0)})
    converge = world.kmirror("apply", "-f", local, "--auto-approve", "--lock-timeout", "90")
    assert converge.returncode == 0, converge.stdout + converge.stderr
    final = world.kmirror("plan", "-f", local, "--format", "json", "--detailed-exitcode")
    assert final.returncode == 0, final.stdout + final.stderr
    listed = world.kmirror("state", "list", "-f", local, check=True).stdout
    addresses = {line.split()[0] for line in listed.splitlines() if line.strip()}
    for t in topics:
        assert f"topic/{world.dst}/{world.remote(t)}" in addresses  # nothing forgotten
    assert f"job/{world.flow}" in addresses
    assert json.loads(final.stdout)["changes"] == []
    report("apply_killed", kills=kills, converged_s=round(time.monotonic() - started, 1), foreign=0, forgotten=0)
