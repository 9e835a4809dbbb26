"""A throttled flow's job fetches a tenth of a second of quota per request (all its consumers together), so that the
broker's fetch quota paces it instead of letting a window's worth through and refusing it until the window empties
(`spec.fetch_sizing`); the rate reaches the job in its effective spec, outside the digest."""

from __future__ import annotations

import pytest

from reconciler.jobcontract.spec import EffectiveSpec
from reconciler.spec.fetch_sizing import MIN_FETCH_BYTES, throttled_fetch_sizes
from reconciler.spec.loader import load_text
from reconciler.spec.placement import realtime_client_sizing

pytestmark = pytest.mark.unit

UNTHROTTLED = {"fetch.max.bytes": str(64 << 20), "max.partition.fetch.bytes": str(8 << 20)}

FLOW = """
version: 1
clusters: {a: {bootstrap_servers: "a:9092"}, b: {bootstrap_servers: "b:9092"}}
state: {cluster: b}
flows: [{name: f, source: a, target: b, topics: {include: ["orders"]}, replication: REPLICATION}]
"""


def test_the_consumers_together_fetch_a_tenth_of_a_second_of_quota_per_request() -> None:
    # 10 MB/s read by the benchmark's two real-time tasks: 0.5 MB each (the defaults were 64 MB, 6 s of quota)
    assert throttled_fetch_sizes(10_000_000, 2, UNTHROTTLED) == {
        "fetch.max.bytes": "500000",
        "max.partition.fetch.bytes": "500000",
    }
    assert throttled_fetch_sizes(10_000_000, 1, UNTHROTTLED)["fetch.max.bytes"] == "1000000"


def test_never_smaller_than_the_floor_nor_larger_than_the_unthrottled_sizes() -> None:
    assert throttled_fetch_sizes(100_000, 4, UNTHROTTLED)["fetch.max.bytes"] == str(MIN_FETCH_BYTES)
    fast = throttled_fetch_sizes(10_000_000_000, 1, UNTHROTTLED)  # 10 GB/s: 1 GB a tenth of a second
    assert fast == UNTHROTTLED
    many = realtime_client_sizing(2000, 4, 2).consumer  # hundreds of partitions per task: 256 KB each
    sized = throttled_fetch_sizes(50_000_000, 2, many)
    assert sized == {"fetch.max.bytes": "2500000", "max.partition.fetch.bytes": many["max.partition.fetch.bytes"]}


def test_the_rate_reaches_the_job_but_a_changed_rate_redeploys_nothing() -> None:
    slow = load_text(FLOW.replace("REPLICATION", "{throttle: 10MB}")).state
    slower = load_text(FLOW.replace("REPLICATION", "{throttle: 1MB}")).state
    plain = load_text(FLOW.replace("REPLICATION", "{}")).state
    assert EffectiveSpec.of(slow, "f").throttle == 10_000_000
    assert EffectiveSpec.of(slower, "f").throttle == 1_000_000
    assert EffectiveSpec.of(plain, "f").throttle is None and "throttle" not in plain.flow_effective_spec("f")
    assert slow.flow_digest("f") == slower.flow_digest("f") != plain.flow_digest("f")
