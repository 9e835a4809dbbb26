"""Replication jobs: deploy, no-op, redeploy naming changed fields, restart, stop."""

from __future__ import annotations

import pytest

from reconciler.plan.definition import Action
from reconciler.plan.jobs import changed_fields
from reconciler.resources.job_status import JobInfo, JobStatus
from reconciler.spec.loader import load_text
from reconciler.spec.models import DesiredState
from tests.unit.plan.builders import by_address, desired, live, owned, plan, running, topic

pytestmark = pytest.mark.unit

FLOW = "topics: {include: ['orders']}"


def _job_record(ds, name="f"):  # type: ignore[no-untyped-def]
    return (
        f"job/{name}",
        "job",
        {"flow": name, "spec_digest": ds.flow_digest(name), "spec": ds.flow_effective_spec(name)},
    )


def test_new_flow_deploys_its_job() -> None:
    ds = desired(FLOW)
    change = by_address(plan(ds, live(src=[topic("orders")]), jobs=JobStatus()))["job/f"]
    assert change.action == Action.CREATE
    assert change.after.model_dump(mode="json")["operation"] == "deploy"
    assert change.after.model_dump(mode="json")["spec_digest"] == ds.flow_digest("f")


def test_running_job_with_the_same_spec_is_left_alone() -> None:
    ds = desired(FLOW)
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    assert plan(ds, lv, owned("src.orders"), running(ds, "f")).changes == ()


def test_spec_change_redeploys_and_names_the_changed_fields() -> None:
    old = desired(FLOW)
    new = desired("topics: {include: ['orders', 'payments']}\nreplication: {producer: {linger.ms: '5'}}")
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    change = by_address(plan(new, lv, owned("src.orders", extra=(_job_record(old),)), running(old, "f")))["job/f"]
    assert change.action == Action.REPLACE and change.after.model_dump(mode="json")["operation"] == "redeploy"
    assert "flow.replication.producer" in change.reason and "flow.topics.include" in change.reason


def test_job_not_running_is_restarted() -> None:
    ds = desired(FLOW)
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    jobs = JobStatus({"f": JobInfo("f", False, ds.flow_digest("f"), detail="exited with code 137")})
    change = by_address(plan(ds, lv, owned("src.orders", extra=(_job_record(ds),)), jobs))["job/f"]
    assert change.action == Action.UPDATE and change.after.model_dump(mode="json")["operation"] == "restart"
    assert "exited with code 137" in change.reason


def test_removed_flow_stops_its_job_when_prune_jobs_allows() -> None:
    gone = desired(FLOW)
    ds = desired("enabled: false\n" + FLOW)
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    change = by_address(plan(ds, lv, owned("src.orders", extra=(_job_record(gone),)), running(gone, "f")))["job/f"]
    assert change.action == Action.DELETE
    assert (
        change.before.model_dump(mode="json")["removed"] is False
    )  # disabled: enabled again, it resumes from its checkpoint
    kept = plan(
        desired("enabled: false\n" + FLOW, prune="prune: {jobs: false}"), lv, owned("src.orders"), running(gone, "f")
    )
    assert kept.changes == ()
    assert any("prune.jobs is off" in w for w in kept.warnings)


def test_unknown_job_status_plans_no_job_change_and_warns() -> None:
    ds = desired(FLOW)
    p = plan(ds, live(src=[topic("orders")], dst=[topic("src.orders")]), owned("src.orders"), JobStatus(known=False))
    assert p.changes == () and any("job runner could not be asked" in w for w in p.warnings)


def test_changed_fields_lists_paths() -> None:
    assert changed_fields({"a": {"b": 1, "c": [1]}}, {"a": {"b": 2, "c": [1, 2]}}) == "a.b, a.c"
    assert changed_fields(None, {"a": 1}) == "no record of the previous spec"


def test_deploy_none_manages_no_job() -> None:
    ds = desired(FLOW).model_copy(update={"spark": desired(FLOW).spark.model_copy(update={"deploy": "none"})})
    p = plan(ds, live(src=[topic("orders")], dst=[topic("src.orders")]), owned("src.orders"), JobStatus(known=False))
    assert p.changes == () and not any("job" in w for w in p.warnings)


def test_a_job_the_runner_cannot_see_from_here_is_left_alone_with_a_warning() -> None:
    """A local job recorded on another host: restarting it here would run a second driver for the flow."""
    ds = desired(FLOW)
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    jobs = JobStatus({"f": JobInfo("f", None, ds.flow_digest("f"), detail="deploy: local on host ci-7")})
    p = plan(ds, lv, owned("src.orders", extra=(_job_record(ds),)), jobs)
    assert "job/f" not in by_address(p)
    assert any("job/f: deploy: local on host ci-7" in w for w in p.warnings)


def test_a_restart_whose_checkpoint_is_gone_says_it_resumes_from_the_offset_syncs() -> None:
    ds = desired(FLOW)
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    info = JobInfo(
        "f", False, ds.flow_digest("f"), checkpoint="/k/_kmirror.state/f/checkpoint", checkpoint_missing=True
    )
    change = by_address(plan(ds, lv, owned("src.orders", extra=(_job_record(ds),)), JobStatus({"f": info})))["job/f"]
    assert change.action == Action.UPDATE
    assert "checkpoint /k/_kmirror.state/f/checkpoint is missing" in change.reason
    assert "resumes from the offset-syncs" in change.reason


def test_restarts_data_loss_and_a_local_job_on_a_ci_runner_are_warned_about() -> None:
    ds = desired(FLOW)
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    info = JobInfo("f", True, ds.flow_digest("f"), restarts=3, last_error="TimeoutException: x", data_loss_records=7)
    p = plan(ds, lv, owned("src.orders", extra=(_job_record(ds),)), JobStatus({"f": info}, ephemeral_host=True))
    assert p.changes == ()
    text = "\n".join(p.warnings)
    assert "restarted its query 3 time(s); last error: TimeoutException: x" in text
    assert "7 record(s) were deleted on the source" in text
    assert "spark.deploy is 'local' on a CI runner" in text


def test_a_fenced_exactly_once_job_and_a_superseded_one_are_warned_about_without_a_change() -> None:
    ds = desired(FLOW)
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    fenced = JobInfo("f", True, ds.flow_digest("f"), fenced_writers=2)
    p = plan(ds, lv, owned("src.orders", extra=(_job_record(ds),)), JobStatus({"f": fenced}))
    assert p.changes == ()
    assert any("another writer of this flow's partitions is alive" in w and "2 time(s)" in w for w in p.warnings)
    superseded = JobInfo("f", False, ds.flow_digest("f"), state="stopped", superseded_by=7)
    p = plan(ds, lv, owned("src.orders", extra=(_job_record(ds),)), JobStatus({"f": superseded}))
    assert any("generation 7 of the flow" in w and "stopped for good" in w for w in p.warnings), p.warnings


def _renamed() -> DesiredState:
    return load_text("""
version: 1
clusters:
  src: {bootstrap_servers: "127.0.0.1:1"}
  dst: {bootstrap_servers: "127.0.0.1:2"}
state: {cluster: dst}
flows:
  - {name: g, source: src, target: dst, topics: {include: ['orders']}}
moved:
  - {from: f, to: g}
""").state


def test_a_renamed_flow_moves_its_job_instead_of_starting_a_new_one() -> None:
    old, new = desired(FLOW), _renamed()
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    p = plan(new, lv, owned("src.orders", extra=(_job_record(old),)), running(old, "f"))
    changes = by_address(p)
    move = changes["job/g"]
    assert move.action == Action.UPDATE and move.after.model_dump(mode="json")["operation"] == "move"
    assert move.after.model_dump(mode="json")["moved_from"] == "f" and "moved from job/f" in move.reason
    assert move.before.model_dump(mode="json") == {"running": True, "spec_digest": old.flow_digest("f")}
    assert "job/f" not in changes  # not stopped and forgotten: carried over


def test_a_move_whose_old_flow_was_never_deployed_is_a_plain_deploy() -> None:
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    change = by_address(plan(_renamed(), lv, owned("src.orders"), JobStatus()))["job/g"]
    assert change.action == Action.CREATE and change.after.model_dump(mode="json")["operation"] == "deploy"


def _without_flows() -> DesiredState:
    """The test file with every flow removed from it."""
    return load_text("""
version: 1
clusters:
  src: {bootstrap_servers: "127.0.0.1:1"}
  dst: {bootstrap_servers: "127.0.0.1:2"}
state: {cluster: dst}
""").state


def test_a_flow_removed_from_the_file_has_its_job_stopped_and_its_checkpoint_forgotten() -> None:
    """Added back (its remote topics maybe pruned meanwhile), it is a new flow: it starts from start_from."""
    gone = desired(FLOW)
    ds = _without_flows()
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    change = by_address(plan(ds, lv, owned("src.orders", extra=(_job_record(gone),)), running(gone, "f")))["job/f"]
    assert change.action == Action.DELETE and change.before.model_dump(mode="json")["removed"] is True
    assert "forget its checkpoint" in change.reason


@pytest.mark.parametrize(
    ("delivery", "deployment", "group", "said"),
    [
        ("exactly_once", {}, "kmirror-eos._kmirror.state.f", True),
        ("exactly_once", {"eos_flow": "old-name"}, "kmirror-eos._kmirror.state.old-name", True),  # renamed once
        ("at_least_once", {}, "kmirror-eos._kmirror.state.f", False),  # switched back before the removal: a no-op
    ],
)
def test_a_removed_flows_exactly_once_group_is_forgotten_with_its_checkpoint(
    delivery: str, deployment: dict[str, str], group: str, said: bool
) -> None:
    """Else the flow added back with exactly-once delivery skips every record below its old positions."""
    gone = desired(FLOW + f"\nreplication: {{delivery: {delivery}}}")
    ds = _without_flows()
    address, kind, attributes = _job_record(gone)
    record = (address, kind, {**attributes, "deployment": deployment})
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    change = by_address(plan(ds, lv, owned("src.orders", extra=(record,)), running(gone, "f")))["job/f"]
    assert change.before.model_dump(mode="json")["eos_group"] == {
        "cluster": "dst",
        "group": group,
        "exactly_once": said,
    }
    assert (f"its exactly-once group {group} on dst" in change.reason) is said


def test_a_new_flow_starting_at_a_time_says_where_it_starts() -> None:
    at = by_address(
        plan(
            desired(FLOW + "\nreplication: {start_from: '2026-11-01T00:00:00Z'}"),
            live(src=[topic("orders")]),
            jobs=JobStatus(),
        )
    )
    assert "starts at 2026-11-01T00:00:00Z: the first record at or after it in each partition" in at["job/f"].reason
    back = by_address(
        plan(desired(FLOW + "\nreplication: {start_from: 7d}"), live(src=[topic("orders")]), jobs=JobStatus())
    )
    assert "starts 7d back from its first start" in back["job/f"].reason
    plain = by_address(plan(desired(FLOW), live(src=[topic("orders")]), jobs=JobStatus()))
    assert plain["job/f"].reason.startswith("new flow src -> dst")


def test_a_changed_start_redeploys_a_running_flow_and_says_it_moves_nothing() -> None:
    old = desired(FLOW)
    new = desired(FLOW + "\nreplication: {start_from: 7d}")
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    change = by_address(plan(new, lv, owned("src.orders", extra=(_job_record(old),)), running(old, "f")))["job/f"]
    assert change.action == Action.REPLACE
    assert "start_from earliest -> 7d moves nothing" in change.reason
    assert "the job goes on from its checkpoint" in change.reason
