"""Folding the state topic's records into a snapshot: latest value wins, tombstones remove, history parts join."""

from __future__ import annotations

import json

import pytest

from reconciler.plan.forms import JobRecord
from reconciler.resources.deployments import LocalDeployment, StandaloneDeployment, deployment_of
from reconciler.state.records import (
    LEASE,
    LOCK,
    META,
    RESOURCE,
    HistoryEntry,
    HistoryPart,
    LeaseRecord,
    LockRecord,
    MetaRecord,
    encode,
    fold,
    history_key,
    history_part_key,
)

pytestmark = pytest.mark.unit

#: The smallest effective spec of a flow `f` (a job form carries one).
SPEC = {"flow": {"name": "f", "source": "a", "target": "b"}, "clusters": {}, "spark": {}}


def _log(*records: tuple[str, object]) -> list[tuple[str, bytes | None, int]]:
    # as every kmirror version writes a record's value: sorted, compact JSON (a tombstone: None)
    return [
        (k, None if v is None else json.dumps(v, sort_keys=True, separators=(",", ":")).encode(), i)
        for i, (k, v) in enumerate(records)
    ]


def test_latest_value_wins_and_tombstones_remove() -> None:
    snap = fold(
        _log(
            (META, {"lineage": "L", "serial": 1}),
            (RESOURCE + "topic/c/a", {"kind": "topic", "attributes": {"v": 1}}),
            (RESOURCE + "topic/c/b", {"kind": "topic", "attributes": {"v": 1}, "pending": True}),
            (RESOURCE + "topic/c/a", {"kind": "topic", "attributes": {"v": 2}}),
            (RESOURCE + "topic/c/b", None),
            (META, {"lineage": "L", "serial": 2}),
        )
    )
    assert (snap.lineage, snap.serial) == ("L", 2)
    recorded = snap.recorded()
    assert set(recorded.resources) == {"topic/c/a"}
    assert recorded.get("topic/c/a") == {"v": 2}
    assert snap.end_offset == 6


def test_pending_resources_are_owned_and_marked() -> None:
    snap = fold(_log((RESOURCE + "topic/c/p", {"kind": "topic", "attributes": {}, "pending": True})))
    rec = snap.recorded()
    assert rec.owns("topic/c/p") and rec.pending("topic/c/p")


def test_history_parts_are_joined_in_order() -> None:
    snap = fold(
        _log(
            (history_part_key(1, 1), {"changes": [{"address": "c"}]}),
            (history_part_key(1, 0), {"changes": [{"address": "a"}]}),
            (history_part_key(1, 0), {"changes": [{"address": "a"}, {"address": "b"}]}),  # rewritten, grown
            (history_key(1), {"serial": 1, "status": "completed", "counts": {"applied": 3}}),
        )
    )
    [apply] = snap.applies()
    assert [c.address for c in apply.changes] == ["a", "b", "c"]
    assert apply.status == "completed"


def test_lock_claims_keep_their_first_offset_and_latest_lease() -> None:
    snap = fold(
        _log(
            (LOCK + "x", {"holder": {"user": "u"}, "operation": "apply", "claimed_at": 1, "lease_until": 10}),
            (LOCK + "y", {"holder": {"user": "v"}, "operation": "apply", "claimed_at": 2, "lease_until": 10}),
            (LEASE + "x", {"lease_until": 99}),
            (LOCK + "y", None),
        )
    )
    assert list(snap.claims) == ["x"]
    assert snap.claims["x"].offset == 0 and snap.claims["x"].lease_until == 99


def test_only_a_resources_latest_value_is_parsed_and_its_place_is_kept() -> None:
    records = _log(
        (RESOURCE + "topic/c/a", {"kind": "topic", "attributes": {"v": 1}, "pending": True}),
        (RESOURCE + "topic/c/b", {"kind": "topic", "attributes": {"v": 1}}),
        (RESOURCE + "topic/c/c", {"kind": "topic", "attributes": {"v": 1}}),
        (RESOURCE + "topic/c/a", {"kind": "topic", "attributes": {"v": 2}}),
        (RESOURCE + "topic/c/b", None),
        (RESOURCE + "topic/c/b", {"kind": "topic", "attributes": {"v": 3}}),
    )
    records[0] = (records[0][0], b"not json: superseded, so never parsed", 0)
    snap = fold(records)
    # a keeps the place of its first record; b, deleted and recreated, moves to the end (as a dict would hold them)
    assert list(snap.resources) == ["topic/c/a", "topic/c/c", "topic/c/b"]
    assert [r.attributes["v"] for r in snap.resources.values()] == [2, 1, 3]
    assert not snap.recorded().pending("topic/c/a")


#: Values as the landed version (7ab5122) wrote them: dicts, sorted compact JSON.
LANDED = [
    (META, {"lineage": "L", "serial": 3, "updated_at": "2026-11-20T10:00:00Z"}),
    (
        RESOURCE + "job/f",
        {
            "address": "job/f",
            "kind": "job",
            "attributes": {
                "flow": "f",
                "operation": "deploy",
                "runner": "local",
                "spec_digest": "sha256:1",
                "spec": {"flow": {"source": "a", "target": "b"}},
                "deployment": {"flow": "f", "host": "h", "pid": 7, "digest": "sha256:1", "started_at": 1.5},
            },
            "serial": 3,
            "plan_id": "p",
            "applied_at": "2026-11-20T10:00:01Z",
        },
    ),
    (
        RESOURCE + "topic/b/a.t",
        {
            "address": "topic/b/a.t",
            "kind": "topic",
            "attributes": {"cluster": "b"},
            "pending": True,
            "serial": 3,
            "plan_id": "p",
            "applied_at": "2026-11-20T10:00:01Z",
        },
    ),
    (
        history_key(3),
        {
            "serial": 3,
            "lineage": "L",
            "plan_id": "p",
            "spec_digest": "sha256:2",
            "lock_id": "abc",
            "operation": "cutover",
            "flow": "f",
            "who": {"user": "u", "host": "h", "pid": 7, "git_commit": None, "ci": False},
            "started_at": "2026-11-20T10:00:00Z",
            "finished_at": None,
            "status": "running",
            "counts": {"applied": 1},
            "parts": 1,
        },
    ),
    (
        history_part_key(3, 0),
        {"changes": [{"address": "job/f", "action": "create", "outcome": "applied", "message": ""}]},
    ),
    (
        LOCK + "abc",
        {
            "id": "abc",
            "holder": {"user": "u", "host": "h", "pid": 7, "git_commit": "c", "ci": True},
            "operation": "apply",
            "claimed_at": 1700000000.25,
            "lease_until": 1700000060.25,
        },
    ),
    (LEASE + "abc", {"id": "abc", "lease_until": 1700000060.25, "lease_seconds": 60.0}),
]


def test_records_written_by_the_landed_version_read_typed_and_write_back_as_the_same_bytes() -> None:
    written = _log(*LANDED)
    snap = fold(written)
    by_key = {k: v for k, v, _ in written}
    assert (snap.lineage, snap.serial) == ("L", 3)
    for address, record in snap.resources.items():
        assert encode(record) == by_key[RESOURCE + address]
    job = snap.recorded().resources["job/f"]
    assert job.kind == "job" and not job.pending and snap.recorded().pending("topic/b/a.t")
    [entry] = snap.applies()
    assert (entry.operation, entry.flow, entry.who.user, entry.status) == ("cutover", "f", "u", "running")
    head = HistoryEntry.model_validate_json(by_key[history_key(3)] or b"")
    assert encode(head) == by_key[history_key(3)]
    assert [c.address for c in entry.changes] == ["job/f"]
    claim = snap.claims["abc"]
    assert (claim.holder.user, claim.holder.pid, claim.holder.ci, claim.lease_until) == ("u", 7, True, 1700000060.25)
    for key in (META, LOCK + "abc", LEASE + "abc", history_part_key(3, 0)):
        model = {META: MetaRecord, LOCK + "abc": LockRecord, LEASE + "abc": LeaseRecord}.get(key, HistoryPart)
        assert encode(model.model_validate_json(by_key[key] or b"")) == by_key[key]


def test_a_deployment_recorded_before_deployments_named_their_runner_is_migrated_on_read() -> None:
    old_standalone = {"flow": "f", "submission_id": "driver-1", "rest_url": "http://m:6066", "master": None}
    assert isinstance(deployment_of(old_standalone), StandaloneDeployment)
    assert deployment_of(old_standalone).model_dump(mode="json") == {**old_standalone, "runner": "standalone"}
    old_local = {"flow": "f", "host": "h", "pid": 7}
    assert isinstance(deployment_of(old_local), LocalDeployment)
    record = JobRecord.model_validate(
        {
            "flow": "f",
            "operation": "deploy",
            "runner": "local",
            "spec_digest": "d",
            "spec": SPEC,
            "deployment": old_local,
        }
    )
    assert isinstance(record.deployment, LocalDeployment) and record.deployment.pid == 7
