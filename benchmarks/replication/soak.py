"""The soak: a replicator (kmirror, and MM2 with --soak-mm2) copying a steady rate for many minutes, with per
minute the records/s sent and received, the latency percentiles, the RSS of every process (the replicator's
process tree, both brokers) and the GC of every JVM, and a verdict whether any RSS grows without bound."""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from benchmarks.replication.common import (
    Cluster,
    Workload,
    create_topics,
    stop_group,
    total_end_offsets,
    worker_command,
    worker_env,
)
from benchmarks.replication.measure import (
    MIB,
    LatencyReader,
    MinuteBuckets,
    ProcessSampler,
    growth_verdict,
    overall_verdict,
    per_minute_deltas,
    run_measured,
    tree_cpu,
)
from benchmarks.replication.phases import MM2Run, deploy, mm2_properties, parse_variants, prepare_kmirror, start_mm2

#: How long a replicator may take from its start to copying the probe record (JVMs, Spark session, MM2's herder).
WARMUP_TIMEOUT_S = 300


def _probe(source: Cluster, topic: str) -> None:
    p = Producer({"bootstrap.servers": source.bootstrap, "acks": "all"})
    p.produce(topic, b"probe")
    p.flush(30)


def _wait_copied(target: Cluster, remote: str, n: int, timeout: float) -> float:
    admin = target.admin()
    started = time.monotonic()
    while total_end_offsets(admin, [remote]) < n:
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"the replicator did not copy the probe record to {remote} within {timeout:.0f}s")
        time.sleep(0.2)
    return time.monotonic() - started


def _stop_mm2(proc: subprocess.Popen[bytes], result: dict[str, Any]) -> None:
    stop_group(proc)


def summarise_soak(
    buckets: MinuteBuckets, sampler: ProcessSampler, sent_per_minute: list[int], minutes: int
) -> dict[str, Any]:
    """Per-minute figures and the memory verdict from what the reader and the sampler collected."""
    per_minute = buckets.summary(minutes)
    rss: dict[str, list[tuple[float, float]]] = {}
    growth: dict[str, dict[str, Any]] = {}
    gc_s: dict[str, list[float | None]] = {}
    gc_count: dict[str, list[float | None]] = {}
    replicator_total: dict[float, int] = {}
    replicator_gc: dict[str, list[float | None]] = {}
    longest = max((len(series) for series in sampler.series.values()), default=0)
    old_gen: dict[str, dict[str, Any]] = {}
    for label, series in sampler.series.items():
        points = [(t, float(b)) for t, b, _ in series]
        rss[label] = [(t, round(b / MIB, 1)) for t, b in points]
        # A process that lived through under half of the soak (a helper Spark or the JVM spawned) is `transient`.
        verdict = growth_verdict(points) if len(series) * 2 >= longest else {"verdict": "transient"}
        growth[label] = verdict | {
            "first_mib": round(points[0][1] / MIB, 1),
            "last_mib": round(points[-1][1] / MIB, 1),
            "max_mib": round(max(b for _, b in points) / MIB, 1),
        }
        old_points = [(t, float(g["old_used_mib"]) * MIB) for t, _, g in series if g.get("old_used_mib") is not None]
        if old_points:
            # The old generation's use (what survives collections): a leak shows there before the RSS is at -Xmx.
            old_gen[label] = growth_verdict(old_points)
        gcs = [(t, g) for t, _, g in series if g]
        if gcs:
            gc_s[label] = per_minute_deltas([(t, float(g.get("gc_s", 0.0))) for t, g in gcs], minutes)
            gc_count[label] = per_minute_deltas([(t, float(g.get("gc_count", 0))) for t, g in gcs], minutes)
            if label.startswith("replicator"):
                replicator_gc[label] = gc_s[label]
        if label.startswith("replicator"):
            for t, b, _ in series:
                replicator_total[t] = replicator_total.get(t, 0) + b
    times = sorted(replicator_total)
    for m in per_minute:
        i = m["minute"]
        m["sent_per_s"] = round(sent_per_minute[i] / 60) if i < len(sent_per_minute) else None
        inside = [t for t in times if 60 * i <= t < 60 * (i + 1)]
        m["replicator_rss_mib"] = round(replicator_total[inside[-1]] / MIB, 1) if inside else None
        minute_gc = [x for v in replicator_gc.values() if i < len(v) and (x := v[i]) is not None]
        m["replicator_gc_s"] = round(sum(minute_gc), 3) if minute_gc else None
    return {
        "per_minute": per_minute,
        "rss": rss,
        "rss_growth": growth,
        "memory_verdict": overall_verdict(g["verdict"] for g in growth.values() if g["verdict"] != "transient"),
        "old_gen_growth": old_gen,
        "gc_s_per_minute": gc_s,
        "gc_count_per_minute": gc_count,
        "last_gc": {label: series[-1][2] for label, series in sampler.series.items() if series[-1][2]},
    }


#: Per partition: 128 MB segments, at most 512 MB kept (deleted by time and size as the soak runs).
SOAK_TOPIC_CONFIG = {"segment.bytes": str(128 * 2**20), "retention.bytes": str(512 * 2**20)}


def soak_one(name: str, work: Path, source: Cluster, target: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    """One replicator at `soak_rate` records/s for `soak_minutes`, after it copied a probe record (the same
    warm-up rule for both: started, then one record through, then the measured minutes)."""
    short = "km" if name == "kmirror" else "mm2"
    wl = Workload(f"soak-{name}", args.record_size, args.partitions, 1, 0, prefix=f"bench.soak-{short}")
    topic = wl.data_topics[0]
    # 10,000 x 1 KB records/s is 36 GB an hour per cluster: keep a bounded tail (the config sync copies it to the
    # remote topic), or a soak fills the disk and the brokers stop.
    create_topics(source, [topic], wl.partitions, SOAK_TOPIC_CONFIG)
    _probe(source, topic)
    started = time.monotonic()
    stop: Callable[[dict[str, Any]], None]
    if name == "kmirror":
        variant = parse_variants(args.kmirror_conf, args.kmirror_producer, (), args.kmirror_flow)[0]
        job = prepare_kmirror(work, source, target, args.spark_master, wl, variant)
        remote = job.flow.remote_topic(topic)
        stop = job.stop
        try:
            deploy(job)
        except BaseException:
            job.stop()
            raise
        pid = job.pid
        config: dict[str, Any] = {"spark.master": args.spark_master, "spark.conf": variant.conf,
                                  "producer": variant.producer, "flow": variant.flow}  # fmt: skip
    else:
        run = MM2Run("soak", ("mm2src", "mm2dst"), eos=args.soak_mm2_eos)
        props = mm2_properties(source, target, args, wl, run)
        props["topics"] = wl.pattern
        proc = start_mm2(work / "mm2-soak", props, args.mm2_heap)
        remote = f"{run.aliases[0]}.{topic}"
        pid = proc.pid
        stop = functools.partial(_stop_mm2, proc)
        config = {"tasks.max": args.mm2_tasks, "heap": args.mm2_heap, "exactly_once": args.soak_mm2_eos}
    result: dict[str, Any] = {"config": config}
    try:
        assert pid is not None
        _wait_copied(target, remote, 1, WARMUP_TIMEOUT_S)
        result["probe_copied_after_s"] = round(time.monotonic() - started, 1)
        sampler = ProcessSampler(
            {"replicator": [pid], "source_broker": [source.pid], "target_broker": [target.pid]},
            interval=args.soak_sample_seconds,
        )
        start_ms = time.time() * 1000
        buckets = MinuteBuckets(start_ms)
        reader = LatencyReader(target.bootstrap, remote, args.latency_isolation, on_sample=buckets.add)
        reader.start()
        time.sleep(2)
        buckets.start_ms = start_ms = time.time() * 1000
        cpu_before = {"replicator": tree_cpu([pid]), "source_broker": tree_cpu([source.pid]),
                      "target_broker": tree_cpu([target.pid])}  # fmt: skip
        sampler.start()
        seconds = args.soak_minutes * 60
        out, pace_cpu = run_measured(
            worker_command("_pace", "--source", source.bootstrap, "--topic", topic, "--rate", str(args.soak_rate),
                           "--seconds", str(seconds), "--size", str(args.record_size)),
            env=worker_env(), timeout=seconds + 600,
        )  # fmt: skip
        sent = json.loads(out.strip().splitlines()[-1])
        deadline = time.monotonic() + 60
        while reader.received - buckets.before_start < sent["records"] and time.monotonic() < deadline:
            time.sleep(0.5)
        sampler.stop()
        sampler.sample()
        reader.stop()
        cpu_after = {"replicator": tree_cpu([pid]), "source_broker": tree_cpu([source.pid]),
                     "target_broker": tree_cpu([target.pid])}  # fmt: skip
        received = reader.received - buckets.before_start
        per_m = 1e6 / received if received else float("nan")
        result |= {
            "sent": sent["records"],
            "received_on_target": received,
            "achieved_rate": round(sent["records"] / sent["seconds"]),
            "producer_cpu_s": round(pace_cpu, 1),
            "cpu_s_per_m_records": {k: round((cpu_after[k] - cpu_before[k]) * per_m, 1) for k in cpu_after},
            "isolation_level": args.latency_isolation,
        }
        result |= summarise_soak(buckets, sampler, sent.get("sent_per_minute", []), args.soak_minutes)
        return result
    finally:
        stop(result)
