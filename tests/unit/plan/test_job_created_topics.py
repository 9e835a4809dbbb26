"""Remote topics the flow's running replication job created for new source topics: kmirror's, not foreign.

The job's `RemoteTopicKeeper` creates the remote topic of a source topic that appears while it runs, by the
planner's own rules, without going through apply. The next plan records such a topic as owned (an update that
makes no broker call, plus any partition or config difference) instead of refusing it as a topic kmirror did
not create. The rule holds only for the job kmirror recorded as deployed, for the source topics and remote names
that job's recorded spec replicates, on the clusters it ran against.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from reconciler.plan.builder import PlanError
from reconciler.plan.definition import Action
from reconciler.resources.recorded import RecordedResource, RecordedState
from reconciler.spec.models import DesiredState, SparkSpec
from tests.unit.plan.builders import by_address, desired, live, owned, owned_topics, plan, recorded, topic

pytestmark = pytest.mark.unit

FLOW = "topics: {include: ['orders.*']}\nsync: {acls: false}"
REASON = (
    "src:orders.new (flow f): created by the flow's replication job (job/f) for a new source topic; "
    "recording it as kmirror's"
)


def job_record(ds: DesiredState, name: str = "f") -> tuple[str, str, dict[str, Any]]:
    """The job as apply records it after deploying it (the change's `after`)."""
    return (
        f"job/{name}",
        "job",
        {
            "flow": name,
            "operation": "deploy",
            "runner": "local",
            "spec_digest": ds.flow_digest(name),
            "spec": ds.flow_effective_spec(name),
        },
    )


def with_job(ds: DesiredState, *names: str, job_of: DesiredState | None = None) -> RecordedState:
    """Recorded: the heartbeats mirror and `names` owned, and the job deployed with `job_of`'s spec."""
    return recorded(*owned_topics("src.heartbeats", *names), job_record(job_of or ds))


def test_topic_the_deployed_job_created_is_recorded_as_owned_without_a_broker_change() -> None:
    ds = desired(FLOW)
    src = [topic("orders", 2, retention_ms="1000"), topic("orders.new", 3, retention_ms="2000")]
    dst = [topic("src.orders", 2, retention_ms="1000"), topic("src.orders.new", 3, retention_ms="2000")]
    lv = live(src=src, dst=dst)
    p = plan(ds, lv, with_job(ds, "src.orders"))
    assert [c.address for c in p.changes] == ["topic/dst/src.orders.new"]
    [change] = p.changes
    assert change.action == Action.UPDATE and change.reason == REASON
    # Nothing on the broker differs: before and after are the same topic, after also names its source.
    assert change.before.model_dump(mode="json") == {
        "cluster": "dst",
        "name": "src.orders.new",
        "partitions": 3,
        "replication_factor": 1,
        "configs": {"retention.ms": "2000"},
    }
    assert change.after.model_dump(mode="json") == {
        **change.before.model_dump(mode="json"),
        "source": {"cluster": "src", "topic": "orders.new", "flow": "f"},
    }
    assert p.summary.update == 1 and p.summary.total == 1
    assert not p.warnings  # records in it are the job's own replicated records, not someone else's


def test_holding_records_is_no_warning_for_a_topic_the_job_created() -> None:
    ds = desired(FLOW)
    lv = live(src=[topic("orders.new")], dst=[replace(topic("src.orders.new"), has_records=True)])
    p = plan(ds, lv, with_job(ds))
    assert by_address(p)["topic/dst/src.orders.new"].reason == REASON
    assert not p.warnings


def test_once_recorded_the_next_plan_is_clean() -> None:
    ds = desired(FLOW)
    lv = live(src=[topic("orders.new", 3, retention_ms="2000")], dst=[topic("src.orders.new", 3, retention_ms="2000")])
    [change] = plan(ds, lv, with_job(ds)).changes
    applied = with_job(ds)
    resources = {
        **applied.resources,
        change.address: RecordedResource(
            change.address, "topic", change.after.model_dump(mode="json") if change.after else {}
        ),
    }
    assert plan(ds, lv, RecordedState("lin-1", 2, resources)).changes == ()


def test_differences_are_planned_with_the_recording_as_for_an_owned_topic() -> None:
    """The source changed after the job created the remote topic: configs and partitions follow, as when owned."""
    ds = desired(FLOW)
    lv = live(src=[topic("orders.new", 4, retention_ms="5000")], dst=[topic("src.orders.new", 3, retention_ms="2000")])
    change = by_address(plan(ds, lv, with_job(ds)))["topic/dst/src.orders.new"]
    assert change.action == Action.UPDATE
    assert change.reason == REASON + "; partitions 3 -> 4 (source grew); configs retention.ms"
    assert change.after.model_dump(mode="json")["partitions"] == 4
    assert change.after.model_dump(mode="json")["configs"] == {"retention.ms": "5000"}


def test_without_a_recorded_job_an_unowned_target_topic_stays_an_error() -> None:
    ds = desired(FLOW)
    lv = live(src=[topic("orders.new")], dst=[topic("src.orders.new")])
    with pytest.raises(PlanError, match="kmirror did not create it"):
        plan(ds, lv, owned())


def test_flows_without_a_kmirror_job_keep_the_error() -> None:
    """spark.deploy none: kmirror runs no job, so a stale job record cannot vouch for a topic."""
    ds = desired(FLOW)
    no_jobs = ds.model_copy(update={"spark": SparkSpec(deploy="none")})
    lv = live(src=[topic("orders.new")], dst=[topic("src.orders.new")])
    with pytest.raises(PlanError, match="kmirror did not create it"):
        plan(no_jobs, lv, with_job(ds))


def test_a_topic_the_deployed_job_does_not_replicate_stays_an_error() -> None:
    """The filter was widened after the job was deployed: that job never created the new topic's mirror."""
    narrow, wide = desired("topics: {include: ['orders']}\nsync: {acls: false}"), desired(FLOW)
    lv = live(src=[topic("orders"), topic("orders.new")], dst=[topic("src.orders"), topic("src.orders.new")])
    with pytest.raises(PlanError) as err:
        plan(wide, lv, with_job(wide, "src.orders", job_of=narrow))
    assert "topic/dst/src.orders.new" in str(err.value) and "kmirror did not create it" in str(err.value)


def test_a_topic_named_by_another_policy_than_the_deployed_jobs_stays_an_error() -> None:
    prefix, identity = desired(FLOW), desired(FLOW + "\nnaming: {policy: identity}")
    lv = live(src=[topic("orders.new")], dst=[topic("orders.new")])
    with pytest.raises(PlanError, match=r"topic/dst/orders\.new"):
        plan(identity, lv, with_job(identity, job_of=prefix))


def test_a_job_that_ran_against_another_target_cluster_vouches_for_nothing() -> None:
    ds = desired(FLOW)
    moved = ds.model_copy(
        update={"clusters": {**ds.clusters, "dst": ds.clusters["dst"].model_copy(update={"bootstrap_servers": "x:9"})}}
    )
    lv = live(src=[topic("orders.new")], dst=[topic("src.orders.new")])
    with pytest.raises(PlanError, match="kmirror did not create it"):
        plan(moved, lv, with_job(moved, job_of=ds))


def test_an_unreadable_job_record_vouches_for_nothing() -> None:
    ds = desired(FLOW)
    address, kind, attrs = job_record(ds)
    broken = {**attrs, "spec": {**attrs["spec"], "flow": {"name": "f", "no_such_field": 1}}}
    rec = recorded(*owned_topics("src.heartbeats"), (address, kind, broken))
    lv = live(src=[topic("orders.new")], dst=[topic("src.orders.new")])
    with pytest.raises(PlanError, match="kmirror did not create it"):
        plan(ds, lv, rec)
