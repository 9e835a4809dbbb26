"""The replication job's Spark settings, read and checked before anything runs (pure functions of job.py)."""

from __future__ import annotations

import pytest

from reconciler.errors import KmirrorError
from reconciler.replication.query import sink_options, source_options
from reconciler.replication.settings import JobSettingError, job_mode, restart_delays
from reconciler.spec.intervals import interval_seconds, trigger_interval
from reconciler.spec.loader import load_text

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("text", "mode"), [("microbatch", "microbatch"), (" RealTime ", "realtime")])
def test_mode_is_read_case_and_space_insensitively(text: str, mode: str) -> None:
    assert job_mode(text) == mode


def test_an_unknown_mode_names_the_setting_and_the_choices() -> None:
    with pytest.raises(JobSettingError, match=r"spark\.kmirror\.mode is 'continuous'.*microbatch, realtime"):
        job_mode("continuous")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10 seconds", 10.0), ("250 milliseconds", 0.25), ("1 minute", 60.0), ("2 minutes", 120.0), ("soon", None)],
)
def test_interval_seconds(text: str, seconds: float | None) -> None:
    assert interval_seconds(text) == seconds


def test_short_trigger_forms_become_spark_intervals() -> None:
    assert trigger_interval("250ms") == "250 milliseconds"
    assert trigger_interval("2s") == "2 seconds"
    assert trigger_interval("10 seconds") == "10 seconds"
    assert interval_seconds(trigger_interval("1.5s")) == 1.5


def test_the_flow_producer_cannot_turn_off_idempotence_or_acks_all() -> None:
    options = sink_options(
        {"bootstrap.servers": "t:9092"},
        {"linger.ms": "50", "enable.idempotence": "false", "acks": "1"},
        {"interceptor.classes": "I"},
    )
    assert options["kafka.linger.ms"] == "50"  # the flow's producer settings override the defaults
    assert options["kafka.enable.idempotence"] == "true" and options["kafka.acks"] == "all"
    assert options["kafka.interceptor.classes"] == "I"


FLOW = """
version: 1
clusters: {a: {bootstrap_servers: "a:9092"}, b: {bootstrap_servers: "b:9092"}}
state: {cluster: b}
flows: [{name: f, source: a, target: b, topics: {include: ["orders"]}, replication: {consumer: CONSUMER}}]
"""


@pytest.mark.parametrize(("mode", "wait"), [("microbatch", "10"), ("realtime", "100")])
def test_tasks_fetch_without_the_500ms_wait_unless_the_flow_sets_it(mode: str, wait: str) -> None:
    flow = load_text(FLOW.replace("CONSUMER", "{}")).state.flow("f")
    options = source_options(flow, {"bootstrap.servers": "a:9092"}, {}, mode)
    assert options["kafka.fetch.max.wait.ms"] == wait
    assert options["kafka.bootstrap.servers"] == "a:9092" and options["subscribePattern"]
    own = load_text(FLOW.replace("CONSUMER", '{"fetch.max.wait.ms": "250"}')).state.flow("f")
    options = source_options(own, {}, dict(own.replication.consumer), mode)
    assert options["kafka.fetch.max.wait.ms"] == "250"  # the flow's consumer settings win in both modes


def test_the_jobs_clients_register_no_jmx_metrics_unless_the_flow_asks_for_them() -> None:
    jmx = "kafka.auto.include.jmx.reporter"
    flow = load_text(FLOW.replace("CONSUMER", "{}")).state.flow("f")
    assert source_options(flow, {}, {}, "realtime")[jmx] == "false"
    assert sink_options({}, {}, {})[jmx] == "false"
    own = load_text(FLOW.replace("CONSUMER", '{"auto.include.jmx.reporter": "true"}')).state.flow("f")
    assert source_options(own, {}, dict(own.replication.consumer), "realtime")[jmx] == "true"
    assert sink_options({}, {"auto.include.jmx.reporter": "true"}, {})[jmx] == "true"


def test_restart_waits_grow_to_the_cap_the_setting_gives() -> None:
    assert restart_delays(None) == (2.0, 5.0, 15.0, 30.0, 60.0)
    assert restart_delays("20000") == (2.0, 5.0, 15.0, 20.0, 20.0)
    assert restart_delays("1000") == (1.0, 1.0, 1.0, 1.0, 1.0)


@pytest.mark.parametrize("value", ["0", "30s", "-1", "1.5"])
def test_a_bad_restart_backoff_cap_is_a_load_error_naming_the_setting(value: str) -> None:
    text = f"""
version: 1
clusters:
  a: {{bootstrap_servers: "localhost:1"}}
  b: {{bootstrap_servers: "localhost:2"}}
state: {{cluster: b}}
spark: {{conf: {{spark.kmirror.restartBackoffMaxMs: "{value}"}}}}
flows: []
"""
    with pytest.raises(KmirrorError, match=r"spark\.kmirror\.restartBackoffMaxMs is .*milliseconds above 0"):
        load_text(text)
    assert load_text(text.replace(value, "5000")).state.spark.conf["spark.kmirror.restartBackoffMaxMs"] == "5000"
