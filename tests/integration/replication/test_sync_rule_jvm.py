"""The JVM offset-sync rule the job runs (jvm/OffsetSyncRule.java) decides exactly as the Python port of MM2's
rule (reconciler.core.offsets.emitter.decide_sync, itself checked against MM2's own test cases), on MM2's test
sequence and on random sequences with gaps, repeats, rewinds and truncations.

Needs a JDK: the rule is compiled into the interceptor jar, as the job does on first use.
"""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from reconciler.artifacts import interceptor_jar
from reconciler.replication.interceptor import SYNC_RULE_CLASS
from tests.unit.offsets.test_emitter import run as mm2_rule

pytestmark = [pytest.mark.integration]


def jvm_decisions(offset_lag_max: int, pairs: list[tuple[int, int]]) -> list[bool]:
    java = shutil.which("java")
    assert java is not None, "a JDK is needed"
    stdin = "".join(f"{up} {down}\n" for up, down in pairs)
    out = subprocess.run(
        [java, "-cp", str(interceptor_jar()), SYNC_RULE_CLASS, str(offset_lag_max)],
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    return [line == "1" for line in out]


def random_pairs(rng: random.Random, n: int) -> list[tuple[int, int]]:
    """Mostly one-to-one copies, with upstream gaps and repeats, rewinds, and downstream truncations."""
    up, down, pairs = rng.randrange(0, 1000), rng.randrange(0, 1000), []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.80:
            up, down = up + 1, down + 1
        elif roll < 0.90:
            up, down = up + rng.randrange(2, 50), down + 1  # compacted or aborted records, markers
        elif roll < 0.94:
            pass  # the same record again (a retried batch)
        elif roll < 0.97:
            up = max(0, up - rng.randrange(1, 100))  # upstream rewind (a re-run batch)
            down += 1
        else:
            down = max(0, down - rng.randrange(1, 100))  # target truncated or recreated
        pairs.append((up, down))
    return pairs


def test_jvm_rule_agrees_with_the_python_port_of_mm2() -> None:
    rng = random.Random(20261121)
    cases = [(50, [(0, 100), (2, 102), (3, 152), (4, 153), (5, 154), (6, 203), (7, 204), (2, 206), (4, 3)])]
    cases += [(rng.choice([0, 1, 3, 10, 100]), random_pairs(rng, 2000)) for _ in range(20)]
    for lag, pairs in cases:
        jvm, python = jvm_decisions(lag, pairs), mm2_rule(lag, pairs)
        assert sum(python) > 1, "the case exercises the rule"
        assert len(jvm) == len(python)
        assert jvm == python, f"offset_lag_max={lag}: differs at {[a == b for a, b in zip(jvm, python, strict=True)]}"
