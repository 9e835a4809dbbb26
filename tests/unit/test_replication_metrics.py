"""The replication job's Prometheus metrics: batch aggregates in, MM2-named series out, over real HTTP."""

from __future__ import annotations

import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.replication.metrics import PartitionBatch, ReplicationMetrics, progress_positions, serve

pytestmark = pytest.mark.unit


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_batches_become_mm2_named_series_with_batch_granular_ages_and_lag() -> None:
    metrics = ReplicationMetrics("src", "tgt")
    now = int(time.time() * 1000)
    rows = [
        PartitionBatch("orders", "src.orders", 0, 3, 30, 12, now - 300, now - 100, 3 * now - 600),
        PartitionBatch("orders", "src.orders", 1, 1, 5, 4, now - 50, now - 50, now - 50),
    ]
    metrics.observe_batch(rows, polled_ms=now, written_ms=now + 20)
    metrics.observe_positions({("orders", 1): 7})  # committed position past a commit marker
    metrics.observe_source_ends({("orders", 0): 20, ("orders", 1): 7})
    port = serve(metrics, 0, "127.0.0.1")
    got = _scrape(port)
    p0 = (("partition", "0"), ("source", "src"), ("target", "tgt"), ("topic", "src.orders"))
    assert got[("kmirror_record_count_total", p0)] == 3
    assert got[("kmirror_byte_count_total", p0)] == 30
    assert got[("kmirror_record_rate", p0)] == pytest.approx(3 / 30)
    assert got[("kmirror_record_age_ms_avg", p0)] == pytest.approx(200)
    assert got[("kmirror_record_age_ms_max", p0)] == 300
    assert got[("kmirror_record_age_ms_min", p0)] == 100
    assert got[("kmirror_replication_latency_ms_avg", p0)] == pytest.approx(220)
    assert got[("kmirror_replication_latency_ms_max", p0)] == 320
    lag = {dict(labels)["partition"]: v for (name, labels), v in got.items() if name == "kmirror_partition_lag"}
    assert lag == {"0": 20 - 13, "1": 0}
    assert dict(next(labels for (n, labels) in got if n == "kmirror_partition_lag"))["topic"] == "orders"
    assert got[("kmirror_batches_total", (("source", "src"), ("target", "tgt")))] == 1
    assert got[("kmirror_last_batch_timestamp_seconds", (("source", "src"), ("target", "tgt")))] > 0


def test_progress_positions_reads_the_sources_end_offsets_as_json_or_mapping() -> None:
    progress = {"sources": [{"endOffset": '{"a":{"0":5,"1":7}}'}, {"endOffset": {"b": {"2": 9}}}]}
    assert progress_positions(progress) == {("a", 0): 5, ("a", 1): 7, ("b", 2): 9}
    assert progress_positions(None) == {}


def test_acknowledged_records_become_per_record_ages_latencies_and_positions() -> None:
    """Real-time mode: the interceptors' drained text (per source partition) feeds the same series."""
    metrics = ReplicationMetrics("src", "tgt")
    # topic, partition, remote, count, bytes, ts sum/min/max, age sum/max/min, latency sum/max/min, last offset
    line = "\t".join(str(v) for v in ("orders", 2, "src.orders", 4, 400, 4000, 900, 1100, 40, 15, 5, 80, 30, 10, 41))
    assert metrics.observe_acknowledged(line + "\nnot a line\n") == 4
    metrics.observe_acknowledged(line.replace("\t41", "\t45"))  # the next drain adds up
    metrics.observe_commit()
    metrics.observe_source_ends({("orders", 2): 50})
    got = _scrape(serve(metrics, 0, "127.0.0.1"))
    p2 = (("partition", "2"), ("source", "src"), ("target", "tgt"), ("topic", "src.orders"))
    assert got[("kmirror_record_count_total", p2)] == 8
    assert got[("kmirror_byte_count_total", p2)] == 800
    assert got[("kmirror_record_age_ms_avg", p2)] == pytest.approx(10)
    assert got[("kmirror_replication_latency_ms_avg", p2)] == pytest.approx(20)
    assert got[("kmirror_replication_latency_ms_max", p2)] == 30
    lag = {dict(labels)["partition"]: v for (name, labels), v in got.items() if name == "kmirror_partition_lag"}
    assert lag == {"2": 50 - 46}
    assert got[("kmirror_batches_total", (("source", "src"), ("target", "tgt")))] == 1
