"""Exactly-once delivery, the pure parts: the spec fields (and the older name of syncs_location), the group and
transactional ids, the writer's settings, the plan row of a delivery switch, and the group filter that never
translates kmirror's own exactly-once groups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.core.policy.filters import eos_group
from reconciler.errors import KmirrorError
from reconciler.jobcontract.spec import EffectiveSpec, JobSpec
from reconciler.plan.definition import Action
from reconciler.replication import exactly_once
from reconciler.replication.query import sink_options
from reconciler.spec.loader import load_text
from tests.unit.plan.builders import by_address, desired, live, owned, plan, running, topic

pytestmark = pytest.mark.unit


def test_delivery_defaults_to_at_least_once_and_takes_exactly_once() -> None:
    assert desired("topics: {include: ['orders']}").flow("f").replication.delivery == "at_least_once"
    ds = desired("replication: {delivery: exactly_once}")
    assert ds.flow("f").replication.delivery == "exactly_once"
    with pytest.raises(KmirrorError, match="delivery"):
        desired("replication: {delivery: exactly-once}")


def test_syncs_location_is_the_name_and_offset_syncs_location_an_accepted_older_one() -> None:
    assert desired("").flow("f").offsets.syncs_location == "source"
    new = desired("offsets: {syncs_location: target}").flow("f").offsets
    old = desired("offsets: {offset_syncs_location: target}").flow("f").offsets
    assert new == old and old.syncs_location == "target" and old.offset_syncs_location == "target"
    assert "offset_syncs_location" not in old.model_dump()  # dumps, digests and plans carry the new name


def test_both_names_of_syncs_location_in_one_file_is_an_error_with_its_location() -> None:
    text = """\
version: 1
clusters:
  src: {bootstrap_servers: "127.0.0.1:1"}
  dst: {bootstrap_servers: "127.0.0.1:2"}
state: {cluster: dst}
flows:
  - name: f
    source: src
    target: dst
    offsets: {syncs_location: target, offset_syncs_location: source}
"""
    with pytest.raises(KmirrorError) as raised:
        load_text(text)
    message = str(raised.value)
    assert "syncs_location" in message and "offset_syncs_location" in message
    assert "kmirror.yaml:10:" in message, message


def test_group_and_transactional_ids_are_stable_per_state_topic_flow_topic_and_partition() -> None:
    assert eos_group("_kmirror.state", "a-to-b") == "kmirror-eos._kmirror.state.a-to-b"
    assert exactly_once.transactional_id("_kmirror.state", "a-to-b", "orders", 3) == (
        "kmirror-eos/_kmirror.state/a-to-b/orders/3"
    )
    assert exactly_once.transactional_id("s", "f", "orders", 3).startswith(
        exactly_once.transactional_id_prefix("s", "f")
    )
    assert exactly_once.transactional_id("s", "f", "orders", 3) != exactly_once.transactional_id("s2", "f", "orders", 3)


def test_transactional_ids_and_acl_prefixes_of_dotted_names_cannot_collide() -> None:
    # flow `a` with topic `b.c` and flow `a.b` with topic `c`: one id under the old `.`-joined scheme
    assert exactly_once.transactional_id("s", "a", "b.c", 0) != exactly_once.transactional_id("s", "a.b", "c", 0)
    # state topic `s.a` with flow `b` and state topic `s` with flow `a.b`
    assert exactly_once.transactional_id("s.a", "b", "t", 0) != exactly_once.transactional_id("s", "a.b", "t", 0)
    # flow `a`'s ACL prefix must not cover flow `a.b`'s ids (nor `a-b`'s, nor `ab`'s)
    prefix = exactly_once.transactional_id_prefix("s", "a")
    for other in ("a.b", "a-b", "ab", "a_b"):
        assert not exactly_once.transactional_id("s", other, "t", 0).startswith(prefix), other
    assert exactly_once.transactional_id("s", "a", "x.y", 7).startswith(prefix)
    assert exactly_once.legacy_transactional_id_prefix("st", "f") == "kmirror-eos.st.f."


def test_the_transaction_interval_must_leave_the_commit_room_within_the_transaction_timeout() -> None:
    assert exactly_once.interval_problem(200, 30_000) is None
    assert exactly_once.interval_problem(15_000, 30_000) is None
    problem = exactly_once.interval_problem(20_000, 30_000)
    assert problem is not None and "transaction.timeout.ms" in problem and "40000" in problem
    assert exactly_once.transaction_timeout_ms({}) == int(exactly_once.DEFAULT_TRANSACTION_TIMEOUT_MS)
    assert exactly_once.transaction_timeout_ms({"transaction.timeout.ms": "60000"}) == 60_000


def test_the_flows_own_group_is_never_translated_whatever_the_filter() -> None:
    flow = desired("groups: {include: ['.*']}").flow("f")
    assert flow.group_matches("orders-app")
    assert not flow.group_matches(eos_group("_kmirror.state", "f"))


def test_producer_properties_keep_the_sink_settings_without_the_interceptor() -> None:
    sink = sink_options(
        {"bootstrap.servers": "t:9092", "sasl.jaas.config": "secret"},
        {"linger.ms": "5", "acks": "1", "transaction.timeout.ms": "20000"},
        {"interceptor.classes": "io.kmirror.replication.ReplicationInterceptor", "kmirror.offset.lag.max": "100"},
    )
    props = exactly_once.producer_properties(sink)
    assert props["bootstrap.servers"] == "t:9092" and props["sasl.jaas.config"] == "secret"
    assert props["linger.ms"] == "5" and props["acks"] == "all" and props["enable.idempotence"] == "true"
    assert props["transaction.timeout.ms"] == "20000"
    assert "interceptor.classes" not in props and not any(k.startswith("kmirror.") for k in props)
    default = exactly_once.producer_properties(sink_options({"bootstrap.servers": "t:9092"}, {}, {}))
    assert default["transaction.timeout.ms"] == exactly_once.DEFAULT_TRANSACTION_TIMEOUT_MS


def test_writer_settings_put_syncs_in_the_transaction_only_when_they_are_on_the_target() -> None:
    common = {
        "state_topic": "st",
        "flow": "f",
        "producer": {"bootstrap.servers": "t:9092"},
        "source": {"bootstrap.servers": "s1:9092"},
        "generation": 4,
        "run": "r1",
        "syncs_topic": "mm2-offset-syncs.src.internal",
        "syncs_client": {"bootstrap.servers": "s:9092"},
        "offset_lag_max": 100,
    }
    target = exactly_once.writer_settings(**common, syncs_in_transaction=True)  # type: ignore[arg-type]
    assert target["syncs.in.transaction"] == "true" and not any(k.startswith("syncs.client.") for k in target)
    assert target["producer.bootstrap.servers"] == "t:9092"
    assert target["group"] == "kmirror-eos.st.f" and target["transactional.id.prefix"] == "kmirror-eos/st/f/"
    assert target["legacy.transactional.id.prefix"] == "kmirror-eos.st.f."
    assert (target["generation"], target["run"], target["source.bootstrap.servers"]) == ("4", "r1", "s1:9092")
    assert target["transaction.interval.ms"] == str(exactly_once.DEFAULT_TRANSACTION_INTERVAL_MS)
    source = exactly_once.writer_settings(**common, syncs_in_transaction=False)  # type: ignore[arg-type]
    assert source["syncs.in.transaction"] == "false" and source["syncs.client.bootstrap.servers"] == "s:9092"


def test_a_bad_transaction_interval_in_spark_conf_is_a_load_error() -> None:
    text = """\
version: 1
clusters:
  src: {bootstrap_servers: "127.0.0.1:1"}
  dst: {bootstrap_servers: "127.0.0.1:2"}
state: {cluster: dst}
spark: {conf: {spark.kmirror.transactionIntervalMs: "1s"}}
"""
    with pytest.raises(KmirrorError, match="transactionIntervalMs"):
        load_text(text)
    assert load_text(text.replace('"1s"', '"150"')).state.spark.conf["spark.kmirror.transactionIntervalMs"] == "150"


def test_transaction_interval_is_a_positive_number_of_milliseconds() -> None:
    assert exactly_once.transaction_interval_ms(" 150 ") == 150
    for bad in ("0", "-5", "1s"):
        with pytest.raises(ValueError, match="transactionIntervalMs"):
            exactly_once.transaction_interval_ms(bad)


def test_the_projection_carries_the_source_position_and_timestamp_as_columns() -> None:
    columns = exactly_once.projection(desired("").flow("f"))
    assert [c.rsplit(" AS ", 1)[-1] for c in columns] == [
        "topic",
        "partition",
        "key",
        "value",
        "headers",
        "sourceTopic",
        "sourceOffset",
        "timestampMs",
    ]
    assert "__kmirror.source" not in " ".join(columns)


def _job_record(ds):  # type: ignore[no-untyped-def]
    return ("job/f", "job", {"flow": "f", "spec_digest": ds.flow_digest("f"), "spec": ds.flow_effective_spec("f")})


@pytest.mark.parametrize(
    ("before", "after", "says"),
    [
        ("at_least_once", "exactly_once", "from then on records are written in transactions"),
        ("exactly_once", "at_least_once", "a crash may copy records again"),
    ],
)
def test_switching_delivery_redeploys_the_job_and_says_what_happens(before: str, after: str, says: str) -> None:
    old = desired(f"topics: {{include: ['orders']}}\nreplication: {{delivery: {before}}}")
    new = desired(f"topics: {{include: ['orders']}}\nreplication: {{delivery: {after}}}")
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    change = by_address(plan(new, lv, owned("src.orders", extra=(_job_record(old),)), running(old, "f")))["job/f"]
    assert change.action == Action.REPLACE and change.after.model_dump(mode="json")["operation"] == "redeploy"
    assert f"delivery {before} -> {after}: the job" in change.reason and says in change.reason
    assert "restarts from its checkpoint" in change.reason


def test_a_change_other_than_delivery_says_nothing_about_delivery() -> None:
    old = desired("topics: {include: ['orders']}\nreplication: {delivery: exactly_once}")
    new = desired("topics: {include: ['orders', 'x']}\nreplication: {delivery: exactly_once}")
    lv = live(src=[topic("orders")], dst=[topic("src.orders")])
    change = by_address(plan(new, lv, owned("src.orders", extra=(_job_record(old),)), running(old, "f")))["job/f"]
    assert change.action == Action.REPLACE and "delivery" not in change.reason


def test_the_job_spec_carries_the_state_topic_and_an_older_file_gets_the_default(tmp_path: Path) -> None:
    ds = desired("replication: {delivery: exactly_once}")
    spec = JobSpec("f", EffectiveSpec.of(ds, "f"), ds.flow_digest("f"), tmp_path, "_kmirror.state.prod")
    spec.write(tmp_path / "spec.json")
    assert JobSpec.read(tmp_path / "spec.json").state_topic == "_kmirror.state.prod"
    older = json.loads((tmp_path / "spec.json").read_text())
    del older["state_topic"]
    (tmp_path / "spec.json").write_text(json.dumps(older))
    assert JobSpec.read(tmp_path / "spec.json").state_topic == "_kmirror.state"


def test_a_transaction_interval_over_half_the_transaction_timeout_is_a_located_load_error() -> None:
    text = """\
version: 1
clusters:
  src: {bootstrap_servers: "127.0.0.1:1"}
  dst: {bootstrap_servers: "127.0.0.1:2"}
state: {cluster: dst}
spark: {conf: {spark.kmirror.transactionIntervalMs: "20000"}}
flows:
  - name: f
    source: src
    target: dst
    replication: {delivery: exactly_once}
"""
    with pytest.raises(KmirrorError) as raised:
        load_text(text)
    message = str(raised.value)
    assert "transactionIntervalMs is 20000 ms" in message and "at least 40000" in message, message
    assert "kmirror.yaml:11:" in message, message
    raised_timeout = text.replace(
        "{delivery: exactly_once}", "{delivery: exactly_once, producer: {transaction.timeout.ms: 60000}}"
    )
    load_text(raised_timeout)  # the timeout raised with it: fine
    load_text(text.replace("exactly_once", "at_least_once"))  # no transactions: nothing to check
