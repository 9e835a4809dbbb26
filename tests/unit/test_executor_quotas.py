"""The executor's quota step, against fake admins: a flow's quotas are set before its job starts, a failed quota
skips that job (a throttled backfill never runs unthrottled), one batched call per cluster, before -> after turned
into set/remove calls, and what is recorded."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from reconciler.app.executor import Executor
from reconciler.kafka_clients.admin import Outcome
from reconciler.plan.definition import KIND_ORDER, Action, AnyChange, Plan, change_of
from reconciler.resources.addresses import Kind
from tests.unit.test_executor import Events, FakeAdmin, FakeRecorder, FakeRunner, create_topic, job

pytestmark = pytest.mark.unit


class QuotaAdmin(FakeAdmin):
    def __init__(self, cluster: str, events: Events, fail: Iterable[str] = ()) -> None:
        super().__init__(cluster, events)
        self.quota_fail = set(fail)
        self.calls: list[dict[str, dict[str, float | None]]] = []

    def alter_client_quotas(self, alterations: Mapping[str, Mapping[str, float | None]]) -> list[Outcome]:
        self.events.append(("alter_client_quotas", self.cluster, *alterations))
        self.calls.append({k: dict(v) for k, v in alterations.items()})
        return [Outcome(k, k not in self.quota_fail, "no" if k in self.quota_fail else "") for k in alterations]


def quota(
    cluster: str, client_id: str, action: Action, before: int | None, after: int | None, flow: str = "f"
) -> AnyChange:
    name = "consumer_byte_rate" if cluster == "src" else "producer_byte_rate"

    def form(rate: int | None) -> dict[str, Any] | None:
        return None if rate is None else {"cluster": cluster, "client_id": client_id, "flow": flow, name: rate}

    return change_of(
        address=f"quota/{cluster}/{client_id}", kind=Kind.QUOTA, action=action, before=form(before), after=form(after)
    )


def run(*changes: AnyChange, fail: Iterable[str] = ()) -> tuple[Events, list[Any], FakeRecorder, dict[str, QuotaAdmin]]:
    events: Events = []
    admins = {"src": QuotaAdmin("src", events, fail), "dst": QuotaAdmin("dst", events, fail)}
    recorder = FakeRecorder()
    ordered = tuple(sorted(changes, key=lambda c: (KIND_ORDER.index(c.kind), c.address)))
    executor = Executor(admins, recorder, FakeRunner(events), retry_delays=(0, 0, 0))
    outcomes = executor.run(Plan(plan_id="p", created_at="t", spec_digest="d", changes=ordered))
    return events, outcomes, recorder, admins


def test_a_flows_quotas_are_set_before_its_job_starts_one_call_per_cluster() -> None:
    events, outcomes, recorder, admins = run(
        job("f"),
        create_topic("orders"),
        quota("src", "kmirror.s.f.source", Action.CREATE, None, 10_000_000),
        quota("dst", "kmirror.s.f.target", Action.CREATE, None, 10_000_000),
    )
    deploy = events.index(("deploy", "f"))
    assert ("alter_client_quotas", "src", "kmirror.s.f.source") in events[:deploy]
    assert ("alter_client_quotas", "dst", "kmirror.s.f.target") in events[:deploy]
    assert admins["src"].calls == [{"kmirror.s.f.source": {"consumer_byte_rate": 10_000_000}}]
    assert all(o.outcome == "applied" for o in outcomes)
    # Recorded as owned (the next plan deletes it when the throttle goes), pending before the call was made.
    intended = [i[0] for i in recorder.intended if i[0].startswith("quota/")]
    assert sorted(intended) == ["quota/dst/kmirror.s.f.target", "quota/src/kmirror.s.f.source"]
    entry = recorder.by_address()["quota/src/kmirror.s.f.source"]
    assert (
        entry[2] is not None
        and entry[2].model_dump(mode="json")["consumer_byte_rate"] == 10_000_000
        and entry[4] == "applied"
    )


def test_a_failed_quota_skips_its_flows_job_and_only_that_one() -> None:
    events, outcomes, recorder, _ = run(
        job("f"),
        job("g"),
        quota("src", "kmirror.s.f.source", Action.CREATE, None, 1000),
        quota("src", "kmirror.s.g.source", Action.CREATE, None, 1000, flow="g"),
        fail=["kmirror.s.f.source"],
    )
    by = {o.address: o for o in outcomes}
    assert by["quota/src/kmirror.s.f.source"].outcome == "failed"
    assert by["job/f"].outcome == "skipped" and "quota/src/kmirror.s.f.source" in by["job/f"].message
    assert ("deploy", "f") not in events
    assert by["job/g"].outcome == "applied"
    # one batched call for both client ids on the source cluster
    assert [e for e in events if e[0] == "alter_client_quotas"] == [
        ("alter_client_quotas", "src", "kmirror.s.f.source", "kmirror.s.g.source")
    ]
    assert recorder.by_address()["quota/src/kmirror.s.f.source"][4] == "failed"


def test_updates_and_deletes_become_set_and_remove_calls_and_a_delete_drops_the_record() -> None:
    _, outcomes, recorder, admins = run(
        quota("src", "kmirror.s.f.source", Action.UPDATE, 10_000_000, 20_000_000),
        quota("dst", "kmirror.s.f.target", Action.DELETE, 10_000_000, None),
        job("f", Action.DELETE),
    )
    assert admins["src"].calls == [{"kmirror.s.f.source": {"consumer_byte_rate": 20_000_000}}]
    assert admins["dst"].calls == [{"kmirror.s.f.target": {"producer_byte_rate": None}}]
    assert all(o.outcome == "applied" for o in outcomes)
    assert recorder.by_address()["quota/dst/kmirror.s.f.target"][2] is None  # no longer kmirror's


def test_a_delete_of_a_quota_already_gone_makes_no_call() -> None:
    gone = change_of(address="quota/src/x", kind=Kind.QUOTA, action=Action.DELETE)
    events, outcomes, _, _ = run(gone)
    assert events == [] and [o.outcome for o in outcomes] == ["applied"]
