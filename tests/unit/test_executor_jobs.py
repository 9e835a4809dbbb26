"""The executor's job changes against a fake runner: the deployment the runner returns is recorded with the job,
and a renamed flow's job is moved (the old one stopped, the new one deployed on its checkpoint, the old name's
record removed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from reconciler.app.executor import Executor
from reconciler.kafka_clients.admin import Outcome
from reconciler.plan.forms import Form, JobRecord
from reconciler.resources.deployments import LocalDeployment
from reconciler.resources.job_status import JobStatus
from reconciler.spec.loader import load_text
from tests.unit.plan.builders import live, owned, plan, running, topic

pytestmark = pytest.mark.unit


class FakeRunner:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def deploy(self, flow: str, spec: Mapping[str, Any], spec_digest: str) -> LocalDeployment:
        self.calls.append(("deploy", flow))
        return LocalDeployment(pid=42, checkpoint=f"/cp/{flow}")

    def stop(self, flow: str) -> None:
        self.calls.append(("stop", flow))

    def move(self, old: str, new: str) -> None:
        self.calls.append(("move", old, new))

    def forget(self, flow: str) -> None:
        self.calls.append(("forget", flow))


class FakeRecorder:
    def __init__(self) -> None:
        self.entries: list[tuple[str, str, Form | None, str, str, str]] = []

    def intend(self, items: list[tuple[str, str, Form | None]]) -> None:
        pass

    def record_many(self, entries: list[tuple[str, str, Form | None, str, str, str]]) -> None:
        self.entries.extend(entries)

    def record(self, address: str, kind: str, attributes: Form | None, action: str, outcome: str,
               message: str = "") -> None:  # fmt: skip
        self.entries.append((address, kind, attributes, action, outcome, message))


FILE = """
version: 1
clusters:
  src: {{bootstrap_servers: "127.0.0.1:1"}}
  dst: {{bootstrap_servers: "127.0.0.1:2"}}
state: {{cluster: dst}}
flows:
  - {{name: {name}, source: src, target: dst, topics: {{include: ['orders']}}}}
{moved}
"""


def test_a_deployed_job_is_recorded_with_the_runners_deployment() -> None:
    ds = load_text(FILE.format(name="f", moved="")).state
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    runner, recorder = FakeRunner(), FakeRecorder()
    outcomes = Executor({}, recorder, runner).run(plan(ds, lv, owned("src.orders"), JobStatus()))
    assert [(o.address, o.outcome) for o in outcomes] == [("job/f", "applied")]
    (entry,) = recorder.entries
    assert entry[0] == "job/f" and isinstance(entry[2], JobRecord)
    assert entry[2].model_dump(mode="json")["deployment"] == {"runner": "local", "pid": 42, "checkpoint": "/cp/f"}


def test_a_renamed_flow_stops_the_old_job_deploys_the_new_one_and_forgets_the_old_name() -> None:
    old = load_text(FILE.format(name="f", moved="")).state
    new = load_text(FILE.format(name="g", moved="moved:\n  - {from: f, to: g}")).state
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    record = ("job/f", "job", {"flow": "f", "spec_digest": old.flow_digest("f"), "spec": old.flow_effective_spec("f")})
    runner, recorder = FakeRunner(), FakeRecorder()
    Executor({}, recorder, runner).run(plan(new, lv, owned("src.orders", extra=(record,)), running(old, "f")))
    assert runner.calls == [("move", "f", "g"), ("deploy", "g")]
    by_address = {e[0]: e for e in recorder.entries}
    recorded = by_address["job/g"][2]
    assert isinstance(recorded, JobRecord) and recorded.deployment is not None
    assert recorded.deployment.checkpoint == "/cp/g"
    assert by_address["job/f"][2] is None and by_address["job/f"][5] == "moved to job/g"


def test_a_removed_flows_job_is_stopped_then_forgotten_and_a_disabled_ones_only_stopped() -> None:
    ds = load_text(FILE.format(name="f", moved="")).state
    record = ("job/f", "job", {"flow": "f", "spec_digest": ds.flow_digest("f"), "spec": ds.flow_effective_spec("f")})
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    disabled = load_text(FILE.format(name="f", moved="").replace("topics:", "enabled: false, topics:")).state
    runner = FakeRunner()
    Executor({}, FakeRecorder(), runner).run(plan(disabled, lv, owned("src.orders", extra=(record,)), running(ds, "f")))
    assert runner.calls == [("stop", "f")]
    removed = load_text(FILE.format(name="g", moved="")).state  # f is gone from the file
    runner = FakeRunner()
    Executor({}, FakeRecorder(), runner).run(plan(removed, lv, owned("src.orders", extra=(record,)), running(ds, "f")))
    assert runner.calls[:2] == [("stop", "f"), ("forget", "f")]


class FakeAdmin:
    def __init__(self, outcome: Outcome, calls: list[tuple[str, ...]]) -> None:
        self.outcome, self.calls = outcome, calls

    def delete_group(self, group: str) -> Outcome:
        self.calls.append(("delete_group", group))
        return self.outcome


@pytest.mark.parametrize("deleted", [True, False])
def test_a_removed_exactly_once_flow_has_its_group_deleted_after_its_checkpoint(deleted: bool) -> None:
    eos = FILE.format(name="f", moved="").replace("topics:", "replication: {delivery: exactly_once}, topics:")
    ds = load_text(eos).state
    record = ("job/f", "job", {"flow": "f", "spec_digest": ds.flow_digest("f"), "spec": ds.flow_effective_spec("f")})
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    removed = load_text(FILE.format(name="g", moved="")).state
    runner, recorder = FakeRunner(), FakeRecorder()
    admin = FakeAdmin(Outcome("kmirror-eos._kmirror.state.f", deleted, "" if deleted else "GROUP_AUTHORIZATION_FAILED"),
                      runner.calls)  # fmt: skip
    outcomes = Executor({"dst": admin}, recorder, runner).run(  # type: ignore[dict-item]
        plan(removed, lv, owned("src.orders", extra=(record,)), running(ds, "f"))
    )
    assert runner.calls[:3] == [("stop", "f"), ("forget", "f"), ("delete_group", "kmirror-eos._kmirror.state.f")]
    (job,) = [o for o in outcomes if o.address == "job/f"]
    if deleted:
        assert job.outcome == "applied"
    else:  # not recorded as gone: the next plan stops (a no-op) and forgets again, and retries the group
        assert job.outcome != "applied" and "GROUP_AUTHORIZATION_FAILED" in job.message, job
