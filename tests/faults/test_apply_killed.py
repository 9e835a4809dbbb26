"""`kmirror apply` killed with SIGKILL at every step of its executor (the lock taken and the state read, the plan
made, a batch's creates recorded as pending, the create call made, its outcomes recorded, every change recorded, the
history written, and in the middle of the runner's deploy), then `plan` and `apply` converge: every remote topic
exists and is kmirror's, none is called foreign, none is forgotten, the job runs, and the plan after that is empty.

Each kill lands exactly at its step: the apply runs through `apply_steps.py`, the real command with one function
wrapped to freeze the process (SIGSTOP) there, and the test kills the frozen process. Each step's apply has new
topics to create.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import process_state
from tests.faults.conftest import FaultWorld, create_topic, report

pytestmark = [pytest.mark.faults, pytest.mark.integration]

STEPPER = Path(__file__).with_name("apply_steps.py")
#: The executor's steps in an apply's order (`apply_steps.STEPS`), each killed once with topics to create.
STEPS = ("locked", "planned", "intended", "created", "recorded", "finishing", "finished")


def _apply_killed(world: FaultWorld, spec: str, step: str, timeout: float = 180.0) -> int:
    """Run apply until it reaches `step` (frozen there), then SIGKILL it. Returns how many progress lines (changes
    done and recorded) it printed before it died."""
    out = world.tmp / f"apply-killed-{step}.out"
    with out.open("w") as stdout:
        proc = subprocess.Popen(
            [sys.executable, str(STEPPER), step, "apply", "-f", spec, "--auto-approve"],
            stdout=stdout,
            stderr=subprocess.STDOUT,
            cwd=world.tmp,
            env={**os.environ, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    try:
        while not (process_state(proc.pid) or "").startswith("T"):  # T: stopped (SIGSTOP) at the step
            if proc.poll() is not None:
                raise AssertionError(f"apply exited {proc.returncode} before step {step}:\n{out.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"apply did not reach step {step} within {timeout:.0f}s:\n{out.read_text()[-3000:]}"
                )
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    return sum(1 for line in out.read_text().splitlines() if line.startswith("["))


@pytest.mark.timeout(600)
def test_apply_killed_at_every_step_then_plan_and_apply_converge(world: FaultWorld) -> None:
    none = str(world.spec(deploy="none"))
    started = time.monotonic()
    kills = []
    topics: list[str] = []
    for step in STEPS:
        new = [f"{world.prefix}t-{step}-{i}" for i in range(3)]
        for t in new:
            create_topic(world.source, t, 2)
        topics += new
        kills.append({"step": step, "changes_done": _apply_killed(world, none, step)})
        plan = world.kmirror("plan", "-f", none, "--format", "json")
        assert plan.returncode in (0, 2), plan.stderr  # never "kmirror did not create it", never a stuck lock
    world.kmirror("apply", "-f", none, "--auto-approve", check=True)
    clean = world.kmirror("plan", "-f", none, "--detailed-exitcode")
    assert clean.returncode == 0, clean.stdout + clean.stderr

    # The runner call: killed while the job is being deployed (spark-submit started), then apply again.
    local = str(world.spec())
    kills.append({"step": "deploying", "changes_done": _apply_killed(world, local, "deploying")})
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
