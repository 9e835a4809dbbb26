"""ACL sync on clusters with an authorizer: MM2's semantics, and nothing kmirror did not create is deleted."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.conftest import KafkaCluster
from tests.integration.plan.harness import World, create_topics, new_world

pytestmark = pytest.mark.integration


def _binding(topic: str, principal: str, op: AclOperation, perm: AclPermissionType, host: str = "*",
             rtype: ResourceType = ResourceType.TOPIC,
             pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:  # fmt: skip
    return AclBinding(rtype, topic, pattern, principal, host, op, perm)


def _create(cluster: KafkaCluster, *bindings: AclBinding) -> None:
    admin = AdminClient(cluster.config())
    for f in admin.create_acls(list(bindings), request_timeout=20).values():
        f.result(timeout=30)


def _delete(cluster: KafkaCluster, binding: AclBinding) -> None:
    admin = AdminClient(cluster.config())
    flt = AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                           binding.host, binding.operation, binding.permission_type)  # fmt: skip
    for f in admin.delete_acls([flt], request_timeout=20).values():
        f.result(timeout=30)


def _topic_acls(cluster: KafkaCluster, topic: str) -> set[tuple[str, str, str, str]]:
    admin = AdminClient(cluster.config())
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)  # fmt: skip
    return {
        (b.principal, b.host, b.operation.name, b.permission_type.name)
        for b in admin.describe_acls(flt, request_timeout=20).result(timeout=30)
    }


def test_literal_topic_acls_follow_mm2_semantics_and_hand_made_acls_survive(
    tmp_path: Path, authz_pair: tuple[KafkaCluster, KafkaCluster]
) -> None:
    source, target = authz_pair
    world: World = new_world(tmp_path, source, target)
    t = f"{world.prefix}orders"
    create_topics(source, (t, 1, {}))
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    _create(
        source,
        _binding(t, "User:alice", AclOperation.READ, allow),
        _binding(t, "User:bob", AclOperation.WRITE, allow),  # ALLOW WRITE: never synced
        _binding(t, "User:carol", AclOperation.ALL, allow),  # ALLOW ALL: synced as ALLOW READ
        _binding(t, "User:mallory", AclOperation.READ, deny, host="10.0.0.1"),  # DENY: copied, host kept
        _binding(world.prefix, "User:dave", AclOperation.READ, allow, pattern=ResourcePatternType.PREFIXED),
        _binding(f"{world.prefix}group", "User:erin", AclOperation.READ, allow, rtype=ResourceType.GROUP),
    )
    spec = world.spec()
    plan = world.plan_json(spec)
    remote = world.remote(t)
    acls = {c["address"]: c for c in plan["changes"] if c["kind"] == "acl"}
    assert set(acls) == {
        f"acl/{world.dst}/User:alice/READ/{remote}",
        f"acl/{world.dst}/User:carol/READ/{remote}",
        f"acl/{world.dst}/User:mallory/READ/{remote}",
    }
    assert all(c["action"] == "create" for c in acls.values())

    world.kmirror("apply", "-f", str(spec), "--auto-approve", check=True)
    assert _topic_acls(target, remote) == {
        ("User:alice", "*", "READ", "ALLOW"),
        ("User:carol", "*", "READ", "ALLOW"),
        ("User:mallory", "10.0.0.1", "READ", "DENY"),
    }
    assert world.kmirror("plan", "-f", str(spec), "--detailed-exitcode").returncode == 0

    # An ACL made by hand on the remote topic, and one removed on the source.
    _create(target, _binding(remote, "User:ops", AclOperation.DESCRIBE, allow))
    _delete(source, _binding(t, "User:alice", AclOperation.READ, allow))
    kept = world.kmirror("plan", "-f", str(spec), "--detailed-exitcode")
    assert kept.returncode == 0 and "prune.acls is off" in kept.stdout

    pruning = world.spec(prune="prune: {acls: true}", name="prune.yaml")
    pruned = world.plan_json(pruning)
    assert [(c["address"], c["action"]) for c in pruned["changes"]] == [
        (f"acl/{world.dst}/User:alice/READ/{remote}", "delete")
    ]
    world.kmirror("apply", "-f", str(pruning), "--auto-approve", check=True)
    assert _topic_acls(target, remote) == {
        ("User:carol", "*", "READ", "ALLOW"),
        ("User:mallory", "10.0.0.1", "READ", "DENY"),
        ("User:ops", "*", "DESCRIBE", "ALLOW"),  # made by hand: never deleted by kmirror
    }
    assert world.kmirror("plan", "-f", str(pruning), "--detailed-exitcode").returncode == 0


def test_without_an_authorizer_acl_sync_is_a_warning(world_no_authz: World) -> None:
    create_topics(world_no_authz.source, (f"{world_no_authz.prefix}x", 1, {}))
    plan = world_no_authz.plan_json(world_no_authz.spec())
    assert [c for c in plan["changes"] if c["kind"] == "acl"] == []
    assert any("has no authorizer" in w or "cannot be read (no authorizer" in w for w in plan["warnings"])


@pytest.fixture
def world_no_authz(tmp_path: Path, source: KafkaCluster, target: KafkaCluster) -> World:
    return new_world(tmp_path, source, target)
