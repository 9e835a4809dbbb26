"""The executor's graph walk, against a fake admin and a fake runner: which call comes before which, what is
skipped after a failed dependency, what is retried, and how each result is matched back to its change and
recorded."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest

from reconciler.app.executor import UNCONFIRMED, Executor, dependencies
from reconciler.kafka_clients.admin import Outcome
from reconciler.live.model import AclEntry
from reconciler.plan.definition import Action, AnyChange, Plan, change_of
from reconciler.plan.forms import Form
from reconciler.resources.addresses import Kind
from reconciler.resources.deployments import Deployment, StandaloneDeployment
from reconciler.state.lock import LeaseLostError

pytestmark = pytest.mark.unit

Events = list[tuple[str, ...]]


class FakeAdmin:
    """One cluster: logs every call into the shared `events`; `fail` maps a name to the outcomes it gets, in turn."""

    def __init__(self, cluster: str, events: Events, fail: Mapping[str, list[Outcome]] | None = None) -> None:
        self.cluster = cluster
        self.events = events
        self.fail = {k: list(v) for k, v in (fail or {}).items()}
        self.on_controller: dict[str, bool | None] = {}

    def _answer(self, name: str) -> Outcome:
        queue = self.fail.get(name)
        return queue.pop(0) if queue else Outcome(name, True)

    def create_topics(
        self, topics: Sequence[tuple[str, int, int, Mapping[str, str]]], validate_only: bool = False
    ) -> list[Outcome]:
        self.events.append(("create_topics", self.cluster, *(t[0] for t in topics)))
        return [self._answer(t[0]) for t in topics]

    def wait_visible(self, names: Iterable[str]) -> set[str]:
        return set()

    def confirm_created(self, names: Iterable[str]) -> dict[str, bool | None]:
        self.events.append(("confirm_created", self.cluster, *sorted(names)))
        return {n: self.on_controller.get(n) for n in names}

    def create_partitions(self, increases: Mapping[str, int]) -> list[Outcome]:
        self.events.append(("create_partitions", self.cluster, *increases))
        return [self._answer(t) for t in increases]

    def alter_topic_configs(
        self, changes: Mapping[str, tuple[Mapping[str, str], Iterable[str]]], validate_only: bool = False
    ) -> list[Outcome]:
        self.events.append(("alter_topic_configs", self.cluster, *changes))
        return [self._answer(t) for t in changes]

    def delete_topic(self, name: str) -> Outcome:
        self.events.append(("delete_topic", self.cluster, name))
        return self._answer(name)

    def create_acls(self, entries: Sequence[AclEntry]) -> list[Outcome]:
        if entries:
            self.events.append(("create_acls", self.cluster, *(e.resource_name for e in entries)))
        return [Outcome(e.resource_name, True) for e in entries]

    def delete_acls(self, entries: Sequence[AclEntry]) -> list[Outcome]:
        if entries:
            self.events.append(("delete_acls", self.cluster, *(e.resource_name for e in entries)))
        return [Outcome(e.resource_name, True) for e in entries]

    def alter_group_offsets(
        self,
        group: str,
        offsets: Mapping[tuple[str, int], int],
        metadata: Mapping[tuple[str, int], str] | None = None,
    ) -> Outcome:
        self.events.append(("alter_group_offsets", self.cluster, group))
        return self._answer(group)


class FakeRunner:
    def __init__(self, events: Events, fail: Iterable[str] = (), deployment: Deployment | None = None) -> None:
        self.events = events
        self.fail = set(fail)
        self.deployment = deployment

    def deploy(self, flow: str, spec: Mapping[str, Any], spec_digest: str) -> Deployment | None:
        self.events.append(("deploy", flow))
        if flow in self.fail:
            raise RuntimeError(f"spark said no to {flow}")
        return self.deployment

    def stop(self, flow: str) -> None:
        self.events.append(("stop", flow))
        if flow in self.fail:
            raise RuntimeError(f"could not stop {flow}")


def dumped(form: Form | None) -> dict[str, Any] | None:
    """A recorded form's JSON, as the state topic holds it."""
    return None if form is None else form.model_dump(mode="json")


class FakeRecorder:
    def __init__(self, events: Events | None = None) -> None:
        self.events = events
        self.intended: list[tuple[str, str, Form | None]] = []
        self.entries: list[tuple[str, str, Form | None, str, str, str]] = []

    def intend(self, items: list[tuple[str, str, Form | None]]) -> None:
        self.intended += items

    def record_many(self, entries: list[tuple[str, str, Form | None, str, str, str]]) -> None:
        if self.events is not None:
            self.events.append(("record", *(e[0] for e in entries)))
        self.entries += entries

    def by_address(self) -> dict[str, tuple[str, str, Form | None, str, str, str]]:
        return {e[0]: e for e in self.entries}


# -- changes, built by hand -----------------------------------------------------------------------------------
def topic_form(cluster: str, name: str, flow: str | None = "f", partitions: int = 1) -> dict[str, Any]:
    form: dict[str, Any] = {"cluster": cluster, "name": name, "partitions": partitions, "replication_factor": -1}
    form["configs"] = {}
    if flow is not None:
        form["source"] = {"cluster": "src", "topic": name, "flow": flow}
    return form


def create_topic(name: str, flow: str = "f", cluster: str = "dst") -> AnyChange:
    return change_of(
        address=f"topic/{cluster}/{name}", kind=Kind.TOPIC, action=Action.CREATE, after=topic_form(cluster, name, flow)
    )


def grow_topic(name: str, flow: str = "f") -> AnyChange:
    return change_of(
        address=f"topic/dst/{name}",
        kind=Kind.TOPIC,
        action=Action.UPDATE,
        before=topic_form("dst", name, None, 1),
        after=topic_form("dst", name, flow, 3),
    )


def delete_topic(name: str, flow: str | None = "f") -> AnyChange:
    return change_of(
        address=f"topic/dst/{name}", kind=Kind.TOPIC, action=Action.DELETE, before=topic_form("dst", name, flow)
    )


def internal_topic(cluster: str, name: str) -> AnyChange:
    return change_of(
        address=f"internal_topic/{cluster}/{name}",
        kind=Kind.INTERNAL_TOPIC,
        action=Action.CREATE,
        after=topic_form(cluster, name, None),
    )


def job(flow: str, action: Action = Action.CREATE, source: str = "src", target: str = "dst") -> AnyChange:
    after = None
    if action != Action.DELETE:
        spec = {"flow": {"name": flow, "source": source, "target": target}, "clusters": {}, "spark": {}}
        after = {"flow": flow, "operation": "deploy", "runner": "local", "spec_digest": "d1", "spec": spec}
    return change_of(address=f"job/{flow}", kind=Kind.JOB, action=action, after=after)


def offsets(group: str, flow: str = "f", topic: str = "orders") -> AnyChange:
    after = {
        "cluster": "dst",
        "group": group,
        "flow": flow,
        "source_cluster": "src",
        "partitions": [{"topic": topic, "partition": 0, "source_offset": 10, "target_offset": 10}],
    }
    return change_of(address=f"group_offsets/dst/{group}", kind=Kind.GROUP_OFFSETS, action=Action.CREATE, after=after)


def acl(topic: str) -> AnyChange:
    form = {
        "cluster": "dst",
        "topic": topic,
        "principal": "User:alice",
        "operation": "READ",
        "entries": [{"host": "*", "permission": "ALLOW"}],
        "managed": [{"host": "*", "permission": "ALLOW"}],
    }
    return change_of(address=f"acl/dst/User:alice/READ/{topic}", kind=Kind.ACL, action=Action.CREATE, after=form)


def plan_of(*changes: AnyChange) -> Plan:
    # Listed by kind, the way the planner lists them, so any other order the executor runs is its own doing.
    order = [Kind.INTERNAL_TOPIC, Kind.TOPIC, Kind.ACL, Kind.JOB, Kind.GROUP_OFFSETS]
    ordered = tuple(sorted(changes, key=lambda c: order.index(c.kind)))
    return Plan(plan_id="p", created_at="t", spec_digest="d", changes=ordered)


def run(
    *changes: AnyChange,
    admin_fail: Mapping[str, list[Outcome]] | None = None,
    runner_fail: Iterable[str] = (),
    deployment: Deployment | None = None,
) -> tuple[Events, list[Any], FakeRecorder]:
    events: Events = []
    admins = {"src": FakeAdmin("src", events), "dst": FakeAdmin("dst", events, admin_fail)}
    recorder = FakeRecorder()
    executor = Executor(admins, recorder, FakeRunner(events, runner_fail, deployment), retry_delays=(0, 0, 0))
    outcomes = executor.run(plan_of(*changes))
    return events, outcomes, recorder


def index(events: Events, *event: str) -> int:
    return events.index(tuple(event))


# -- order ----------------------------------------------------------------------------------------------------
def test_a_removed_flows_job_is_stopped_before_its_topics_are_deleted() -> None:
    events, outcomes, _ = run(
        delete_topic("orders", "gone"), delete_topic("payments", "gone"), job("gone", Action.DELETE)
    )
    assert events == [("stop", "gone"), ("delete_topic", "dst", "orders"), ("delete_topic", "dst", "payments")]
    assert all(o.outcome == "applied" for o in outcomes)


def test_a_topic_of_unknown_flow_is_deleted_only_after_every_job_stop_and_redeploy() -> None:
    events, _, _ = run(delete_topic("old", None), job("a", Action.DELETE), job("b", Action.REPLACE))
    assert index(events, "delete_topic", "dst", "old") > max(index(events, "stop", "a"), index(events, "deploy", "b"))


def test_a_redeploy_that_drops_a_topic_happens_before_the_topic_is_deleted() -> None:
    events, _, _ = run(delete_topic("dropped", "f"), job("f", Action.REPLACE))
    assert events == [("deploy", "f"), ("delete_topic", "dst", "dropped")]


def test_remote_and_internal_topics_exist_before_the_job_that_writes_them_starts() -> None:
    events, outcomes, _ = run(
        job("f"),
        create_topic("orders"),
        grow_topic("payments"),
        internal_topic("src", "heartbeats"),
        internal_topic("dst", "src.checkpoints.internal"),
    )
    deploy = index(events, "deploy", "f")
    assert deploy == len(events) - 1
    assert {e[0] for e in events[:deploy]} == {"create_topics", "create_partitions"}
    assert [o.address for o in outcomes][-1] == "job/f"


def test_a_renamed_flows_new_job_starts_only_after_the_old_one_stopped() -> None:
    events, _, _ = run(job("new"), job("old", Action.DELETE))
    assert events == [("stop", "old"), ("deploy", "new")]


def test_group_offsets_are_written_after_the_job_change_of_their_flow() -> None:
    events, _, _ = run(offsets("billing", "f"), job("f", Action.DELETE), create_topic("orders"))
    assert index(events, "alter_group_offsets", "dst", "billing") > index(events, "stop", "f")
    assert index(events, "alter_group_offsets", "dst", "billing") > index(events, "create_topics", "dst", "orders")


def test_an_acl_follows_the_creation_of_its_topic() -> None:
    events, _, _ = run(acl("orders"), create_topic("orders"))
    assert events == [("create_topics", "dst", "orders"), ("create_acls", "dst", "orders")]


def test_independent_creates_on_one_cluster_are_one_batch() -> None:
    events, _, _ = run(create_topic("a"), create_topic("b"), create_topic("c", "g"), job("f"), job("g"))
    assert events[0] == ("create_topics", "dst", "a", "b", "c")
    assert sorted(events[1:]) == [("deploy", "f"), ("deploy", "g")]


def test_dependencies_lists_what_each_change_waits_for() -> None:
    changes = [create_topic("orders"), internal_topic("other", "x"), job("f"), offsets("g"), delete_topic("t", "f")]
    assert dependencies(changes) == {
        "topic/dst/orders": (),
        "internal_topic/other/x": (),  # on neither of the job's clusters
        "job/f": ("topic/dst/orders",),
        "group_offsets/dst/g": ("job/f", "topic/dst/orders"),
        "topic/dst/t": ("job/f",),
    }


# -- skips after a failed dependency --------------------------------------------------------------------------
def test_a_topic_is_not_deleted_when_its_job_could_not_be_stopped() -> None:
    events, outcomes, recorder = run(delete_topic("orders", "gone"), job("gone", Action.DELETE), runner_fail={"gone"})
    assert ("delete_topic", "dst", "orders") not in events
    by = {o.address: o for o in outcomes}
    assert by["job/gone"].outcome == "failed" and "could not stop gone" in by["job/gone"].message
    assert by["topic/dst/orders"].outcome == "skipped"
    assert "job/gone" in by["topic/dst/orders"].message
    assert recorder.by_address()["topic/dst/orders"][4] == "skipped"  # the topic stays recorded as kmirror's


def test_a_job_is_not_started_when_a_topic_it_writes_failed_and_offsets_after_it_are_skipped() -> None:
    bad = Outcome("orders", False, "POLICY_VIOLATION: no")
    events, outcomes, _ = run(create_topic("orders"), job("f"), offsets("g"), admin_fail={"orders": [bad]})
    assert ("deploy", "f") not in events and ("alter_group_offsets", "dst", "g") not in events
    by = {o.address: (o.outcome, o.message) for o in outcomes}
    assert by["topic/dst/orders"] == ("failed", "POLICY_VIOLATION: no")
    assert by["job/f"][0] == "skipped" and "topic/dst/orders" in by["job/f"][1]
    assert by["group_offsets/dst/g"][0] == "skipped" and "job/f" in by["group_offsets/dst/g"][1]


def test_a_failure_skips_only_what_depends_on_it() -> None:
    bad = Outcome("a", False, "POLICY_VIOLATION: no")
    events, outcomes, _ = run(
        create_topic("a", "f"), create_topic("b", "g"), job("f"), job("g"), admin_fail={"a": [bad]}
    )
    assert ("deploy", "g") in events and ("deploy", "f") not in events
    assert {o.address: o.outcome for o in outcomes}["job/g"] == "applied"


def test_a_failed_deploy_skips_the_offsets_of_its_flow() -> None:
    events, outcomes, _ = run(job("f"), offsets("g"), runner_fail={"f"})
    assert ("alter_group_offsets", "dst", "g") not in events
    assert {o.address: o.outcome for o in outcomes} == {"job/f": "failed", "group_offsets/dst/g": "skipped"}


# -- retries --------------------------------------------------------------------------------------------------
def test_transient_failures_are_retried_and_permanent_ones_are_not() -> None:
    timeout = Outcome("a", False, "REQUEST_TIMED_OUT", transient=True)
    denied = Outcome("b", False, "TOPIC_AUTHORIZATION_FAILED")
    events, outcomes, _ = run(create_topic("a"), create_topic("b"), admin_fail={"a": [timeout, timeout], "b": [denied]})
    assert [e for e in events if e[0] == "create_topics"] == [
        ("create_topics", "dst", "a", "b"),
        ("create_topics", "dst", "a"),
        ("create_topics", "dst", "a"),
    ]
    assert {o.address: o.outcome for o in outcomes} == {"topic/dst/a": "applied", "topic/dst/b": "failed"}


def test_a_create_that_kept_timing_out_is_confirmed_with_the_controller() -> None:
    timeout = Outcome("t", False, "REQUEST_TIMED_OUT", transient=True)
    events: Events = []
    admin = FakeAdmin("dst", events, {n: [timeout] * 4 for n in ("there", "absent", "unknown")})
    admin.on_controller = {"there": True, "absent": False, "unknown": None}
    recorder = FakeRecorder()
    plan = plan_of(create_topic("there"), create_topic("absent"), create_topic("unknown"))
    outcomes = Executor({"dst": admin}, recorder, retry_delays=(0, 0, 0)).run(plan)
    assert ("confirm_created", "dst", "absent", "there", "unknown") in events
    assert {o.address: o.outcome for o in outcomes} == {
        "topic/dst/there": "applied",
        "topic/dst/absent": "failed",
        "topic/dst/unknown": "failed",
    }
    recorded = recorder.by_address()
    assert recorded["topic/dst/there"][4] == "applied"
    assert recorded["topic/dst/absent"][4] == "failed"  # the store withdraws its pending record
    assert recorded["topic/dst/unknown"][4] == UNCONFIRMED  # the store keeps it pending
    assert {a for a, _, _ in recorder.intended} == {"topic/dst/there", "topic/dst/absent", "topic/dst/unknown"}


def test_a_delete_that_timed_out_is_retried() -> None:
    timeout = Outcome("orders", False, "REQUEST_TIMED_OUT", transient=True)
    events, outcomes, _ = run(delete_topic("orders"), admin_fail={"orders": [timeout]})
    assert events == [("delete_topic", "dst", "orders")] * 2
    assert outcomes[0].outcome == "applied"


# -- results matched back to changes and recorded -------------------------------------------------------------
def test_each_result_is_recorded_under_its_own_change() -> None:
    bad = Outcome("b", False, "INVALID_CONFIG: nope")
    _, outcomes, recorder = run(create_topic("a"), create_topic("b"), create_topic("c"), admin_fail={"b": [bad]})
    assert [(o.address, o.outcome, o.message) for o in outcomes] == [
        ("topic/dst/a", "applied", ""),
        ("topic/dst/b", "failed", "INVALID_CONFIG: nope"),
        ("topic/dst/c", "applied", ""),
    ]
    recorded = recorder.by_address()
    assert dumped(recorded["topic/dst/a"][2]) == topic_form("dst", "a")
    assert recorded["topic/dst/b"][4] == "failed"


def test_a_deployed_job_is_recorded_with_the_runners_identity_of_it() -> None:
    deployment = StandaloneDeployment(submission_id="driver-1", rest_url="http://m:6066", checkpoint="/c")
    _, _, recorder = run(job("f"), deployment=deployment)
    attributes = recorder.by_address()["job/f"][2]
    assert dumped(attributes) == {
        **job("f").after.model_dump(mode="json"),
        "deployment": {
            "runner": "standalone",
            "submission_id": "driver-1",
            "rest_url": "http://m:6066",
            "checkpoint": "/c",
        },
    }


def test_a_new_job_is_recorded_as_pending_before_the_runner_starts_it() -> None:
    events: Events = []
    recorder = FakeRecorder(events)

    class Runner(FakeRunner):
        def deploy(self, flow: str, spec: Mapping[str, Any], spec_digest: str) -> Deployment | None:
            assert [a for a, _, _ in recorder.intended] == [f"job/{flow}"]  # known before it can run
            return super().deploy(flow, spec, spec_digest)

    Executor({}, recorder, Runner(events)).run(plan_of(job("f")))
    assert events == [("deploy", "f"), ("record", "job/f")]


def test_a_deployed_job_without_an_identity_is_recorded_as_planned() -> None:
    _, _, recorder = run(job("f"), deployment=None)
    assert dumped(recorder.by_address()["job/f"][2]) == job("f").after.model_dump(mode="json")


def test_a_stopped_job_and_a_deleted_topic_are_recorded_as_gone() -> None:
    _, _, recorder = run(job("f", Action.DELETE), delete_topic("t"))
    assert recorder.by_address()["job/f"][2] is None and recorder.by_address()["topic/dst/t"][2] is None


def test_a_job_is_recorded_before_the_topics_after_it_are_deleted() -> None:
    events: Events = []
    admins = {"dst": FakeAdmin("dst", events)}
    recorder = FakeRecorder(events)
    Executor(admins, recorder, FakeRunner(events)).run(plan_of(delete_topic("t"), job("f", Action.DELETE)))
    assert events == [("stop", "f"), ("record", "job/f"), ("delete_topic", "dst", "t"), ("record", "topic/dst/t")]


# -- the lease ------------------------------------------------------------------------------------------------
def test_an_apply_whose_lease_is_lost_stops_before_its_next_change_and_records_what_it_did() -> None:
    events: Events = []
    admins = {"dst": FakeAdmin("dst", events)}
    recorder = FakeRecorder(events)
    calls = {"n": 0}

    def guard() -> None:
        calls["n"] += 1
        if calls["n"] > 1:
            raise LeaseLostError("lost the lock")

    executor = Executor(admins, recorder, FakeRunner(events), guard=guard)
    with pytest.raises(LeaseLostError):
        executor.run(plan_of(create_topic("orders"), job("f")))
    assert events == [("create_topics", "dst", "orders"), ("record", "topic/dst/orders")]
