"""A forged saved plan is refused by `kmirror apply PLANFILE` on real clusters, with the difference named, and
nothing changes; the plan as made applies. With KMIRROR_PLAN_KEY (sealed) and without it (unsealed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.plan.definition import Plan
from tests.conftest import KafkaCluster
from tests.integration.plan.harness import create_topics, describe, new_world, topic_exists

pytestmark = pytest.mark.integration

KEY = "an-integration-test-key-0123456789"


def _forge(plan_file: Path, address: str, key: bytes | None) -> Path:
    doc = json.loads(plan_file.read_text())
    change = next(c for c in doc["changes"] if c["address"] == address)
    change["after"]["configs"]["retention.ms"] = "1"
    forged = plan_file.with_name("forged.json")
    forged.write_text(Plan.from_json(json.dumps(doc)).sealed(key).to_json())
    return forged


@pytest.mark.parametrize("sealed", [True, False], ids=["with KMIRROR_PLAN_KEY", "without a key"])
def test_a_forged_plan_is_refused_and_the_plan_as_made_applies(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster, monkeypatch: pytest.MonkeyPatch, sealed: bool
) -> None:
    if sealed:
        monkeypatch.setenv("KMIRROR_PLAN_KEY", KEY)
    else:
        monkeypatch.delenv("KMIRROR_PLAN_KEY", raising=False)
    world = new_world(tmp_path, source, target)
    name = f"{world.prefix}orders"
    create_topics(source, (name, 2, {"retention.ms": "3600000"}))
    spec = world.spec()
    plan_file = tmp_path / "plan.json"
    made = world.kmirror("plan", "-f", str(spec), "--out", str(plan_file), check=True)
    assert json.loads(plan_file.read_text())["seal"] == ("hmac-sha256" if sealed else "none")
    assert ("Unsealed:" in made.stdout) is not sealed
    address = f"topic/{world.dst}/{world.remote(name)}"

    for reseal in (None, b"a-wrong-key-that-is-long-enough"):
        forged = _forge(plan_file, address, reseal)
        refused = world.kmirror("apply", "-f", str(spec), str(forged))
        assert refused.returncode == 1, refused.stdout
        assert f'{address}: after.configs.retention.ms: the plan file has "1"' in refused.stderr, refused.stderr
        assert 'a fresh plan has "3600000"' in refused.stderr
        assert not topic_exists(target, world.remote(name)), "a refused plan changed nothing"

    applied = world.kmirror("apply", "-f", str(spec), str(plan_file))
    assert applied.returncode == 0, applied.stderr
    assert ("not sealed" in applied.stdout) is not sealed
    assert describe(target, world.remote(name)) == (2, {"retention.ms": "3600000"})


def test_a_sealed_plan_applied_without_the_key_says_its_seal_was_not_checked(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = new_world(tmp_path, source, target)
    name = f"{world.prefix}orders"
    create_topics(source, (name, 1, {}))
    spec = world.spec()
    plan_file = tmp_path / "plan.json"
    monkeypatch.setenv("KMIRROR_PLAN_KEY", KEY)
    world.kmirror("plan", "-f", str(spec), "--out", str(plan_file), check=True)
    monkeypatch.delenv("KMIRROR_PLAN_KEY")
    applied = world.kmirror("apply", "-f", str(spec), str(plan_file))
    assert applied.returncode == 0, applied.stderr
    assert "its seal is not checked" in applied.stdout
    assert topic_exists(target, world.remote(name))
