"""The command line: one run, a suite of runs (`--suite standard`), a soak (`--soak-minutes`), or a re-render of a
results JSON (`--rerender`). See benchmarks/README.md for the method and what each figure means."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.replication import __doc__ as package_doc
from benchmarks.replication.common import (
    MM2_ALIASES,
    Cluster,
    Workload,
    clusters,
    create_topics,
    delete_topics,
)
from benchmarks.replication.load import fill_source
from benchmarks.replication.measure import Conditions, steal_seconds
from benchmarks.replication.phases import (
    MM2_DEFAULT,
    MM2_EOS,
    MM2Run,
    Variant,
    parse_variants,
    remote_topics,
    run_ceiling,
    run_kmirror,
    run_mm2,
    source_aliases,
    steady_rate,
)
from benchmarks.replication.repeat import REPLICATORS, STALL_SECONDS, WINDOW_SECONDS, pair_order, records_for_window
from benchmarks.replication.report import case_ratios, chart, runs_of, soak_chart, soak_table, suite_table, table
from benchmarks.replication.soak import soak_one
from benchmarks.replication.warmup import warm_brokers, warmup_workload
from reconciler.devenv.jars import KAFKA_SOURCE_VERSION, KAFKA_TARGET_VERSION

#: The standing runs (issue 18): the standard 1 topic x 6 partitions x 1 KB, 100-byte records, 10 topics x 24
#: partitions; each on fresh clusters, with the same phases and the same record count.
SUITES: dict[str, list[tuple[str, int, int, int]]] = {
    # name, record size, topics, partitions
    "standard": [("1kb-1x6", 1024, 1, 6), ("100b-1x6", 100, 1, 6), ("1kb-10x24", 1024, 10, 24)],
    # issue 37's fleet: 20 topics x 40 partitions (800) as one flow, then as 6 flows at once (MM2: the same 6 flows
    # in its one process); remote topics created, with their leaders, before either replicator starts
    "fleet": [("1kb-20x40", 1024, 20, 40), ("1kb-20x40-6flows", 1024, 20, 40)],
}
#: Flows of a suite case (1 unless named here).
CASE_FLOWS = {"1kb-20x40-6flows": 6}
#: Suites whose remote topics are created before each replicator starts, whatever --precreate-remotes says.
PRECREATE_SUITES = {"fleet"}
#: The kmirror run of pair i uses variant index PAIR_INDEX + i (its aliases `kmsrc10i`, folder, latency topic).
PAIR_INDEX = 100


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.replication",
        description=(package_doc or "").splitlines()[0],
    )
    p.add_argument("--record-size", type=int, default=1024, help="bytes of record value (100 or 1024)")
    p.add_argument(
        "--headers",
        type=int,
        default=0,
        help="headers on every source record, each the size of a trace context (default 0; the ceiling's perf "
        "tools send none)",
    )
    p.add_argument("--partitions", type=int, default=6, help="partitions per source topic (6 or 24)")
    p.add_argument("--topics", type=int, default=1, help="source topics (1 or 10)")
    p.add_argument("--records", type=int, default=500_000, help="records in the whole source set")
    p.add_argument(
        "--suite", choices=sorted(SUITES), help="run every case of a suite (fresh clusters each) into one report"
    )
    p.add_argument("--latency-rate", type=int, default=10_000, help="records/s of the latency run")
    p.add_argument("--latency-seconds", type=int, default=60, help="length of the latency run (0: skip it)")
    p.add_argument("--latency-warmup", type=int, default=5, help="first seconds of the latency run not counted")
    p.add_argument("--latency-isolation", default="read_committed", choices=["read_committed", "read_uncommitted"],
                   help="isolation.level of the latency readers (read_committed: what exactly-once needs)")  # fmt: skip
    p.add_argument("--phases", default="ceiling,mm2,kmirror", help="comma-separated subset of ceiling,mm2,kmirror")
    p.add_argument(
        "--warmup-records",
        type=int,
        default=None,
        help="records each replicator copies (its own set and aliases) before any is measured, so that every one "
        "meets brokers warm for its kind of requests (default: a tenth of --records; 0: none)",
    )
    p.add_argument("--mm2-tasks", type=int, default=2, help="MM2 tasks.max (2: one per core)")
    p.add_argument("--mm2-heap", default="1g")
    p.add_argument("--mm2-prop", action="append", default=[], help="extra mm2.properties line key=value")
    p.add_argument("--mm2-eos", action="store_true",
                   help="also run MM2 with exactly-once source support (dedicated mode, internal REST)")  # fmt: skip
    p.add_argument(
        "--spark-master", default=None, help="spark.master of kmirror's runs (default: none, the job sizes it)"
    )
    p.add_argument("--kmirror-conf", action="append", default=[], help="extra spark.conf key=value")
    p.add_argument("--kmirror-producer", action="append", default=[], help="flow replication.producer key=value")
    p.add_argument("--kmirror-flow", action="append", default=[],
                   help="a flow field path=value, e.g. replication.delivery=exactly_once")  # fmt: skip
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        help="also run kmirror as 'NAME key=value ...' (producer.*, consumer.*: the flow's clients; master or "
        "spark.master; delivery: the flow's replication.delivery; flow.PATH: any flow field; others: spark.conf)",
    )
    p.add_argument("--soak-minutes", type=int, default=0, help="run a soak of this many minutes instead")
    p.add_argument("--soak-rate", type=int, default=10_000, help="records/s of the soak")
    p.add_argument("--soak-mm2", action="store_true", help="soak MM2 too, after kmirror, with the same load")
    p.add_argument("--soak-mm2-eos", action="store_true", help="the soaked MM2 with exactly-once source support")
    p.add_argument("--soak-sample-seconds", type=float, default=10.0, help="RSS and GC sampling interval")
    p.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="run N interleaved pairs (MM2, kmirror, MM2, kmirror, ... on the same clusters and source set); "
        "ratios are the pairs' medians, with their min-max (default: one run of each, as before)",
    )
    p.add_argument(
        "--window-seconds",
        type=float,
        default=WINDOW_SECONDS,
        help="with --repeat: the shortest copy window; the source set is sized from the warm-up's rates so that "
        "the fastest replicator copies at least this long (--records is then a floor)",
    )
    p.add_argument(
        "--stall-seconds",
        type=float,
        default=STALL_SECONDS,
        help="a replicator whose records on the target do not move for this long is reported as stalled, and the "
        "case goes on (0: wait for --phase-timeout and fail, as before)",
    )
    p.add_argument("--flows", type=int, default=1, help="flows copying the topics at once (split round-robin)")
    p.add_argument("--precreate-remotes", action="store_true",
                   help="create each run's remote topics and wait for their leaders before its replicator starts "
                        "(always on in the fleet suite)")  # fmt: skip
    p.add_argument("--broker-heap", default="1g")
    p.add_argument("--phase-timeout", type=float, default=900, help="seconds one replicator may take to copy")
    p.add_argument("--work", type=Path, help="folder for clusters and jobs (default: a temporary one, removed)")
    p.add_argument("--out", type=Path, help="results JSON (default benchmarks/results/replication[-soak].json)")
    p.add_argument("--rerender", type=Path, help="only recompute ratios, table and chart of this results JSON")
    p.add_argument("--plan-scale", type=Path, default=Path("benchmarks/results/plan_scale.json"),
                   help="plan_scale.py results to fold into the report when present")  # fmt: skip
    args = p.parse_args(argv)
    if args.repeat is not None:
        if args.repeat < 1:
            p.error("--repeat: at least 1 pair")
        try:
            eos_pairs(args)
        except ValueError as exc:
            p.error(str(exc))
    if args.suite in PRECREATE_SUITES:
        args.precreate_remotes = True
    if args.out is None:
        name = "replication-soak.json" if args.soak_minutes else "replication.json"
        args.out = Path("benchmarks/results") / name
    return args


def eos_pairs(args: argparse.Namespace) -> bool:
    """Whether --repeat pairs MM2 exactly-once with kmirror exactly-once: --mm2-eos and exactly one --variant, whose
    delivery is exactly-once (the pairs then run that variant, not the main kmirror settings). Without --mm2-eos
    the pairs run the main settings only. ValueError for any other combination."""
    if not args.mm2_eos:
        if args.variant:
            raise ValueError("--repeat runs the main MM2 and kmirror settings (no --variant), or with --mm2-eos "
                             "MM2 exactly-once against one exactly-once --variant")  # fmt: skip
        return False
    variants = parse_variants(args.kmirror_conf, args.kmirror_producer, args.variant, args.kmirror_flow)
    if len(variants) != 2 or not variants[1].transactional:
        raise ValueError("--repeat with --mm2-eos: exactly one --variant, with delivery=exactly_once (e.g. "
                         "--variant 'eos delivery=exactly_once'), to pair with MM2's exactly-once")  # fmt: skip
    return True


def versions() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "kafka_source": KAFKA_SOURCE_VERSION,
        "kafka_target": KAFKA_TARGET_VERSION,
        "mm2": KAFKA_TARGET_VERSION,
    }


def run_case(args: argparse.Namespace, wl: Workload, work: Path, doc: dict[str, Any]) -> None:
    """One run on fresh clusters: load the source, then each phase; the machine's conditions around each. Fills
    `doc` (conditions, results, ratios) as it goes: what ran is kept when a later phase fails."""
    phases = set(args.phases.split(","))
    machine = Conditions()
    doc |= {
        "conditions": {
            "record_size_bytes": wl.record_size,
            "headers_per_record": wl.headers,
            "partitions": wl.partitions,
            "topics": wl.topics,
            "records": wl.records,
            "latency_rate": args.latency_rate,
            "latency_seconds": args.latency_seconds,
            "latency_isolation": args.latency_isolation,
            **versions(),
            "loadavg_start": os.getloadavg(),
            "steal_s_at_start": steal_seconds(),
            "broker_heap": args.broker_heap,
        },
        "results": {},
    }
    t0 = time.monotonic()
    results = doc["results"]
    try:
        with clusters(work, args.broker_heap) as (source, target):
            print(f"[{wl.name}] clusters up ({time.monotonic() - t0:.0f}s): {source.bootstrap}, {target.bootstrap}")
            variants = parse_variants(args.kmirror_conf, args.kmirror_producer, args.variant, args.kmirror_flow)
            if args.repeat is not None:
                eos = eos_pairs(args)
                run_pairs(args, wl, work, source, target, variants[1 if eos else 0], phases, machine, doc, eos=eos)
                return
            mm2_runs = [MM2_DEFAULT, *([MM2_EOS] if args.mm2_eos else [])]
            lat_topics = [*(r.latency_topic for r in mm2_runs), *(v.latency_topic for v in variants)]
            create_topics(source, [*wl.data_topics, *lat_topics], wl.partitions)
            with machine.phase("fill"):
                results["source_fill"] = fill_source(source, wl)
            print(f"[{wl.name}] source loaded: {wl.records:,} records in {results['source_fill']['seconds']}s")
            warm = warmup_workload(wl, args.warmup_records)
            if warm is not None and phases & {"mm2", "kmirror"}:
                replicators = {name: name in phases for name in ("mm2", "kmirror")}
                results["broker_warmup"] = warm_brokers(
                    args, warm, work, source, target, replicators, variants[0], machine
                )
                print(f"[{wl.name}] brokers warmed: {json.dumps(results['broker_warmup'])}")
            if "ceiling" in phases:
                try:  # the replicators' figures stand without it
                    with machine.phase("ceiling"):
                        results["ceiling"] = run_ceiling(source, target, wl)
                    print(f"[{wl.name}] ceiling: {json.dumps(results['ceiling'])}")
                except Exception as exc:
                    print(f"[{wl.name}] ceiling: failed: {exc}")
                    results["ceiling_failed"] = str(exc)[:2000]
            if "mm2" in phases:
                for run in mm2_runs:
                    phase = "mm2" if run is MM2_DEFAULT else f"mm2-{run.name}"
                    try:
                        with machine.phase(phase):
                            result = run_mm2(work, source, target, wl, args, run)
                    except Exception as exc:
                        if run is MM2_DEFAULT:
                            raise
                        print(f"[{wl.name}] mm2 {run.name}: failed: {exc}")
                        results.setdefault("mm2_failed_variants", {})[run.name] = str(exc)[:2000]
                        continue
                    if run is MM2_DEFAULT:
                        results["mm2"] = result
                    else:
                        results.setdefault("mm2_variants", {})[run.name] = result
                    print(f"[{wl.name}] {phase}: {result['records_per_s']:,} records/s, first record after "
                          f"{result['first_record_after_s']} s")  # fmt: skip
            if "kmirror" in phases:
                for variant in variants:
                    phase = "kmirror" if variant.index == 0 else f"kmirror-{variant.name}"
                    try:
                        with machine.phase(phase):
                            result = run_kmirror(work, source, target, wl, args, variant)
                    except Exception as exc:  # a bad variant setting must not lose the rest of the run
                        if variant.index == 0:
                            raise
                        print(f"[{wl.name}] kmirror {variant.name}: failed: {exc}")
                        results.setdefault("kmirror_failed_variants", {})[variant.name] = str(exc)[:2000]
                        continue
                    if variant.index == 0:
                        results["kmirror"] = result
                    else:
                        results.setdefault("kmirror_variants", {})[variant.name] = result
                    print(f"[{wl.name}] {phase}: {result['records_per_s']:,} records/s, first record after "
                          f"{result['first_record_after_s']} s")  # fmt: skip
    finally:
        c = doc["conditions"]
        c["loadavg_end"] = os.getloadavg()
        c["steal_s"] = round(steal_seconds() - c.pop("steal_s_at_start"), 1)
        c["total_seconds"] = round(time.monotonic() - t0)
        c["machine"] = machine.summary()
        doc |= case_ratios(results)


def pair_runs(i: int, variant: Variant, *, eos: bool = False) -> tuple[MM2Run, Variant]:
    """Pair i's MM2 run and kmirror variant: each with aliases, remote topics, latency topic and folder of its
    own (`mm2src<i>`, `kmsrc<100+i>`), `variant`'s settings otherwise; with `eos` MM2 runs exactly-once."""
    mm2 = MM2Run(f"pair{i}", (f"{MM2_ALIASES[0]}{i}", f"{MM2_ALIASES[1]}{i}"), eos=eos)
    return mm2, dataclasses.replace(variant, name=f"pair{i}", index=PAIR_INDEX + i)


def run_pairs(
    args: argparse.Namespace,
    wl: Workload,
    work: Path,
    source: Cluster,
    target: Cluster,
    variant: Variant,
    phases: set[str],
    machine: Conditions,
    doc: dict[str, Any],
    *,
    eos: bool = False,
) -> None:
    """--repeat N on started clusters: the warm-up, the source set sized for the copy window from the warm-up's
    rates, the ceiling once, then N interleaved pairs (MM2 then kmirror), each run's remote topics deleted once it
    is measured. A run that fails is recorded in its pair (`errors`) and the pairs go on; one that stalls is kept
    with `stalled` (see repeat.StallWatch). With `eos` every pair (and the warm-up) is MM2 exactly-once against
    kmirror `variant` (exactly-once); the report then says `pairs_exactly_once`."""
    results = doc["results"]
    if eos:
        results["pairs_exactly_once"] = True
    names = [n for n in REPLICATORS if n in phases]
    runs = {i: pair_runs(i, variant, eos=eos) for i in range(1, args.repeat + 1)}
    latency_topics = [t for mm2, km in runs.values() for t in (mm2.latency_topic, km.latency_topic)]
    create_topics(source, [*wl.data_topics, *latency_topics], wl.partitions)
    warm = warmup_workload(wl, args.warmup_records)
    rates: list[float | None] = []
    if warm is not None and names:
        replicators = {n: n in names for n in REPLICATORS}
        results["broker_warmup"] = warm_brokers(
            args, warm, work, source, target, replicators, variant, machine, mm2_eos=eos
        )
        print(f"[{wl.name}] brokers warmed: {json.dumps(results['broker_warmup'])}")
        # the faster of each warm-up's copy-window and steady rates (a small set's window is mostly ramp-up)
        rates = [max((w := results["broker_warmup"].get(n, {})).get("records_per_s") or 0,
                     w.get("records_per_s_steady") or 0) or None for n in names]  # fmt: skip
    asked = wl.records
    wl = dataclasses.replace(wl, records=records_for_window(args.window_seconds, rates, asked, multiple=wl.topics))
    doc["conditions"] |= {
        "records": wl.records,
        "records_asked": asked,
        "repeat": args.repeat,
        "window_seconds": args.window_seconds,
        "window_sized_from_warmup_records_per_s": rates,
        "stall_seconds": args.stall_seconds,
        "flows": wl.flows,
        "remote_topics_precreated": bool(args.precreate_remotes),
        "pairs": "mm2 exactly-once vs kmirror " + variant.name if eos else "mm2 vs kmirror",
    }
    print(f"[{wl.name}] source set: {wl.records:,} records (asked {asked:,}; warm-up rates {rates})")
    with machine.phase("fill"):
        results["source_fill"] = fill_source(source, wl)
    print(f"[{wl.name}] source loaded: {wl.records:,} records in {results['source_fill']['seconds']}s")
    if "ceiling" in phases:
        try:
            with machine.phase("ceiling"):
                results["ceiling"] = run_ceiling(source, target, wl)
            print(f"[{wl.name}] ceiling: {json.dumps(results['ceiling'])}")
        except Exception as exc:
            print(f"[{wl.name}] ceiling: failed: {exc}")
            results["ceiling_failed"] = str(exc)[:2000]
    pairs: list[dict[str, Any]] = [{"window_seconds": args.window_seconds} for _ in range(args.repeat)]
    results["pairs"] = pairs
    for i, name in pair_order(args.repeat, names):
        mm2, km = runs[i]
        alias = mm2.aliases[0] if name == "mm2" else km.aliases[0]
        try:
            with machine.phase(f"{name}-{i}"):
                if name == "mm2":
                    result = run_mm2(work, source, target, wl, args, mm2)
                else:
                    result = run_kmirror(work, source, target, wl, args, km)
        except Exception as exc:  # one failing run must not lose the other pairs
            print(f"[{wl.name}] pair {i} {name}: failed: {exc}")
            pairs[i - 1].setdefault("errors", {})[name] = str(exc)[:2000]
            continue
        finally:
            latency = mm2.latency_topic if name == "mm2" else km.latency_topic
            with contextlib.suppress(Exception):  # disk only: a topic left behind does not change a figure
                delete_topics(target, [*remote_topics(alias, wl), f"{source_aliases(alias, wl.flows)[0]}.{latency}"])
        result["pair"] = i
        result["window_short"] = "stalled" not in result and result["copy_s"] < args.window_seconds
        pairs[i - 1][name] = result
        print(f"[{wl.name}] pair {i} {name}: {result['records_per_s']:,} records/s over {result['copy_s']} s, "
              f"first record after {result['first_record_after_s']} s"
              + (" STALLED" if "stalled" in result else ""))  # fmt: skip


def workloads(args: argparse.Namespace) -> list[Workload]:
    if args.suite:
        return [Workload(name, size, partitions, topics, (args.records // topics) * topics, headers=args.headers,
                         flows=CASE_FLOWS.get(name, 1))
                for name, size, topics, partitions in SUITES[args.suite]]  # fmt: skip
    records = (args.records // args.topics) * args.topics
    return [Workload("run", args.record_size, args.partitions, args.topics, records, headers=args.headers,
                     flows=args.flows)]  # fmt: skip


def write(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    if args.plan_scale.is_file() and "soak" not in doc:
        doc["plan_scale"] = json.loads(args.plan_scale.read_text())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")


def render(doc: dict[str, Any], out: Path) -> list[Path]:
    """Charts beside `out` (one per suite case, `<stem>-<case>.png`) and the printed table."""
    if "soak" in doc:
        soak_chart(doc, out.with_suffix(".png"))
        print(soak_table(doc))
        return [out.with_suffix(".png")]
    if "cases" in doc:
        paths = []
        for name, case in doc["cases"].items():
            if case.get("results"):
                path = out.with_name(f"{out.stem}-{name}.png")
                chart(case, path)
                paths.append(path)
        print(suite_table(doc))
        return paths
    chart(doc, out.with_suffix(".png"))
    print(table(doc))
    return [out.with_suffix(".png")]


def rerender(args: argparse.Namespace) -> int:
    doc: dict[str, Any] = json.loads(args.rerender.read_text())
    cases = list(doc["cases"].values()) if "cases" in doc else [] if "soak" in doc else [doc]
    for case in cases:
        for _, run in runs_of(case.get("results", {})):
            if "curve" in run:  # reports written before the steady-state rate was added
                run.setdefault("records_per_s_steady", steady_rate(run["curve"], run["records"]))
        case |= case_ratios(case.get("results", {}))
    if args.plan_scale.is_file() and "soak" not in doc:
        doc["plan_scale"] = json.loads(args.plan_scale.read_text())
    args.rerender.write_text(json.dumps(doc, indent=2) + "\n")
    for path in render(doc, args.rerender):
        print(f"wrote {path}")
    return 0


def run_soak(args: argparse.Namespace, work: Path, doc: dict[str, Any]) -> None:
    machine = Conditions()
    doc |= {
        "benchmark": "replication-soak",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "conditions": {
            "soak_minutes": args.soak_minutes,
            "soak_rate": args.soak_rate,
            "record_size_bytes": args.record_size,
            "partitions": args.partitions,
            "topics": 1,
            "sample_seconds": args.soak_sample_seconds,
            "latency_isolation": args.latency_isolation,
            **versions(),
            "broker_heap": args.broker_heap,
        },
        "soak": {},
    }
    try:
        with clusters(work, args.broker_heap) as (source, target):
            for name in ["kmirror", *(["mm2"] if args.soak_mm2 else [])]:
                print(f"soak {name}: {args.soak_rate:,} records/s for {args.soak_minutes} min")
                with machine.phase(f"soak-{name}"):
                    doc["soak"][name] = soak_one(name, work, source, target, args)
                print(f"soak {name}: memory {doc['soak'][name]['memory_verdict']}")
    finally:
        doc["conditions"]["machine"] = machine.summary()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rerender:
        return rerender(args)
    work = args.work or Path(tempfile.mkdtemp(prefix="kmirror-repl-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    doc: dict[str, Any] = {"benchmark": "replication", "started_at": started_at}
    try:
        if args.soak_minutes:
            run_soak(args, work, doc)
        elif args.suite:
            doc |= {"suite": args.suite, "conditions": versions(), "cases": {}}
            suite_machine = Conditions()
            try:
                for wl in workloads(args):
                    case: dict[str, Any] = {}
                    doc["cases"][wl.name] = case
                    try:
                        run_case(args, wl, work / wl.name, case)
                    except Exception as exc:  # one failing case must not lose the others
                        print(f"[{wl.name}] failed: {exc}")
                        case["error"] = str(exc)[:3000]
            finally:
                doc["conditions"]["machine"] = suite_machine.summary()
        else:
            run_case(args, workloads(args)[0], work, doc)
    finally:
        write(args, doc)
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    for path in render(doc, args.out):
        print(f"wrote {path}")
    return 0
