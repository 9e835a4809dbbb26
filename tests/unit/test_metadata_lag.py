"""Metadata that trails a burst of creates: apply waits while topics keep appearing, and a plan made while the
broker is still behind waits for the topics the controller has instead of calling them deleted.

A 10,000-topic apply answered every create, waited 60 s for the metadata, recorded all topics, and the re-plan
right after it saw the last create request's 671 topics as "deleted outside kmirror" (the broker published them
minutes later). Fakes stand in for the brokers here; the clock is simulated.
"""

from __future__ import annotations

import time
import types
from collections.abc import Iterable
from typing import Any

import pytest

from reconciler.adapters.live_reader import _catch_up
from reconciler.app.executor import Executor
from reconciler.kafka_clients import admin as kafka_admin
from reconciler.kafka_clients.admin import KafkaAdmin, Outcome, TopicMeta
from reconciler.plan.definition import Action, AnyChange, Plan, change_of
from reconciler.resources.addresses import Kind
from reconciler.resources.recorded import RecordedResource, RecordedState

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class LaggingAdmin(KafkaAdmin):
    """A broker whose metadata shows topic i only from second `appears[i]` of the simulated clock."""

    def __init__(self, clock: Clock, appears: dict[str, float]) -> None:  # no AdminClient: nothing connects
        self.cluster = "dst"
        self.clock = clock
        self.appears = appears
        self.round_trips = 0

    def topics(self) -> dict[str, TopicMeta]:
        self.round_trips += 1
        return {n: TopicMeta(n, 1, 1) for n, at in self.appears.items() if at <= self.clock.now}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    # The admin module's own `time` only: patching the global time module would let any other thread's sleep
    # move this clock (it did in CI, where threads of earlier tests were still running).
    fake = types.SimpleNamespace(**{n: getattr(time, n) for n in dir(time) if not n.startswith("_")})
    fake.monotonic, fake.sleep = c.monotonic, c.sleep
    monkeypatch.setattr(kafka_admin, "time", fake)
    return c


def test_wait_lasts_while_topics_keep_appearing(clock: Clock) -> None:
    # 300 topics, one more every 1.5 s: 450 s in all, far beyond a fixed 60 s wait, but never a 60 s stall.
    appears = {f"t{i:03d}": 1.5 * i for i in range(300)}
    admin = LaggingAdmin(clock, appears)
    assert admin.wait_visible(appears) == set()
    assert 448 <= clock.now <= 452
    assert admin.round_trips < 300  # the pause grows to 2 s: not one metadata request per topic


def test_wait_gives_up_after_a_stall_and_returns_what_is_missing(clock: Clock) -> None:
    appears = {"a": 0.0, "b": 5.0, "never": float("inf")}
    admin = LaggingAdmin(clock, appears)
    assert admin.wait_visible(appears, stall=60) == {"never"}
    assert 65 <= clock.now <= 68  # 60 s after "b" appeared


def test_wait_gives_up_at_its_limit_even_while_topics_appear(clock: Clock) -> None:
    appears = {f"t{i}": 10.0 * i for i in range(100)}
    assert len(LaggingAdmin(clock, appears).wait_visible(appears, limit=300)) == 100 - 31
    assert clock.now <= 302


def test_topics_already_visible_cost_one_request_and_no_wait(clock: Clock) -> None:
    admin = LaggingAdmin(clock, {"a": 0.0})
    assert admin.wait_visible(["a"]) == set() and clock.now == 0 and admin.round_trips == 1


class ControllerAdmin:
    """What `_catch_up` needs: metadata behind the controller by `lag` topics until it has waited."""

    def __init__(self, visible: set[str], on_controller: set[str], shows_after_wait: set[str]) -> None:
        self.visible, self.on_controller, self.shows_after_wait = visible, on_controller, shows_after_wait
        self.asked: list[set[str]] = []

    def topics(self) -> dict[str, TopicMeta]:
        return {n: TopicMeta(n, 1, 1) for n in self.visible}

    def exist_on_controller(self, names: Iterable[str]) -> set[str]:
        self.asked.append(set(names))
        return set(names) & self.on_controller

    def wait_visible(self, names: Iterable[str]) -> set[str]:
        self.visible |= set(names) & self.shows_after_wait
        return set(names) - self.visible


def _recorded(*names: str) -> RecordedState:
    return RecordedState(
        "lin",
        1,
        {f"topic/dst/{n}": RecordedResource(f"topic/dst/{n}", "topic", {"cluster": "dst", "name": n}) for n in names},
    )


def test_plan_waits_for_recorded_topics_the_controller_has_but_the_metadata_does_not_show_yet() -> None:
    admin = ControllerAdmin({"a"}, on_controller={"a", "b", "c"}, shows_after_wait={"b", "c"})
    metadata = {"dst": admin.topics()}
    caught, warnings = _catch_up({"dst": admin}, metadata, _recorded("a", "b", "c"))  # type: ignore[dict-item]
    assert set(caught["dst"]) == {"a", "b", "c"} and warnings == ()
    assert admin.asked == [{"b", "c"}]  # only the recorded topics the metadata lacks are asked about


def test_a_recorded_topic_the_controller_does_not_have_either_is_left_missing_without_waiting() -> None:
    admin = ControllerAdmin({"a"}, on_controller={"a"}, shows_after_wait=set())
    caught, warnings = _catch_up({"dst": admin}, {"dst": admin.topics()}, _recorded("a", "gone"))  # type: ignore[dict-item]
    assert set(caught["dst"]) == {"a"} and warnings == ()  # really deleted: the planner recreates it


def test_a_broker_that_stays_behind_is_a_warning() -> None:
    admin = ControllerAdmin({"a"}, on_controller={"a", "b"}, shows_after_wait=set())
    caught, warnings = _catch_up({"dst": admin}, {"dst": admin.topics()}, _recorded("a", "b"))  # type: ignore[dict-item]
    assert set(caught["dst"]) == {"a"}
    assert (
        len(warnings) == 1 and "(b) exist on the controller but not yet in the brokers' metadata" in warnings[0].summary
    )


def test_nothing_missing_asks_nothing() -> None:
    admin = ControllerAdmin({"a"}, on_controller={"a"}, shows_after_wait=set())
    _catch_up({"dst": admin}, {"dst": admin.topics()}, _recorded("a"))  # type: ignore[dict-item]
    assert admin.asked == []


def test_apply_records_a_created_topic_the_metadata_never_showed_as_created_with_a_note() -> None:
    class Admin:
        cluster = "dst"

        def create_topics(self, topics: Any, validate_only: bool = False) -> list[Outcome]:
            return [Outcome(t[0], True) for t in topics]

        def wait_visible(self, names: Iterable[str]) -> set[str]:
            return {n for n in names if n == "late"}

    class Recorder:
        def __init__(self) -> None:
            self.entries: list[Any] = []

        def intend(self, items: Any) -> None:
            pass

        def record_many(self, entries: Any) -> None:
            self.entries += entries

        def record(self, *args: Any) -> None:
            pass

    def create(name: str) -> AnyChange:
        form = {"cluster": "dst", "name": name, "partitions": 1, "replication_factor": -1, "configs": {}}
        return change_of(address=f"topic/dst/{name}", kind=Kind.TOPIC, action=Action.CREATE, after=form)

    recorder = Recorder()
    plan = Plan(plan_id="p", created_at="t", spec_digest="d", changes=(create("early"), create("late")))
    outcomes = Executor({"dst": Admin()}, recorder).run(plan)  # type: ignore[dict-item]
    assert [(o.address, o.outcome, o.message) for o in outcomes] == [
        ("topic/dst/early", "applied", ""),
        ("topic/dst/late", "applied", "created, but not yet in the cluster's metadata"),
    ]
    assert [e[4] for e in recorder.entries] == ["applied", "applied"]  # both are kmirror's now
