"""The executor's schema step, against a fake registry: a flow's subjects are registered before its job starts, a
failed registration skips that job only, and apply records the source id -> target id map it got."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconciler.adapters.schema_registry import RegistryClient
from reconciler.app.executor import Executor
from reconciler.plan.definition import KIND_ORDER, Action, Plan, SchemaChange
from reconciler.plan.schema_forms import SchemaForm
from reconciler.spec.schema_registry import RegistryConnection
from tests.unit.test_executor import Events, FakeAdmin, FakeRecorder, FakeRunner, job
from tests.unit.test_schema_registry_adapter import FakeRegistry

pytestmark = pytest.mark.unit


def schema(subject: str, flow: str, source_id: int) -> SchemaChange:
    after = {
        "cluster": "dst",
        "subject": subject,
        "flow": flow,
        "source_cluster": "src",
        "source_subject": subject.removeprefix("src."),
        "versions": {"1": {"source_id": source_id, "schema_type": "AVRO", "schema": json.dumps({"type": "string"})}},
        "compatibility": None,
        "ids": {},
    }
    return SchemaChange(address=f"schema/dst/{subject}", action=Action.CREATE, after=SchemaForm.model_validate(after))


class FailingFor(FakeRegistry):
    def __init__(self, events: Events, refused: str) -> None:
        super().__init__(modes=False, next_id=70)
        self.events, self.refused = events, refused

    def __call__(self, method: str, url: str, headers: Any, body: bytes | None, timeout: float) -> tuple[int, bytes]:
        if method == "POST":
            self.events.append(("register", url.rsplit("/subjects/", 1)[1].split("/")[0]))
            if self.refused in url:
                return 409, b'{"message": "incompatible"}'
        return super().__call__(method, url, headers, body, timeout)


def test_subjects_are_registered_before_their_flows_job_and_a_failure_skips_only_that_job() -> None:
    events: Events = []
    registry = RegistryClient(RegistryConnection("http://sr:8081"), transport=FailingFor(events, "src.g-value"))
    changes = [job("f"), job("g"), schema("src.f-value", "f", 3), schema("src.g-value", "g", 4)]
    ordered = tuple(sorted(changes, key=lambda c: (KIND_ORDER.index(c.kind), c.address)))
    recorder = FakeRecorder()
    executor = Executor(
        {"src": FakeAdmin("src", events), "dst": FakeAdmin("dst", events)},
        recorder,
        FakeRunner(events),
        retry_delays=(0, 0, 0),
        registries={"dst": registry},
    )
    outcomes = {o.address: o for o in executor.run(Plan(plan_id="p", created_at="t", spec_digest="d", changes=ordered))}
    assert outcomes["schema/dst/src.f-value"].outcome == "applied"
    assert (
        outcomes["schema/dst/src.g-value"].outcome == "failed"
        and "HTTP 409" in outcomes["schema/dst/src.g-value"].message
    )
    assert outcomes["job/f"].outcome == "applied"
    assert outcomes["job/g"].outcome == "skipped" and "schema/dst/src.g-value" in outcomes["job/g"].message
    assert events.index(("register", "src.f-value")) < events.index(("deploy", "f"))
    assert ("deploy", "g") not in events
    recorded = recorder.by_address()["schema/dst/src.f-value"]
    assert recorded[2] is not None and recorded[2].model_dump(mode="json")["ids"] == {
        "3": 71
    }  # the map apply got from the target
