"""A flow's `replication.throttle` planned as client quotas on the job's own client ids: created, changed, removed
with the setting (only quotas kmirror recorded), left alone when nothing changed, never redeploying the job; against
the brokers' quotas where they were read, against kmirror's record (with a warning) where they were not."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from reconciler.live.model import LiveState
from reconciler.plan.builder import PlanError
from reconciler.plan.definition import Action
from reconciler.plan.quotas import plan_quotas, unread_warning
from reconciler.resources.addresses import Kind
from reconciler.resources.recorded import RecordedResource, RecordedState
from tests.unit.plan.builders import by_address, desired, live, owned, plan, running

pytestmark = pytest.mark.unit

SOURCE = "quota/src/kmirror._kmirror.state.f.source"
TARGET = "quota/dst/kmirror._kmirror.state.f.target"


def _owned_quotas(rate: int, *, flow: str = "f", pending: bool = False) -> RecordedState:
    base = owned()
    forms = {
        SOURCE: {"cluster": "src", "client_id": SOURCE.split("/")[2], "flow": flow, "consumer_byte_rate": rate},
        TARGET: {"cluster": "dst", "client_id": TARGET.split("/")[2], "flow": flow, "producer_byte_rate": rate},
    }
    resources = dict(base.resources)
    resources.update({a: RecordedResource(a, "quota", f, pending=pending) for a, f in forms.items()})
    return RecordedState(lineage=base.lineage, serial=base.serial, resources=resources)


def _with_quotas(lv: LiveState, **quotas: dict[str, dict[str, float]]) -> LiveState:
    """`lv` with the client quotas read from the named clusters."""
    clusters = {n: replace(c, quotas=quotas[n]) if n in quotas else c for n, c in lv.clusters.items()}
    return replace(lv, clusters=clusters)


def _quotas(p: Any) -> dict[str, Any]:
    return {a: c for a, c in by_address(p).items() if c.kind == Kind.QUOTA}


def test_a_throttle_creates_a_fetch_quota_on_the_source_and_a_produce_quota_on_the_target() -> None:
    p = plan(desired("replication: {throttle: 10MB}"), live())
    quotas = _quotas(p)
    assert set(quotas) == {SOURCE, TARGET}
    assert quotas[SOURCE].action == Action.CREATE and quotas[SOURCE].before is None
    assert quotas[SOURCE].after.model_dump(mode="json") == {
        "cluster": "src",
        "client_id": "kmirror._kmirror.state.f.source",
        "flow": "f",
        "consumer_byte_rate": 10_000_000,
    }
    assert (
        quotas[TARGET].after is not None
        and quotas[TARGET].after.model_dump(mode="json")["producer_byte_rate"] == 10_000_000
    )
    assert "consumer_byte_rate" not in quotas[TARGET].after
    assert str(unread_warning(["src", "dst"])) in p.warnings  # not read: the plan says it did not ask the brokers
    read = plan(desired("replication: {throttle: 10MB}"), _with_quotas(live(), src={}, dst={}))
    assert {c.action for c in _quotas(read).values()} == {Action.CREATE}
    assert not [w for w in read.warnings if "client quotas" in w]


def test_quotas_are_listed_before_the_job_they_throttle() -> None:
    ds = desired("replication: {throttle: 10MB}")
    kinds = [c.kind for c in plan(ds, live(), jobs=running(ds)).changes]
    assert kinds.index(Kind.QUOTA) < kinds.index(Kind.JOB)


def test_an_applied_throttle_plans_nothing() -> None:
    p = plan(desired("replication: {throttle: 10MB}"), live(), _owned_quotas(10_000_000))
    assert _quotas(p) == {}
    assert not [w for w in p.warnings if "client quotas" in w]
    src_id, dst_id = SOURCE.split("/")[2], TARGET.split("/")[2]
    on_brokers = _with_quotas(
        live(), src={src_id: {"consumer_byte_rate": 1e7}}, dst={dst_id: {"producer_byte_rate": 1e7}}
    )
    assert _quotas(plan(desired("replication: {throttle: 10MB}"), on_brokers, _owned_quotas(10_000_000))) == {}


def test_a_changed_throttle_updates_both_quotas_and_does_not_redeploy_the_job() -> None:
    before = desired("replication: {throttle: 10MB}")
    after = desired("replication: {throttle: 20MiB}")
    assert after.flow_digest("f") == before.flow_digest("f")  # the job never reads it: no restart
    p = plan(after, live(), _owned_quotas(10_000_000), jobs=running(before, "f"))
    quotas = _quotas(p)
    assert {c.action for c in quotas.values()} == {Action.UPDATE}
    assert (
        quotas[SOURCE].before is not None
        and quotas[SOURCE].before.model_dump(mode="json")["consumer_byte_rate"] == 10_000_000
    )
    assert (
        quotas[SOURCE].after is not None
        and quotas[SOURCE].after.model_dump(mode="json")["consumer_byte_rate"] == 20 * 1024 * 1024
    )
    assert not [c for c in p.changes if c.kind == Kind.JOB]


def test_removing_the_throttle_deletes_the_quotas_kmirror_recorded() -> None:
    p = plan(desired(""), live(), _owned_quotas(10_000_000))
    quotas = _quotas(p)
    assert {a: c.action for a, c in quotas.items()} == {SOURCE: Action.DELETE, TARGET: Action.DELETE}
    assert (
        quotas[SOURCE].before is not None
        and quotas[SOURCE].before.model_dump(mode="json")["consumer_byte_rate"] == 10_000_000
    )
    assert quotas[SOURCE].after is None


def test_a_removed_flow_loses_its_quotas_and_a_disabled_one_keeps_them() -> None:
    removed = RecordedState(
        lineage="lin-1",
        serial=1,
        resources={
            a.replace(".f.", ".gone."): RecordedResource(
                a.replace(".f.", ".gone."), "quota", {**dict(r.attributes), "flow": "gone"}
            )
            for a, r in _owned_quotas(1000).resources.items()
            if r.kind == "quota"
        },
    )
    deletes = plan_quotas(desired(""), removed).changes
    assert {c.action for c in deletes} == {Action.DELETE} and len(deletes) == 2
    assert all("flow gone was removed" in c.reason for c in deletes)

    disabled = desired("enabled: false\nreplication: {throttle: 10MB}")
    assert plan_quotas(disabled, _owned_quotas(10_000_000)).changes == []


def test_a_quota_kmirror_did_not_record_is_never_deleted() -> None:
    assert plan_quotas(desired(""), owned()).changes == []


def test_a_create_an_apply_did_not_confirm_is_planned_again() -> None:
    changes = plan_quotas(desired("replication: {throttle: 10MB}"), _owned_quotas(10_000_000, pending=True)).changes
    assert {c.action for c in changes} == {Action.CREATE}


def test_live_quotas_when_readable_decide_the_action() -> None:
    ds = desired("replication: {throttle: 10MB}")
    src_id, dst_id = SOURCE.split("/")[2], TARGET.split("/")[2]
    # Drift: someone changed the source quota by hand; the target matches.
    drift = {"src": {src_id: {"consumer_byte_rate": 5e6}}, "dst": {dst_id: {"producer_byte_rate": 1e7}}}
    changes = {c.address: c for c in plan_quotas(ds, _owned_quotas(10_000_000), drift).changes}
    assert set(changes) == {SOURCE}
    assert changes[SOURCE].action == Action.UPDATE
    assert (
        changes[SOURCE].before is not None
        and changes[SOURCE].before.model_dump(mode="json")["consumer_byte_rate"] == 5_000_000
    )
    # Already set on kmirror's ids but not recorded: taken over (recorded), nothing to change on the broker.
    same = {"src": {src_id: {"consumer_byte_rate": 1e7}}, "dst": {dst_id: {"producer_byte_rate": 1e7}}}
    taken = plan_quotas(ds, owned(), same)
    assert {c.action for c in taken.changes} == {Action.UPDATE} and not taken.warnings
    # Removed by hand, then the setting removed: the delete only withdraws kmirror's record.
    gone = plan_quotas(desired(""), _owned_quotas(10_000_000), {"src": {}, "dst": {}}).changes
    assert {c.action for c in gone} == {Action.DELETE} and all(c.before is None for c in gone)


def test_a_cluster_whose_quotas_were_not_read_is_planned_from_the_record_and_named_in_a_warning() -> None:
    ds = desired("replication: {throttle: 10MB}")
    dst_id = TARGET.split("/")[2]
    # Only the target was read (the source refused): the target's drift shows, the source's row trusts the record.
    result = plan_quotas(ds, _owned_quotas(10_000_000), {"dst": {dst_id: {"producer_byte_rate": 2e6}}})
    assert [(c.address, c.action) for c in result.changes] == [(TARGET, Action.UPDATE)]
    assert result.warnings == []  # the source's row needs no change, so nothing was guessed
    removed = plan_quotas(desired(""), _owned_quotas(10_000_000), {"dst": {}})
    assert {c.address: c.before is None for c in removed.changes} == {SOURCE: False, TARGET: True}
    assert removed.warnings == [unread_warning(["src"])]


def test_a_client_id_the_flow_sets_itself_is_the_one_throttled() -> None:
    ds = desired("replication: {throttle: 1GB, consumer: {client.id: team-reader}}")
    assert "quota/src/team-reader" in _quotas(plan(ds, live()))


def test_two_flows_throttling_one_client_id_is_a_plan_error() -> None:
    other = (  # the comment at column 0 keeps the builder's dedent from moving the flow out of `flows:`
        "# flow g\n  - name: g\n    source: src\n    target: dst\n    topics: {include: ['x']}\n"
        "    replication: {throttle: 1MB, consumer: {client.id: shared}}\n"
    )
    ds = desired("replication: {throttle: 1MB, consumer: {client.id: shared}}", extra_flows=other)
    with pytest.raises(PlanError) as caught:
        plan(ds, live())
    assert "quota/src/shared: flows f and g would both throttle this client id" in str(caught.value)


def test_setting_a_throttle_on_a_running_flow_redeploys_its_job_after_the_quotas() -> None:
    before, after = desired(""), desired("replication: {throttle: 10MB}")
    p = plan(after, live(), jobs=running(before, "f"))
    actions = [(c.kind, c.action) for c in p.changes]
    assert actions == [(Kind.QUOTA, Action.CREATE), (Kind.QUOTA, Action.CREATE), (Kind.JOB, Action.REPLACE)]
    assert p.changes[-1].after is not None and "client_ids" in p.changes[-1].after.model_dump(mode="json")["spec"]


def test_each_brokers_quota_is_its_share_of_the_throttle() -> None:
    """Kafka enforces a client quota on each broker: on a cluster of 3 brokers the flow could read 3x the throttle,
    so each quota is the throttle divided by the cluster's brokers (rounded up), and the row says so."""
    lv = live()
    clusters = {n: replace(c, brokers={"src": 3, "dst": 2}[n]) for n, c in lv.clusters.items()}
    p = plan(desired("replication: {throttle: 10MB}"), replace(lv, clusters=clusters))
    quotas = _quotas(p)
    assert quotas[SOURCE].after.model_dump(mode="json")["consumer_byte_rate"] == 3_333_334
    assert quotas[TARGET].after.model_dump(mode="json")["producer_byte_rate"] == 5_000_000
    assert "10MB per second: 3333334B on each of the cluster's 3 brokers" in quotas[SOURCE].reason
    # a recorded quota of the whole throttle on a cluster that has grown to 3 brokers is lowered to its share
    grown = plan(desired("replication: {throttle: 10MB}"), replace(lv, clusters=clusters), _owned_quotas(10_000_000))
    assert _quotas(grown)[SOURCE].action == Action.UPDATE
