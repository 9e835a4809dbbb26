"""The brokers warmed for every replicator before any of them is measured.

A broker's JVM compiles the code paths of the first client that uses them, on the cores the replicators share.
kmirror reads `read_committed` with large fetches, MM2 reads `read_uncommitted` (its consumer's default), and the
ceiling's perf tools warm only MM2's kind of fetch. So the replicator measured first paid for its own broker
paths: the same kmirror configuration copied 53,487 records/s as the first kmirror run after MM2 and 84,446 as the
last (benchmarks/reports/replication-2026-11-26-order-10x24.json).

Before the measured phases, each replicator copies a smaller set of the same shape (`warm.dNN`, a tenth of the
records by default) once, under aliases of its own, and stops. Every measured replicator then meets brokers that
have served its kind of requests, whatever the phases' order. Its own JVM still starts cold in the measured phase:
its first record and its CPU per record include its own warm-up, as a real deployment's do.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from benchmarks.replication.common import Cluster, Workload, create_topics
from benchmarks.replication.load import fill_source
from benchmarks.replication.measure import Conditions
from benchmarks.replication.phases import MM2Run, Variant, run_kmirror, run_mm2

WARMUP_PREFIX = "warm.d"
MM2_WARMUP = MM2Run("warmup", ("mm2wsrc", "mm2wdst"))
#: The warm-up of exactly-once pairs: MM2's transactional writes and read_committed reads warm their broker paths.
MM2_EOS_WARMUP = MM2Run("warmup-eos", ("mm2wesrc", "mm2wedst"), eos=True)
#: The kmirror warm-up's variant index: its aliases (`kmsrc99`), folder and latency topic are its own.
KMIRROR_WARMUP_INDEX = 99


def warmup_workload(wl: Workload, records: int | None) -> Workload | None:
    """The warm-up set for `wl`: `records` (default a tenth of `wl`'s, at least one per partition) of the same
    size in as many topics of as many partitions; None when `records` is 0."""
    if records == 0:
        return None
    count = records if records is not None else wl.records // 10
    count = max(count, wl.topics * wl.partitions)
    count -= count % wl.topics  # split evenly, as the fill does
    return dataclasses.replace(wl, name=f"{wl.name}-warmup", records=count, prefix=WARMUP_PREFIX)


def warm_brokers(
    args: argparse.Namespace,
    warm: Workload,
    work: Path,
    source: Cluster,
    target: Cluster,
    replicators: dict[str, bool],
    kmirror: Variant,
    machine: Conditions,
    *,
    mm2_eos: bool = False,
) -> dict[str, Any]:
    """Each replicator asked for (`replicators`: "mm2"/"kmirror" -> run or not) copies `warm` once (MM2 exactly-once
    when `mm2_eos`); its rate and first record, for the record (cold brokers: not comparable with the measured
    phases)."""
    create_topics(source, warm.data_topics, warm.partitions)
    out: dict[str, Any] = {"records": warm.records, "fill": fill_source(source, warm)}
    quiet_args = argparse.Namespace(**{**vars(args), "latency_seconds": 0})
    folder = work / "warmup"
    with machine.phase("warmup"):
        if replicators.get("mm2"):
            out["mm2"] = _brief(
                run_mm2(folder, source, target, warm, quiet_args, MM2_EOS_WARMUP if mm2_eos else MM2_WARMUP)
            )
        if replicators.get("kmirror"):
            variant = dataclasses.replace(kmirror, name="warmup", index=KMIRROR_WARMUP_INDEX)
            out["kmirror"] = _brief(run_kmirror(folder, source, target, warm, quiet_args, variant))
    return out


def _brief(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("records_per_s", "records_per_s_steady", "first_record_after_s", "stalled", "stall_log")
    return {k: result[k] for k in keys if k in result}
