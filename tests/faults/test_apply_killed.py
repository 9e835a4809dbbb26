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


def _apply_killed_after(world: FaultWorld, spec: str, lines: int, extra_delay: float = 0.0) -> list[str]:
    """Run apply; SIGKILL it right after it printed `lines` progress lines (+ `extra_delay` s); what it printed."""
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
    seen: list[str] = []
    for line in proc.stdout:
        if line.startswith("["):
            seen.append(line.strip())
            if len(seen) >= lines:
                break
    time.sleep(extra_delay)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    return seen


@pytest.mark.timeout(600)
def test_apply_killed_at_every_step_then_plan_and_apply_converge(world: FaultWorld) -> None:
    topics = [f"{world.prefix}t{i}" for i in range(6)]
    for t in topics:
        create_topic(world.source, t, 2)
    none = str(world.spec(deploy="none"))
    started = time.monotonic()
    kills = []
    # Topics, internal topics and state records, step by step: a kill after the 1st, 2nd, ... reported change.
    for step in range(1, 4):
        seen = _apply_killed_after(world, none, step)
        kills.append(len(seen))
        plan = world.kmirror("plan", "-f", none, "--format", "json")
        assert plan.returncode in (0, 2), plan.stderr  # never "kmirror did not create it", never a stuck lock
    world.kmirror("apply", "-f", none, "--auto-approve", check=True)
    clean = world.kmirror("plan", "-f", none, "--detailed-exitcode")
    assert clean.returncode == 0, clean.stdout + clean.stderr

    # The runner call: killed while the job is being deployed (spark-submit starting), then apply again.
    local = str(world.spec())
    _apply_killed_after(world, local, 0, extra_delay=8.0)
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
    report("apply_killed", kills=[*kills, "deploy"], converged_s=round(time.monotonic() - started, 1), lost=0)
