"""Terraform's verbs on real clusters: `kmirror show PLANFILE`, `kmirror state rm`, `kmirror import ADDRESS`.

What a user relies on: `show` prints exactly the saved plan (and refuses a damaged one with its location);
`state rm` forgets a topic and leaves it on the cluster; `import` adopts a remote topic that matches what the
flow would create (the next plan has nothing to do for it), refuses one that does not, with the difference, and
records nothing then; both leave an entry in `kmirror state history` and refuse while another holds the lock.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.admin import AclOperation, AclPermissionType

from reconciler.spec import load
from reconciler.state.lock import StateLock
from reconciler.state.store import StateStore
from tests.conftest import KafkaCluster
from tests.integration.plan.harness import World, create_topics, describe, new_world, topic_exists

pytestmark = pytest.mark.integration


def _history(world: World, spec: Path) -> list[dict[str, object]]:
    result = world.kmirror("state", "history", "-f", str(spec), "--format", "json", check=True)
    applies: list[dict[str, object]] = json.loads(result.stdout)["applies"]
    return applies


def test_show_renders_a_saved_plan_and_refuses_a_damaged_one(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster
) -> None:
    world = new_world(tmp_path, source, target)
    create_topics(source, (f"{world.prefix}orders", 2, {"retention.ms": "3600000"}))
    spec = world.spec()
    planfile = tmp_path / "plan.json"
    world.kmirror("plan", "-f", str(spec), "--out", str(planfile), check=True)
    address = f"topic/{world.dst}/{world.remote(world.prefix + 'orders')}"

    text = world.kmirror("show", str(planfile), check=True).stdout
    assert address in text and "retention.ms" in text
    markdown = world.kmirror("show", str(planfile), "--format", "markdown", check=True).stdout
    assert address in markdown
    shown = json.loads(world.kmirror("show", str(planfile), "--format", "json", check=True).stdout)
    saved = json.loads(planfile.read_text())
    assert shown["plan_id"] == saved["plan_id"] and shown["changes"] == saved["changes"]

    broken = tmp_path / "broken.json"
    broken.write_text(planfile.read_text()[:200])
    result = world.kmirror("show", str(broken))
    assert result.returncode == 1
    assert f"{broken}:5:" in result.stderr and "kmirror plan --out" in result.stderr  # file:line, what to do
    assert result.stdout == ""


def test_state_rm_forgets_without_touching_and_import_adopts_it_back(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster
) -> None:
    world = new_world(tmp_path, source, target)
    topic = f"{world.prefix}orders"
    remote = world.remote(topic)
    address = f"topic/{world.dst}/{remote}"
    create_topics(source, (topic, 3, {"retention.ms": "3600000"}))
    spec = world.spec()
    world.kmirror("apply", "-f", str(spec), "--auto-approve", check=True)

    rm = world.kmirror("state", "rm", "-f", str(spec), address, check=True)
    assert f"Removed {address}" in rm.stdout
    assert topic_exists(target, remote) and describe(target, remote)[0] == 3  # the cluster is untouched
    listed = world.kmirror("state", "list", "-f", str(spec), check=True).stdout
    assert address not in listed
    plan = world.kmirror("plan", "-f", str(spec))
    assert plan.returncode == 1 and "not a mirror kmirror owns" in plan.stderr  # forgotten: foreign now

    imported = world.kmirror("import", "-f", str(spec), address, check=True)
    assert f"Imported {address}" in imported.stdout
    assert json.loads(world.kmirror("state", "show", "-f", str(spec), address, check=True).stdout)["attributes"][
        "source"
    ] == {"cluster": world.src, "topic": topic, "flow": f"f{world.id}"}
    again = world.plan_json(spec)
    assert [c for c in again["changes"] if c["address"] == address] == []

    entries = _history(world, spec)
    rm_entry, import_entry = entries[-2], entries[-1]
    assert rm_entry["operation"] == "state rm" and rm_entry["addresses"] == [address]
    assert rm_entry["status"] == "completed"
    assert import_entry["operation"] == "import" and import_entry["addresses"] == [address]
    assert import_entry["changes"] == [
        {"address": address, "action": "import", "outcome": "applied", "message": "adopted as kmirror's"}
    ]

    elsewhere = world.kmirror("import", "-f", str(spec), f"topic/nowhere/{remote}")
    assert elsewhere.returncode == 1 and "no cluster 'nowhere'" in elsewhere.stderr
    unknown = world.kmirror("state", "rm", "-f", str(spec), f"topic/{world.dst}/nope")
    assert unknown.returncode == 1 and "no resource" in unknown.stderr
    assert len(_history(world, spec)) == len(entries)  # a refused edit records nothing


def test_import_refuses_a_topic_that_does_not_match_the_flow(
    tmp_path: Path, source: KafkaCluster, target: KafkaCluster
) -> None:
    world = new_world(tmp_path, source, target)
    short, other = f"{world.prefix}short", f"{world.prefix}configs"
    create_topics(source, (short, 4, {}), (other, 1, {"retention.ms": "3600000"}))
    create_topics(target, (world.remote(short), 2, {}), (world.remote(other), 1, {"retention.ms": "60000"}))
    spec = world.spec()

    fewer = world.kmirror("import", "-f", str(spec), f"topic/{world.dst}/{world.remote(short)}")
    assert fewer.returncode == 1
    assert "does not match" in fewer.stderr and "2 partitions, the flow would create 4" in fewer.stderr
    configs = world.kmirror("import", "-f", str(spec), f"topic/{world.dst}/{world.remote(other)}")
    assert configs.returncode == 1
    assert "config retention.ms is '60000', the flow would set '3600000'" in configs.stderr
    missing = world.kmirror("import", "-f", str(spec), f"topic/{world.dst}/{world.remote(world.prefix + 'none')}")
    assert missing.returncode == 1 and "no enabled flow replicates" in missing.stderr
    malformed = world.kmirror("import", "-f", str(spec), "topic/only-one-part")
    assert malformed.returncode == 1 and "topic/<cluster>/<name>" in malformed.stderr
    assert world.kmirror("state", "list", "-f", str(spec), check=True).stdout.startswith("The state is empty")
    assert describe(target, world.remote(short))[0] == 2  # refused: nothing changed on the cluster either


def test_import_and_state_rm_wait_for_the_lock(tmp_path: Path, source: KafkaCluster, target: KafkaCluster) -> None:
    world = new_world(tmp_path, source, target)
    owned, adopted = f"{world.prefix}orders", f"{world.prefix}payments"
    for topic in (owned, adopted):
        create_topics(source, (topic, 1, {}))
        create_topics(target, (world.remote(topic), 1, {}))
    spec = world.spec()
    world.kmirror("import", "-f", str(spec), f"topic/{world.dst}/{world.remote(owned)}", check=True)
    desired = load(str(spec)).state
    store = StateStore(world.dst, desired.client_config(world.dst), world.state_topic)
    lock = StateLock(store, "apply")
    with lock.held():
        held = world.kmirror("import", "-f", str(spec), f"topic/{world.dst}/{world.remote(adopted)}")
        assert held.returncode == 1 and lock.id in held.stderr
        rm = world.kmirror("state", "rm", "-f", str(spec), f"topic/{world.dst}/{world.remote(owned)}")
        assert rm.returncode == 1 and lock.id in rm.stderr
    world.kmirror("import", "-f", str(spec), f"topic/{world.dst}/{world.remote(adopted)}", check=True)
    world.kmirror("state", "rm", "-f", str(spec), f"topic/{world.dst}/{world.remote(owned)}", check=True)


def test_import_adopts_a_synced_acl_and_refuses_one_the_flow_would_not_create(
    tmp_path: Path, authz_pair: tuple[KafkaCluster, KafkaCluster]
) -> None:
    from tests.integration.plan.test_acl_sync import _binding, _create, _delete, _topic_acls

    source, target = authz_pair
    world = new_world(tmp_path, source, target)
    topic = f"{world.prefix}orders"
    remote = world.remote(topic)
    create_topics(source, (topic, 1, {}))
    _create(source, _binding(topic, "User:alice", AclOperation.READ, AclPermissionType.ALLOW))
    spec = world.spec()
    world.kmirror("apply", "-f", str(spec), "--auto-approve", check=True)
    address = f"acl/{world.dst}/User:alice/READ/{remote}"

    world.kmirror("state", "rm", "-f", str(spec), address, check=True)
    assert ("User:alice", "*", "READ", "ALLOW") in _topic_acls(target, remote)  # the ACL stays
    world.kmirror("import", "-f", str(spec), address, check=True)
    recorded = json.loads(world.kmirror("state", "show", "-f", str(spec), address, check=True).stdout)
    assert recorded["attributes"]["managed"] == [{"host": "*", "permission": "ALLOW"}]

    # kmirror owns it again: with prune.acls, the ACL removed on the source is deleted on the target
    _delete(source, _binding(topic, "User:alice", AclOperation.READ, AclPermissionType.ALLOW))
    pruning = world.spec(prune="prune: {acls: true}", name="prune.yaml")
    assert [(c["address"], c["action"]) for c in world.plan_json(pruning)["changes"]] == [(address, "delete")]

    _create(target, _binding(remote, "User:bob", AclOperation.WRITE, AclPermissionType.ALLOW))
    refused = world.kmirror("import", "-f", str(spec), f"acl/{world.dst}/User:bob/WRITE/{remote}")
    assert refused.returncode == 1 and "the flows would create no WRITE ACL for User:bob" in refused.stderr
