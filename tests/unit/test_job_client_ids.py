"""A throttled flow's job clients carry the client ids its quotas name: Spark's source in both modes, Spark's sink,
and the exactly-once producers; a flow's own client.id wins, and the quota names that one then. The ids reach the
job in its effective spec, which only a throttled flow's has (setting or removing a throttle redeploys the job
once, changing its value does not)."""

from __future__ import annotations

import pytest

from reconciler.core.policy.client_ids import job_client_id
from reconciler.plan.quotas import flow_quotas
from reconciler.replication import exactly_once
from reconciler.replication.query import sink_options, source_options
from reconciler.spec.loader import load_text

pytestmark = pytest.mark.unit

FLOW = """
version: 1
clusters: {a: {bootstrap_servers: "a:9092"}, b: {bootstrap_servers: "b:9092"}}
state: {cluster: b, topic: _kmirror.prod}
flows: [{name: f, source: a, target: b, topics: {include: ["orders"]}, replication: REPLICATION}]
"""


def test_client_ids_are_stable_and_the_flows_own() -> None:
    assert job_client_id("_kmirror.prod", "f", "source") == "kmirror._kmirror.prod.f.source"
    assert job_client_id("_kmirror.prod", "f", "target") == "kmirror._kmirror.prod.f.target"
    assert job_client_id("_kmirror.prod", "f", "source", "mine") == "mine"


@pytest.mark.parametrize("mode", ["microbatch", "realtime"])
def test_the_source_and_sink_use_the_ids_the_quotas_name(mode: str) -> None:
    ds = load_text(FLOW.replace("REPLICATION", "{throttle: 10MB}")).state
    flow = ds.flow("f")
    source_id = job_client_id("_kmirror.prod", "f", "source")
    target_id = job_client_id("_kmirror.prod", "f", "target")
    # a client.id in the cluster's client settings (shared by every client of that cluster) does not win
    source = source_options(flow, {"client.id": "cluster-wide"}, {}, mode, client_id=source_id)
    sink = sink_options({"client.id": "cluster-wide"}, {}, {"interceptor.classes": "I"}, client_id=target_id)
    assert source["kafka.client.id"] == source_id
    assert sink["kafka.client.id"] == target_id
    assert exactly_once.producer_properties(sink)["client.id"] == target_id  # the transactional producers too
    named = {form.client_id for form in flow_quotas(ds, flow).values()}
    assert named == {source_id, target_id}
    assert ds.flow_effective_spec("f")["client_ids"] == {"source": source_id, "target": target_id}  # the job's


def test_only_a_throttled_flows_job_is_given_ids_and_only_setting_a_throttle_redeploys_it() -> None:
    plain = load_text(FLOW.replace("REPLICATION", "{}")).state
    slow = load_text(FLOW.replace("REPLICATION", "{throttle: 10MB}")).state
    slower = load_text(FLOW.replace("REPLICATION", "{throttle: 1MB}")).state
    assert "client_ids" not in plain.flow_effective_spec("f")
    assert "kafka.client.id" not in source_options(plain.flow("f"), {}, {}, client_id=None)
    assert plain.flow_digest("f") != slow.flow_digest("f")
    assert slow.flow_digest("f") == slower.flow_digest("f")


def test_a_client_id_the_flow_sets_wins_in_the_job_and_in_the_plan() -> None:
    replication = '{throttle: 10MB, consumer: {"client.id": team-in}, producer: {"client.id": team-out}}'
    ds = load_text(FLOW.replace("REPLICATION", replication)).state
    flow = ds.flow("f")
    source = source_options(flow, {}, dict(flow.replication.consumer), client_id="kmirror.x.f.source")
    sink = sink_options({}, dict(flow.replication.producer), {}, client_id="kmirror.x.f.target")
    assert (source["kafka.client.id"], sink["kafka.client.id"]) == ("team-in", "team-out")
    assert {form.client_id for form in flow_quotas(ds, flow).values()} == {"team-in", "team-out"}
