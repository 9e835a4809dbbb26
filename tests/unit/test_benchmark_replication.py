"""The replication benchmark's pure parts: percentiles, per-minute buckets, slopes and the memory-growth verdict,
ratios, variant parsing, the kmirror.yaml a variant makes, MM2's exactly-once properties, perf counters."""

from __future__ import annotations

import argparse
import dataclasses
import json
import struct
from pathlib import Path

import pytest

from benchmarks.replication.cli import parse_args, workloads
from benchmarks.replication.common import Cluster, Workload
from benchmarks.replication.load import parse_consumer_perf, record_headers
from benchmarks.replication.measure import (
    MIB,
    MachineMark,
    MinuteBuckets,
    between,
    gc_from_perfdata,
    growth_verdict,
    latency_stats,
    linear_slope,
    max_per_second,
    overall_verdict,
    parse_jstat_gcutil,
    parse_perfdata,
    per_minute_deltas,
    percentiles,
    quiet,
)
from benchmarks.replication.phases import (
    MM2_DEFAULT,
    MM2_EOS,
    STEADY_FROM,
    compiler_share,
    kmirror_document,
    mm2_properties,
    parse_value,
    parse_variants,
    set_path,
    steady_rate,
    thread_delta,
)
from benchmarks.replication.report import ratio, ratios, records_described, runs_of
from benchmarks.replication.warmup import KMIRROR_WARMUP_INDEX, MM2_WARMUP, warmup_workload
from reconciler.spec.loader import load_text

pytestmark = pytest.mark.unit


# -- percentiles ------------------------------------------------------------------------------------------------


def test_latency_stats_nearest_rank() -> None:
    stats = latency_stats(float(v) for v in range(1, 101))  # 1..100 ms
    assert stats["records"] == 100
    assert stats["p50_ms"] == 51  # index int(0.5 * 100) = 50 -> 51
    assert stats["p90_ms"] == 91
    assert stats["p99_ms"] == 100
    assert stats["max_ms"] == 100
    assert stats["mean_ms"] == 50.5


def test_latency_stats_empty_and_single() -> None:
    assert latency_stats([]) == {"records": 0}
    one = latency_stats([7.0])
    assert one["p50_ms"] == one["p99_ms"] == one["max_ms"] == 7.0


def test_percentiles_leave_out_the_warmup() -> None:
    samples = [(1000, 900.0), (2000, 800.0), (7000, 10.0), (8000, 20.0)]
    stats = percentiles(samples, since_ms=5000)
    assert stats["records"] == 2
    assert stats["max_ms"] == 20.0


def test_max_per_second() -> None:
    samples = [(1000, 5.0), (1500, 9.0), (3100, 1000.0), (500, 99999.0)]
    assert max_per_second(samples, since_ms=1000) == [9, 0, 1000]


# -- per-minute buckets -----------------------------------------------------------------------------------------


def test_minute_buckets() -> None:
    b = MinuteBuckets(start_ms=10_000)
    b.add(9_999, 1.0)  # before the start: counted apart
    for i in range(120):  # one record a second for two minutes, latency = its second
        b.add(10_000 + i * 1000, float(i))
    b.add(10_000 + 60_000 * 3 + 5, 42.0)  # minute 3, minute 2 empty
    rows = b.summary()
    assert [r["minute"] for r in rows] == [0, 1, 2, 3]
    assert b.before_start == 1
    assert rows[0]["records"] == 60 and rows[0]["records_per_s"] == 1
    assert rows[0]["max_ms"] == 59 and rows[1]["p50_ms"] == 90
    assert rows[2] == {"minute": 2, "records_per_s": 0, "records": 0}
    assert rows[3]["records"] == 1
    assert len(b.summary(minutes=2)) == 2


def test_per_minute_deltas_of_a_cumulative_counter() -> None:
    points = [(0.0, 0.0), (30.0, 1.0), (60.0, 2.0), (90.0, 2.5), (120.0, 4.0)]
    assert per_minute_deltas(points, 2) == [2.0, 2.0]
    assert per_minute_deltas(points, 4)[3] is None  # nothing sampled near minute 4's end
    assert per_minute_deltas([], 2) == [None, None]
    # a counter first sampled at 5 s: the first minute counts from that sample
    assert per_minute_deltas([(5.0, 10.0), (55.0, 13.0), (65.0, 14.0)], 1) == [3.0]


# -- growth verdict ---------------------------------------------------------------------------------------------


def _series(f: object, minutes: float = 30, every: float = 10) -> list[tuple[float, float]]:
    assert callable(f)
    return [(t, float(f(t))) for t in [i * every for i in range(int(minutes * 60 / every) + 1)]]


def test_linear_slope() -> None:
    assert linear_slope([(0, 1), (1, 3), (2, 5)]) == pytest.approx(2.0)
    assert linear_slope([(0, 1)]) == 0.0
    assert linear_slope([(1, 1), (1, 5)]) == 0.0


def test_a_flat_series_is_flat() -> None:
    v = growth_verdict(_series(lambda t: 800 * MIB))
    assert v["verdict"] == "flat"
    assert v["slope_last_half_mib_per_min"] == 0.0


def test_a_heap_that_grows_then_stays_is_flat() -> None:
    # 400 MiB growing 40 MiB/min for 10 minutes, then flat at 800 MiB
    v = growth_verdict(_series(lambda t: min(400 + 40 * t / 60, 800) * MIB))
    assert v["verdict"] == "flat"
    assert v["slope_first_half_mib_per_min"] > 10


def test_a_steady_leak_grows() -> None:
    v = growth_verdict(_series(lambda t: (500 + 5 * t / 60) * MIB))  # 5 MiB/min all along
    assert v["verdict"] == "grows"
    assert v["slope_last_half_mib_per_min"] == pytest.approx(5.0, abs=0.01)


def test_a_late_leak_grows() -> None:
    v = growth_verdict(_series(lambda t: (500 + max(0.0, t / 60 - 15) * 10) * MIB))
    assert v["verdict"] == "grows"


def test_growth_that_slows_down_is_slowing() -> None:
    # 20 MiB/min for 15 minutes, then 4 MiB/min: still growing (beyond 2 % over the half), at a fifth of the rate
    v = growth_verdict(_series(lambda t: (200 + 20 * min(t, 900) / 60 + 4 * max(0.0, t - 900) / 60) * MIB))
    assert v["verdict"] == "slowing"


def test_small_growth_relative_to_the_size_is_flat() -> None:
    # 1.5 MiB/min on 4 GiB: 22 MiB over the last 15 minutes, 0.5 % of it
    v = growth_verdict(_series(lambda t: (4096 + 1.5 * t / 60) * MIB))
    assert v["verdict"] == "flat"


def test_too_few_samples_or_too_short_a_soak() -> None:
    assert growth_verdict(_series(lambda t: t * MIB, minutes=1))["verdict"] == "too_short"
    assert growth_verdict(_series(lambda t: t * MIB, minutes=8, every=1))["verdict"] == "too_short"  # < 5 min a half
    assert growth_verdict(_series(lambda t: t * MIB, minutes=8, every=1), min_half_s=60)["verdict"] == "grows"


def test_overall_verdict() -> None:
    assert overall_verdict(["flat", "flat"]) == "flat"
    assert overall_verdict(["flat", "slowing", "grows"]) == "grows"
    assert overall_verdict(["flat", "too_short"]) == "too_short"
    assert overall_verdict([]) == "flat"


# -- the machine's conditions -----------------------------------------------------------------------------------


def test_between_marks_and_quiet() -> None:
    a = MachineMark(at=100.0, loadavg=(0.2, 0.3, 0.4), steal_s=10.0, busy_s=1000.0, ours_s=50.0)
    b = MachineMark(at=200.0, loadavg=(1.5, 0.8, 0.5), steal_s=12.0, busy_s=1150.0, ours_s=190.0)
    d = between(a, b, cpus=2)
    assert d["wall_s"] == 100.0
    assert d["steal_s"] == 2.0 and d["steal_share"] == 0.01
    assert d["foreign_cpu_s"] == 10.0 and d["foreign_cpu_share"] == 0.05
    assert quiet([d], loadavg_start=(0.2, 0.3, 0.4), cpus=2)
    assert not quiet([d], loadavg_start=(1.2, 0.3, 0.4), cpus=2)
    busy = between(a, MachineMark(200.0, (3, 2, 1), 12.0, 1250.0, 190.0), cpus=2)
    assert busy["foreign_cpu_share"] == 0.55  # (250 - 140) / (100 s x 2 CPUs)
    assert not quiet([d, busy], loadavg_start=(0.2, 0.3, 0.4), cpus=2)


# -- ratios -----------------------------------------------------------------------------------------------------


def _run(rate: int, cpu_all: float, cpu_repl: float, first: float, p50: float, p99: float) -> dict[str, object]:
    return {
        "records_per_s": rate,
        "records_per_s_steady": rate * 1.2,
        "cpu_s_per_m_records_all": cpu_all,
        "cpu_s_per_m_records": {"replicator": cpu_repl},
        "first_record_after_s": first,
        "latency": {"target": {"p50_ms": p50, "p99_ms": p99}},
    }


def test_ratio() -> None:
    assert ratio(1, 3) == 0.33
    assert ratio(None, 3) is None
    assert ratio(3, 0) is None


def test_ratios_kmirror_mm2_ceiling() -> None:
    results = {
        "mm2": _run(80_000, 24.0, 14.0, 5.2, 20.0, 50.0),
        "kmirror": _run(60_000, 30.0, 21.0, 9.0, 40.0, 1000.0),
        "ceiling": {"perf_tools": {"records_per_s": 100_000}, "copy_loop": {"records_per_s": 120_000,
                                                                            "cpu_s_per_m_records_all": 15.0}},
        "kmirror_variants": {"rt": _run(88_000, 20.0, 15.0, 7.0, 20.0, 90.0)},
    }  # fmt: skip
    r = ratios(results)
    assert r["throughput_kmirror_over_mm2"] == 0.75
    assert r["throughput_steady_kmirror_over_mm2"] == 0.75
    assert r["cpu_per_record_kmirror_over_mm2_all"] == 1.25
    assert r["cpu_per_record_kmirror_over_mm2_replicator"] == 1.5
    assert r["latency_p50_ms_kmirror_over_mm2"] == 2.0
    assert r["latency_p99_ms_kmirror_over_mm2"] == 20.0
    assert r["first_record_kmirror_minus_mm2_s"] == 3.8
    assert r["ceiling_records_per_s"] == 120_000
    assert r["throughput_kmirror_over_ceiling"] == 0.5
    assert r["throughput_mm2_over_ceiling"] == 0.67
    assert r["throughput_kmirror_over_ceiling_perf_tools"] == 0.6
    assert r["cpu_per_record_kmirror_over_copy_loop"] == 2.0
    assert r["variant_rt_throughput_over_mm2"] == 1.1


def test_ratios_of_an_exactly_once_variant_are_against_mm2_exactly_once() -> None:
    eos = _run(40_000, 30.0, 20.0, 6.0, 30.0, 60.0)
    km_eos = _run(50_000, 30.0, 20.0, 6.0, 30.0, 60.0) | {"config": {"delivery": "exactly_once"}}
    results = {"mm2": _run(80_000, 24.0, 14.0, 5.2, 20.0, 50.0), "mm2_variants": {"eos": eos},
               "kmirror_variants": {"eos": km_eos}}  # fmt: skip
    assert ratios(results)["variant_eos_throughput_over_mm2"] == 1.25
    assert [n for n, _ in runs_of(results)] == ["mm2", "mm2 [eos]", "kmirror [eos]"]


def test_ratios_of_an_old_report_without_first_record() -> None:
    mm, km = _run(80_000, 24.0, 14.0, 5.2, 20.0, 50.0), _run(60_000, 30.0, 21.0, 9.0, 40.0, 1000.0)
    del mm["first_record_after_s"]
    assert "first_record_kmirror_minus_mm2_s" not in ratios({"mm2": mm, "kmirror": km})


def test_steady_rate() -> None:
    curve = [(0.0, 0), (1.0, 100), (2.0, 300), (4.0, 700), (6.0, 1000)]
    # from the first point with >= 25 % of 1000 (2.0 s, 300) to the last
    assert STEADY_FROM == 0.25
    assert steady_rate(curve, 1000) == 175
    assert steady_rate([(0.0, 0), (1.0, 1000)], 1000) is None


def test_compiler_share_counts_only_jit_threads_used_in_the_window() -> None:
    before = {"C2 CompilerThread": 4.0, "C1 CompilerThread": 1.0, "Executor task launch worker for task ": 2.0}
    after = {"C2 CompilerThread": 7.0, "C1 CompilerThread": 2.0, "Executor task launch worker for task ": 8.0,
             "GC Thread#": 1.0}  # fmt: skip
    # 3 + 1 of the 12 CPU s the replicator used in the window (a thread new in the window counts from zero)
    assert compiler_share(after, before, 12.0) == 0.33
    assert compiler_share(after, before, 0.0) is None


def test_thread_delta_keeps_each_process_busy_groups_busiest_first() -> None:
    before = {"replicator": {"C2 CompilerThread": 1.0, "kafka-producer-network-thread | producer-": 0.2}}
    after = {
        "replicator": {"C2 CompilerThread": 1.3, "kafka-producer-network-thread | producer-": 3.2, "GC Thread#": 0.9},
        "target_broker": {"data-plane-kafka-request-handler-": 5.0},
    }
    assert thread_delta(after, before) == {
        "replicator": {"kafka-producer-network-thread | producer-": 3.0, "GC Thread#": 0.9},
        "target_broker": {"data-plane-kafka-request-handler-": 5.0},
    }


# -- variants ---------------------------------------------------------------------------------------------------


def test_parse_variants() -> None:
    vs = parse_variants(
        ["spark.kmirror.maxOffsetsPerTrigger=500000"],
        ["linger.ms=20"],
        [
            "rt spark.kmirror.mode=realtime master=local[16] producer.compression.type=lz4"
            " consumer.fetch.max.wait.ms=10",
            "eos delivery=exactly_once spark.master=local[4] flow.offsets.offset_lag_max=1000",
        ],
        ["replication.start_from=latest"],
    )
    default, rt, eos = vs
    assert default.name == "default" and default.index == 0
    assert "spark.kmirror.triggerInterval" not in default.conf  # kmirror's defaults, as a user gets them
    assert default.conf["spark.kmirror.maxOffsetsPerTrigger"] == "500000"
    assert default.producer == {"linger.ms": "20"}
    assert default.flow == {"replication.start_from": "latest"}
    assert default.master is None and not default.transactional
    assert rt.conf["spark.kmirror.mode"] == "realtime" and "master" not in rt.conf
    assert rt.master == "local[16]"
    assert rt.producer == {"linger.ms": "20", "compression.type": "lz4"}
    assert rt.consumer == {"fetch.max.wait.ms": "10"}
    assert rt.aliases == ("kmsrc1", "kmdst1") and rt.latency_topic == "bench.lat-km1"
    assert eos.master == "local[4]" and "spark.master" not in eos.conf
    assert eos.flow == {
        "replication.start_from": "latest",
        "replication.delivery": "exactly_once",
        "offsets.offset_lag_max": 1000,
    }
    assert eos.transactional
    assert not any(k.startswith(("flow.", "delivery")) for k in eos.conf)


def test_parse_variants_rejects_a_bad_pair() -> None:
    with pytest.raises(ValueError, match="key=value"):
        parse_variants(variants=["x spark.kmirror.mode"])
    with pytest.raises(ValueError, match="name"):
        parse_variants(variants=["a=b"])


def test_parse_value_and_set_path() -> None:
    assert parse_value("100") == 100
    assert parse_value("true") is True
    assert parse_value("exactly_once") == "exactly_once"
    assert parse_value("10s") == "10s"
    doc: dict[str, object] = {"replication": {"start_from": "earliest"}}
    set_path(doc, "replication.delivery", "exactly_once")
    set_path(doc, "offsets.offset_lag_max", 5)
    assert doc == {"replication": {"start_from": "earliest", "delivery": "exactly_once"},
                   "offsets": {"offset_lag_max": 5}}  # fmt: skip
    with pytest.raises(ValueError):
        set_path(doc, "replication.delivery.x", 1)


SOURCE = Cluster("source", Path("/tmp/s"), "127.0.0.1:9092", 1)
TARGET = Cluster("target", Path("/tmp/t"), "127.0.0.1:9093", 2)
WORKLOAD = Workload("run", 1024, 6, 10, 1000)


def test_workload() -> None:
    assert WORKLOAD.data_topics[0] == "bench.d00" and WORKLOAD.data_topics[-1] == "bench.d09"
    assert WORKLOAD.pattern == "bench[.]d[0-9]+"
    assert WORKLOAD.per_topic == 100
    assert Workload("s", 100, 6, 1, 0, prefix="bench.soak-km").data_topics == ["bench.soak-km00"]


def test_a_variants_document_loads_as_a_kmirror_spec() -> None:
    text = "rt spark.kmirror.mode=realtime spark.kmirror.triggerInterval=10s "
    text += " master=local[16] flow.offsets.offset_lag_max=5"
    variant = parse_variants(variants=[text])[1]

    doc = kmirror_document(SOURCE, TARGET, "local[2]", WORKLOAD, variant)
    state = load_text(json.dumps(doc)).state
    flow = state.flow("bench")
    assert state.spark.master == "local[16]"
    assert flow.offsets.offset_lag_max == 5
    assert flow.remote_topic("bench.d00") == "kmsrc1.bench.d00"
    assert doc["flows"][0]["topics"]["include"] == ["bench[.]d[0-9]+", "bench[.]lat-km1"]


def test_a_delivery_variant_sets_the_flows_replication_delivery() -> None:
    variant = parse_variants(variants=["eos delivery=exactly_once"])[1]
    doc = kmirror_document(SOURCE, TARGET, "local[2]", WORKLOAD, variant)
    assert doc["flows"][0]["replication"]["delivery"] == "exactly_once"


# -- MM2 --------------------------------------------------------------------------------------------------------


def _mm2_args(*props: str) -> argparse.Namespace:
    return argparse.Namespace(mm2_tasks=2, mm2_prop=list(props))


def test_mm2_properties_at_least_once() -> None:
    props = mm2_properties(SOURCE, TARGET, _mm2_args(), WORKLOAD, MM2_DEFAULT)
    assert props["topics"] == "bench[.]d[0-9]+,bench[.]lat-mm2"
    assert props["mm2dst.producer.acks"] == "all"
    assert "mm2dst.exactly.once.source.support" not in props
    assert "dedicated.mode.enable.internal.rest" not in props


def test_mm2_properties_exactly_once() -> None:
    props = mm2_properties(SOURCE, TARGET, _mm2_args("tasks.max=4"), WORKLOAD, MM2_EOS)
    s, t = MM2_EOS.aliases
    assert props[f"{t}.exactly.once.source.support"] == "enabled"
    assert props["dedicated.mode.enable.internal.rest"] == "true"
    assert props["listeners"].startswith("http://127.0.0.1:")
    assert props[f"{s}.consumer.isolation.level"] == "read_committed"
    assert props[f"{s}.bootstrap.servers"] == SOURCE.bootstrap
    assert props["topics"].endswith("bench[.]lat-mm2eos")
    assert props["tasks.max"] == "4"  # --mm2-prop wins


# -- JVM counters -----------------------------------------------------------------------------------------------


def _perfdata(entries: dict[str, int | str]) -> bytes:
    """A little-endian hsperfdata image with these long and string entries."""
    body = b""
    for name, value in entries.items():
        raw_name = name.encode() + b"\0"
        name_off = 20
        data_off = name_off + len(raw_name)
        data_off += (-data_off) % 8
        if isinstance(value, int):
            data, kind, vector = struct.pack("<q", value), ord("J"), 0
        else:
            data, kind, vector = value.encode() + b"\0", ord("B"), len(value) + 1
        length = data_off + len(data)
        length += (-length) % 8
        entry = struct.pack("<iiibbbbi", length, name_off, vector, kind, 0, 0, 0, data_off)
        entry += raw_name + b"\0" * (data_off - name_off - len(raw_name)) + data
        body += entry + b"\0" * (length - len(entry))
    prologue = b"\xca\xfe\xc0\xc0" + bytes([1, 2, 0, 1]) + struct.pack("<iiqii", 0, 0, 0, 32, len(entries))
    return prologue + body


def test_parse_perfdata_and_gc_figures() -> None:
    counters = parse_perfdata(
        _perfdata({
            "sun.os.hrt.frequency": 1_000_000_000,
            "sun.gc.collector.0.name": "G1 young collection pauses",
            "sun.gc.collector.0.invocations": 40,
            "sun.gc.collector.0.time": 2_500_000_000,
            "sun.gc.collector.1.invocations": 1,
            "sun.gc.collector.1.time": 500_000_000,
            "sun.gc.collector.2.invocations": 3,
            "sun.gc.collector.2.time": 0,
            "sun.gc.generation.0.space.0.used": 64 * MIB,
            "sun.gc.generation.1.space.0.used": 192 * MIB,
        })
    )  # fmt: skip
    assert counters is not None
    assert counters["sun.gc.collector.0.name"] == "G1 young collection pauses"
    gc = gc_from_perfdata(counters)
    assert gc == {"gc_count": 44, "gc_s": 3.0, "young_gc": 40, "full_gc": 1, "concurrent_gc": 3,
                  "heap_used_mib": 256.0, "old_used_mib": 192.0}  # fmt: skip
    assert parse_perfdata(b"not perf data") is None


def test_parse_jstat_gcutil() -> None:
    out = """  S0     S1     E      O      M     CCS    YGC     YGCT     FGC    FGCT     CGC    CGCT       GCT
     -      -  41.18  23.65  97.37  92.82     35     0.412     0     0.000     4     0.021     0.433
"""
    gc = parse_jstat_gcutil(out)
    assert gc == {"gc_count": 39, "gc_s": 0.433, "young_gc": 35, "full_gc": 0, "concurrent_gc": 4,
                  "old_used_pct": 23.65}  # fmt: skip
    assert parse_jstat_gcutil("") == {}


# -- the soak's summary -----------------------------------------------------------------------------------------


def test_summarise_soak() -> None:
    from benchmarks.replication.measure import ProcessSampler
    from benchmarks.replication.report import soak_table
    from benchmarks.replication.soak import summarise_soak

    buckets = MinuteBuckets(start_ms=0)
    for minute in range(3):
        for i in range(600):  # 10 records/s, latency 10 ms, one 500 ms outlier in minute 1
            buckets.add(minute * 60_000 + i * 100, 500.0 if (minute, i) == (1, 7) else 10.0)
    sampler = ProcessSampler(groups={})
    ts = [float(t) for t in range(0, 1801, 10)]  # 30 minutes of samples, 3 minutes of records (enough here)
    sampler.series = {
        "replicator: java SparkSubmit (pid 10)": [
            (t, int((400 + t / 120) * MIB), {"gc_s": t / 600, "gc_count": int(t // 10)}) for t in ts
        ],
        "replicator: python3 job.py (pid 11)": [(t, 100 * MIB, {}) for t in ts],
        "source_broker: java Kafka (pid 1)": [(t, int((300 + 10 * t / 60) * MIB), {}) for t in ts],
        "replicator: jspawnhelper (pid 12)": [(t, MIB, {}) for t in ts[:3]],
    }
    out = summarise_soak(buckets, sampler, [600, 600, 540], minutes=3)
    rows = out["per_minute"]
    assert [r["records_per_s"] for r in rows] == [10, 10, 10]
    assert [r["sent_per_s"] for r in rows] == [10, 10, 9]
    assert rows[1]["max_ms"] == 500.0 and rows[0]["max_ms"] == 10.0
    assert rows[0]["replicator_rss_mib"] == pytest.approx(500 + 50 / 120, abs=0.1)  # the sample at 50 s
    assert rows[0]["replicator_gc_s"] == 0.1
    assert out["rss_growth"]["replicator: python3 job.py (pid 11)"]["verdict"] == "flat"
    assert out["rss_growth"]["source_broker: java Kafka (pid 1)"]["verdict"] == "grows"
    assert out["rss_growth"]["replicator: jspawnhelper (pid 12)"]["verdict"] == "transient"
    text = soak_table({"soak": {"kmirror": out}})
    assert "jspawnhelper (pid 12): transient" in text and "== soak kmirror: memory grows" in text
    assert out["memory_verdict"] == "grows"
    del sampler.series["source_broker: java Kafka (pid 1)"]
    assert summarise_soak(buckets, sampler, [], minutes=3)["memory_verdict"] == "flat"
    assert set(out["gc_s_per_minute"]) == {"replicator: java SparkSubmit (pid 10)"}
    assert out["gc_count_per_minute"]["replicator: java SparkSubmit (pid 10)"] == [6.0, 6.0, 6.0]


def test_a_run_without_settings_leaves_the_master_and_the_mode_to_the_job() -> None:
    from benchmarks.replication.common import Cluster
    from benchmarks.replication.phases import kmirror_document

    source, target = (Cluster(n, Path("/x"), f"127.0.0.1:{port}", 1) for n, port in (("s", 1), ("t", 2)))
    default, pinned = parse_variants(variants=["pinned master=local[2]"])
    doc = kmirror_document(source, target, None, WORKLOAD, default)
    assert "master" not in doc["spark"] and doc["spark"]["conf"] == {}
    assert kmirror_document(source, target, None, WORKLOAD, pinned)["spark"]["master"] == "local[2]"


def test_consumer_perf_row_is_found_above_trailing_warnings() -> None:
    out = (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, "
        "fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
        "2026-11-25 10:00:00:000, 2026-11-25 10:00:10:000, 976.6, 97.6, 1000000, 100000.0, 300, 9700, 100.7, "
        "103092.8\n"
        "WARNING: Exiting before consuming the expected number of messages: timeout (60000 ms) exceeded.\n"
    )
    assert parse_consumer_perf(out) == {"records_per_s": 100000.0, "fetch_records_per_s": 103092.8}
    with pytest.raises(RuntimeError, match="unexpected ConsumerPerformance output"):
        parse_consumer_perf("WARNING: nothing consumed\n")


def test_the_warm_up_set_has_the_shape_of_the_measured_one_in_topics_of_its_own() -> None:
    wl = Workload("1kb-10x24", 1024, 24, 10, 1_000_000)
    warm = warmup_workload(wl, None)
    assert warm is not None
    assert (warm.record_size, warm.partitions, warm.topics, warm.records) == (1024, 24, 10, 100_000)
    assert not set(warm.data_topics) & set(wl.data_topics)  # the measured replicators never see its records
    assert warmup_workload(wl, 0) is None  # no warm-up asked
    small = warmup_workload(wl, 7)  # at least a record per partition, split evenly over the topics
    assert small is not None and small.records == 240 and small.records % small.topics == 0


def test_headers_asked_for_reach_every_case_its_warm_up_and_the_report_line() -> None:
    args = parse_args(["--suite", "standard", "--headers", "3"])
    cases = workloads(args)
    assert [wl.headers for wl in cases] == [3, 3, 3]
    warm = warmup_workload(cases[0], None)
    assert warm is not None and warm.headers == 3  # the warm-up meets the brokers with the same records
    assert workloads(parse_args(["--topics", "2"]))[0].headers == 0  # none unless asked: the perf producer fills
    headers = record_headers(3)
    assert len(headers) == 3 and len({k for k, _ in headers}) == 3 and all(len(v) == 55 for _, v in headers)
    c = {"records": 1_000_000, "record_size_bytes": 1024, "headers_per_record": 3}
    assert records_described(c) == "1,000,000 records of 1024 B, 3 headers each"
    assert records_described({"records": 5, "record_size_bytes": 100}) == "5 records of 100 B"  # older reports


def test_the_warm_up_copies_under_aliases_no_measured_run_uses() -> None:
    main = parse_variants(variants=["eos delivery=exactly_once"])
    warm = dataclasses.replace(main[0], name="warmup", index=KMIRROR_WARMUP_INDEX)
    measured = {v.aliases for v in main} | {MM2_DEFAULT.aliases, MM2_EOS.aliases}
    assert warm.aliases not in measured and MM2_WARMUP.aliases not in measured
    assert warm.conf == main[0].conf and warm.producer == main[0].producer  # the default run's settings
