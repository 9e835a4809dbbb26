"""The replication benchmark's interleaved pairs (`--repeat N`) and fleet case, pure parts: the order of the runs,
medians and spreads of the pairs' ratios, goals on the median and the worst pair, the source set sized for the
copy window, the stall watch, and the fleet's flows (topic families, MM2's aliases, kmirror's flows)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks.replication.cli import PAIR_INDEX, eos_pairs, pair_runs, parse_args, workloads
from benchmarks.replication.common import Cluster, Workload
from benchmarks.replication.phases import (
    CopyTiming,
    kmirror_document,
    mm2_properties,
    mm2_stall_lines,
    parse_variants,
    remote_topics,
    source_aliases,
    summarise,
)
from benchmarks.replication.repeat import (
    StallWatch,
    higher_is_better,
    judge,
    median_and_spread,
    pair_order,
    pair_ratios,
    records_for_window,
    stalls_of,
    worst,
)
from benchmarks.replication.report import case_ratios, ratios, runs_of, table
from reconciler.spec.loader import load_text

pytestmark = pytest.mark.unit

SOURCE = Cluster("source", Path("/nonexistent/s"), "127.0.0.1:1", 1)
TARGET = Cluster("target", Path("/nonexistent/t"), "127.0.0.1:2", 2)


# -- the order --------------------------------------------------------------------------------------------------


def test_pairs_interleave_mm2_then_kmirror() -> None:
    assert pair_order(3) == [(1, "mm2"), (1, "kmirror"), (2, "mm2"), (2, "kmirror"), (3, "mm2"), (3, "kmirror")]
    assert pair_order(2, ["kmirror"]) == [(1, "kmirror"), (2, "kmirror")]
    with pytest.raises(ValueError):
        pair_order(0)


def test_each_pair_has_aliases_and_topics_of_its_own() -> None:
    (mm2_1, km_1), (mm2_2, km_2) = pair_runs(1, parse_variants()[0]), pair_runs(2, parse_variants()[0])
    assert mm2_1.aliases != mm2_2.aliases and km_1.aliases != km_2.aliases
    assert len({mm2_1.latency_topic, mm2_2.latency_topic, km_1.latency_topic, km_2.latency_topic}) == 4
    assert km_2.index == PAIR_INDEX + 2 and km_2.name == "pair2"


def test_repeat_refuses_variants_and_pairs_under_one() -> None:
    assert parse_args(["--repeat", "3"]).repeat == 3
    assert parse_args([]).repeat is None
    for argv in (["--repeat", "0"], ["--repeat", "2", "--variant", "x a=b"], ["--repeat", "2", "--mm2-eos"]):
        with pytest.raises(SystemExit):
            parse_args(argv)


def test_exactly_once_pairs_need_mm2_eos_and_one_exactly_once_variant() -> None:
    eos = ["--repeat", "2", "--mm2-eos", "--variant", "eos delivery=exactly_once"]
    assert eos_pairs(parse_args(eos)) is True
    assert eos_pairs(parse_args(["--repeat", "2"])) is False
    refused = (
        ["--repeat", "2", "--mm2-eos", "--variant", "x producer.linger.ms=5"],  # not exactly-once
        [*eos, "--variant", "eos2 delivery=exactly_once"],  # which one would the pairs run?
        ["--repeat", "2", "--variant", "eos delivery=exactly_once"],  # against MM2's at-least-once
    )
    for argv in refused:
        with pytest.raises(SystemExit):
            parse_args(argv)
    # without --repeat, --mm2-eos and variants stay one run of each, as before
    assert parse_args(["--mm2-eos", "--variant", "a x=1", "--variant", "b y=2"]).repeat is None


def test_exactly_once_pairs_run_mm2_exactly_once_against_the_variant() -> None:
    variant = parse_variants(variants=["eos delivery=exactly_once producer.linger.ms=5"])[1]
    mm2, km = pair_runs(2, variant, eos=True)
    assert mm2.eos and km.transactional
    assert km.producer == {"linger.ms": "5"} and km.index == PAIR_INDEX + 2
    plain_mm2, _ = pair_runs(2, parse_variants()[0])
    assert not plain_mm2.eos and plain_mm2.aliases == mm2.aliases


# -- medians and spreads ----------------------------------------------------------------------------------------


def test_median_and_spread_of_the_pairs_ratios() -> None:
    per_pair = [
        {"throughput_kmirror_over_mm2": 1.57, "first_record_kmirror_minus_mm2_s": -1.0},
        {"throughput_kmirror_over_mm2": 0.72, "first_record_kmirror_minus_mm2_s": 0.5, "only_here": 3},
        {"throughput_kmirror_over_mm2": 1.1, "first_record_kmirror_minus_mm2_s": None},
        {},  # a stalled pair
    ]
    medians, spread = median_and_spread(per_pair)
    assert medians["throughput_kmirror_over_mm2"] == 1.1
    assert spread["throughput_kmirror_over_mm2"] == [0.72, 1.57]
    # None left out: the median of the two pairs that have it
    assert medians["first_record_kmirror_minus_mm2_s"] == -0.25
    assert spread["first_record_kmirror_minus_mm2_s"] == [-1.0, 0.5]
    assert medians["only_here"] == 3 and spread["only_here"] == [3, 3]
    assert median_and_spread([{"x": None}]) == ({}, {})


def test_the_worst_pair_is_the_lowest_throughput_and_the_highest_cost() -> None:
    spread = {"throughput_kmirror_over_mm2": [0.8, 1.3], "cpu_per_record_kmirror_over_mm2_all": [0.7, 1.2]}
    assert higher_is_better("throughput_kmirror_over_mm2")
    assert not higher_is_better("cpu_per_record_kmirror_over_mm2_all")
    assert not higher_is_better("variant_x_cpu_per_record_over_mm2_all")
    assert not higher_is_better("latency_p99_ms_kmirror_over_mm2")
    assert worst("throughput_kmirror_over_mm2", spread) == 0.8
    assert worst("cpu_per_record_kmirror_over_mm2_all", spread) == 1.2
    assert worst("absent", spread) is None


def test_goals_on_the_median_and_the_worst_pair() -> None:
    medians = {"throughput_kmirror_over_mm2": 1.1, "cpu_per_record_kmirror_over_mm2_all": 0.9, "kmirror_p99_ms": 40}
    spread = {
        "throughput_kmirror_over_mm2": [0.95, 1.3],
        "cpu_per_record_kmirror_over_mm2_all": [0.8, 1.0],
        "kmirror_p99_ms": [30, 130],
    }
    goals = judge(medians, spread)
    assert (goals["records_per_s"]["met_on_median"], goals["records_per_s"]["met_on_worst_pair"]) == (True, False)
    assert goals["records_per_s"]["worst_pair"] == 0.95
    assert (goals["cpu_per_record"]["met_on_median"], goals["cpu_per_record"]["met_on_worst_pair"]) == (True, True)
    assert goals["p99_at_latency_rate"]["worst_pair"] == 130
    assert goals["p99_at_latency_rate"]["met_on_worst_pair"] is False
    unmeasured = judge({}, {})["p99_at_latency_rate"]
    assert unmeasured["met_on_median"] is None and unmeasured["met_on_worst_pair"] is None


def _run(rate: int, cpu_all: float, first: float, p99: float, **extra: object) -> dict[str, object]:
    return {
        "records_per_s": rate,
        "records_per_s_steady": rate,
        "cpu_s_per_m_records_all": cpu_all,
        "cpu_s_per_m_records": {"replicator": cpu_all / 2},
        "first_record_after_s": first,
        "copy_s": 35.0,
        "mb_per_s": 1.0,
        "latency": {"target": {"p50_ms": p99 / 2, "p99_ms": p99}, "source_only": {"p50_ms": 5.0, "p99_ms": 9.0}},
        **extra,
    }


def test_case_ratios_of_interleaved_pairs() -> None:
    pairs = [
        {"mm2": _run(100_000, 20.0, 6.0, 50.0), "kmirror": _run(120_000, 18.0, 5.0, 30.0)},
        {"mm2": _run(100_000, 20.0, 6.0, 50.0), "kmirror": _run(80_000, 26.0, 7.0, 120.0)},
        {"mm2": _run(100_000, 20.0, 6.0, 50.0), "kmirror": _run(105_000, 20.0, 6.0, 40.0)},
    ]
    out = case_ratios({"pairs": pairs})
    assert out["ratios"]["throughput_kmirror_over_mm2"] == 1.05
    assert out["ratios_spread"]["throughput_kmirror_over_mm2"] == [0.8, 1.2]
    assert out["ratios"]["cpu_per_record_kmirror_over_mm2_all"] == 1.0
    assert out["ratios_spread"]["first_record_kmirror_minus_mm2_s"] == [-1.0, 1.0]
    assert out["ratios"]["kmirror_p99_ms"] == 40.0
    assert out["pairs_measured"] == 3 and out["stalls"] == []
    assert out["goals"]["records_per_s"]["met_on_median"] is True
    assert out["goals"]["records_per_s"]["met_on_worst_pair"] is False
    assert out["ratios_per_pair"][1]["throughput_kmirror_over_mm2"] == 0.8
    assert [n for n, _ in runs_of({"pairs": pairs})][:3] == ["mm2 #1", "kmirror #1", "mm2 #2"]
    # a single run keeps its own ratios, no spread
    assert case_ratios({"mm2": pairs[0]["mm2"], "kmirror": pairs[0]["kmirror"]}) == {
        "ratios": ratios({"mm2": pairs[0]["mm2"], "kmirror": pairs[0]["kmirror"]})
    }


def test_exactly_once_pairs_report_medians_and_spreads_judged_on_issue_34s_goals() -> None:
    pairs = [  # MM2 exactly-once, kmirror exactly-once: rate, CPU s/M, first record s, p99 ms (p50 = p99 / 2)
        {"mm2": _run(40_000, 30.0, 8.0, 100.0), "kmirror": _run(60_000, 18.0, 7.0, 150.0)},
        {"mm2": _run(50_000, 30.0, 9.0, 200.0), "kmirror": _run(70_000, 15.0, 9.0, 180.0)},
        {"mm2": _run(45_000, 30.0, 8.5, 100.0), "kmirror": _run(90_000, 21.0, 9.5, 90.0)},
    ]
    out = case_ratios({"pairs": pairs, "pairs_exactly_once": True})
    r, spread = out["ratios"], out["ratios_spread"]
    assert r["throughput_kmirror_over_mm2"] == 1.5 and spread["throughput_kmirror_over_mm2"] == [1.4, 2.0]
    assert r["cpu_per_record_kmirror_over_mm2_all"] == 0.6 and spread["cpu_per_record_kmirror_over_mm2_all"] == [
        0.5,
        0.7,
    ]
    assert r["latency_p99_ms_kmirror_over_mm2"] == 0.9 and spread["latency_p99_ms_kmirror_over_mm2"] == [0.9, 1.5]
    assert r["latency_p50_ms_kmirror_over_mm2"] == 0.9
    assert r["first_record_kmirror_minus_mm2_s"] == 0.0 and spread["first_record_kmirror_minus_mm2_s"] == [-1.0, 1.0]
    # each replicator's own figures, medians and spreads too
    assert (r["mm2_p99_ms"], r["kmirror_p99_ms"], r["kmirror_p50_ms"]) == (100.0, 150.0, 75.0)
    assert r["mm2_records_per_s"] == 45_000 and spread["kmirror_records_per_s"] == [60_000, 90_000]
    assert r["mm2_first_record_s"] == 8.5 and spread["kmirror_first_record_s"] == [7.0, 9.5]
    goals = out["goals"]
    assert set(goals) == {"records_per_s", "cpu_per_record", "p99_at_latency_rate", "first_record"}
    p99 = goals["p99_at_latency_rate"]
    assert p99["ratio"] == "latency_p99_ms_kmirror_over_mm2" and p99["goal"] == "<= 1.0x MM2 exactly-once"
    assert (p99["median"], p99["met_on_median"], p99["worst_pair"], p99["met_on_worst_pair"]) == (0.9, True, 1.5, False)
    assert goals["first_record"]["met_on_median"] is True and goals["first_record"]["met_on_worst_pair"] is False
    assert goals["records_per_s"]["worst_pair"] == 1.4  # the lowest rate ratio is the worst pair
    # at-least-once pairs keep issue 37's absolute p99 goal
    assert case_ratios({"pairs": pairs})["goals"]["p99_at_latency_rate"]["ratio"] == "kmirror_p99_ms"
    text = table({"conditions": {"records": 100_000}, "results": {"pairs": pairs}, **out})
    assert "latency_p99_ms_kmirror_over_mm2: 0.9 [0.9 - 1.5]" in text
    assert "goal p99_at_latency_rate <= 1.0x MM2 exactly-once: median 0.9 (met: yes), worst pair 1.5 (met: no)" in text


def test_a_stalled_pair_gives_no_ratios_and_is_reported() -> None:
    stalled = {"records_on_target": 79_631, "expected": 80_000, "missing": 369, "no_progress_s": 60.2}
    pairs = [
        {"mm2": _run(50_000, 20.0, 6.0, 50.0, stalled=stalled), "kmirror": _run(60_000, 18.0, 5.0, 30.0)},
        {"mm2": _run(100_000, 20.0, 6.0, 50.0), "kmirror": _run(90_000, 22.0, 5.0, 30.0)},
    ]
    assert pair_ratios(pairs[0], None, ratios) == {}
    out = case_ratios({"pairs": pairs})
    assert out["ratios"]["throughput_kmirror_over_mm2"] == 0.9  # the second pair only
    assert out["pairs_measured"] == 1
    assert out["stalls"] == stalls_of(pairs) == [{"pair": 1, "replicator": "mm2", **stalled}]
    doc = {"conditions": {"records": 80_000}, "results": {"pairs": pairs}, **out}
    text = table(doc)
    assert "STALLED: pair 1 mm2: 79,631 of 80,000 records" in text
    assert "throughput_kmirror_over_mm2: 0.9 [0.9 - 0.9]" in text


def test_a_single_run_that_stalled_gives_no_ratio_against_the_other() -> None:
    stalled = {"records_on_target": 79_631, "expected": 80_000, "missing": 369, "no_progress_s": 61.0}
    results = {"mm2": _run(50_000, 20.0, 6.0, 50.0, stalled=stalled), "kmirror": _run(60_000, 18.0, 5.0, 30.0)}
    out = case_ratios(results)
    assert "throughput_kmirror_over_mm2" not in out["ratios"]
    assert out["stalls"] == [{"replicator": "mm2", **stalled}]
    doc = {"conditions": {"records": 80_000}, "results": results, **out}
    assert "STALLED: mm2: 79,631 of 80,000 records, no progress for 61.0 s" in table(doc)


def test_a_failed_run_leaves_its_pair_without_a_ratio_against_mm2() -> None:
    pairs = [{"mm2": _run(100_000, 20.0, 6.0, 50.0), "errors": {"kmirror": "boom"}}]
    out = case_ratios({"pairs": pairs, "ceiling": None})
    assert "throughput_kmirror_over_mm2" not in out["ratios"]
    assert [n for n, _ in runs_of({"pairs": pairs})] == ["mm2 #1"]


# -- the window -------------------------------------------------------------------------------------------------


def test_the_set_is_sized_for_the_window_from_the_fastest_warm_up() -> None:
    # 30 s at 2x the fastest warm-up (50,000/s) = 3,000,000, over the floor
    assert records_for_window(30, [40_000, 50_000], 500_000) == 4_500_000
    assert records_for_window(30, [1_000, None], 500_000) == 500_000  # the floor (--records) wins
    assert records_for_window(30, [], 500_000) == 500_000  # no warm-up: the floor
    assert records_for_window(30, [33_333], 0, margin=1.0, multiple=20) % 20 == 0


# -- stalls -----------------------------------------------------------------------------------------------------


def test_stall_watch_waits_for_the_first_record_then_for_progress() -> None:
    w = StallWatch(stall_s=10)
    assert not w.update(0, 0)
    assert not w.update(100, 0)  # nothing yet: a start-up, the phase timeout governs
    assert not w.update(101, 5)
    assert not w.update(110.9, 5)
    assert w.update(111, 5)  # 10 s without progress
    assert not w.update(112, 6)  # moves again: not stalled
    assert w.report(130, 10) == {"records_on_target": 6, "expected": 10, "missing": 4, "no_progress_s": 18}


def test_a_stalled_copy_is_summarised_up_to_its_last_progress() -> None:
    timing = CopyTiming(started=0.0, first=5.0, first_record=5.0, done=25.0, first_count=1000)
    timing.stalled = {"records_on_target": 41_000, "expected": 80_000, "missing": 39_000, "no_progress_s": 60}
    timing.final_count = 41_000
    cpu = {"replicator": 10.0, "source_broker": 2.0, "target_broker": 4.0}
    out = summarise(timing, 80_000, 1024, cpu, {k: 0.0 for k in cpu})
    assert out["records_per_s"] == 2000  # 40,000 records in 20 s
    assert out["stalled"]["missing"] == 39_000
    assert out["records_per_s_steady"] is None
    assert out["cpu_s_per_m_records_all"] == 400.0  # 16 CPU s over 40,000 records


def test_mm2_stall_lines_keep_one_line_per_retry_loop(tmp_path: Path) -> None:
    log = tmp_path / "mm2.log"
    line = (
        "[2026-11-27 10:00:0{i}] WARN [Producer clientId=p] Got error produce response with correlation id {i} on "
        "topic-partition mm2src.bench.d03-{i}, retrying (2147483646 attempts left). Error: "
        "OUT_OF_ORDER_SEQUENCE_NUMBER (org.apache.kafka.clients.producer.internals.Sender)"
    )
    log.write_text("\n".join([line.format(i=i) for i in range(5)] + ["[x] INFO fine"]) + "\n")
    lines = mm2_stall_lines(log)
    assert len(lines) == 1 and "OUT_OF_ORDER_SEQUENCE_NUMBER" in lines[0]
    assert mm2_stall_lines(tmp_path / "absent.log") == []


# -- the fleet --------------------------------------------------------------------------------------------------

FLEET = Workload("fleet", 1024, 40, 20, 80_000, flows=6)


def test_fleet_topics_split_round_robin_into_flows() -> None:
    families = FLEET.families()
    assert len(families) == 6 and sorted(t for f in families for t in f) == FLEET.data_topics
    assert families[0] == ["bench.d00", "bench.d06", "bench.d12", "bench.d18"]
    assert families[5] == ["bench.d05", "bench.d11", "bench.d17"]
    assert FLEET.family_pattern(5) == "(bench[.]d05|bench[.]d11|bench[.]d17)"
    one = Workload("one", 1024, 40, 20, 80_000)
    assert one.families() == [one.data_topics] and one.family_pattern(0) == one.pattern
    with pytest.raises(ValueError):
        Workload("bad", 1024, 6, 2, 10, flows=3).families()


def test_the_fleet_suite_runs_800_partitions_as_one_flow_and_as_six() -> None:
    args = parse_args(["--suite", "fleet"])
    assert args.precreate_remotes
    wls = workloads(args)
    assert [(w.topics * w.partitions, w.flows) for w in wls] == [(800, 1), (800, 6)]


def test_mm2_runs_the_six_flows_in_one_process() -> None:
    args = argparse.Namespace(mm2_tasks=2, mm2_prop=[])
    mm2, _ = pair_runs(1, parse_variants()[0])
    props = mm2_properties(SOURCE, TARGET, args, FLEET, mm2)
    s, t = mm2.aliases
    aliases = source_aliases(s, 6)
    assert props["clusters"] == ",".join([*aliases, t])
    for i, a in enumerate(aliases):
        assert props[f"{a}->{t}.enabled"] == "true" and props[f"{a}.bootstrap.servers"] == SOURCE.bootstrap
        assert props[f"{a}->{t}.topics"].startswith(FLEET.family_pattern(i))
    assert props[f"{aliases[0]}->{t}.topics"].endswith(mm2.latency_topic.replace(".", "[.]"))
    # no flow, and no heartbeats, between two aliases of the one source cluster
    for a in aliases:
        for b in aliases:
            if a != b:
                assert props[f"{a}->{b}.enabled"] == props[f"{a}->{b}.emit.heartbeats.enabled"] == "false"
    remotes = remote_topics(s, FLEET)
    assert len(remotes) == 20 and f"{aliases[5]}.bench.d17" in remotes


def test_kmirror_runs_the_same_six_flows_and_their_remote_topics_match() -> None:
    _, km = pair_runs(1, parse_variants()[0])
    doc = kmirror_document(SOURCE, TARGET, None, FLEET, km)
    state = load_text(json.dumps(doc)).state
    flows = [state.flow(f["name"]) for f in doc["flows"]]
    assert len(flows) == 6
    remotes = [f.remote_topic(t) for f, family in zip(flows, FLEET.families(), strict=True) for t in family]
    assert remotes == remote_topics(km.aliases[0], FLEET)  # what the harness creates and deletes
    assert doc["flows"][0]["topics"]["include"][-1] == km.latency_topic.replace(".", "[.]")
    assert all(len(f["topics"]["include"]) == 1 for f in doc["flows"][1:])
