"""The report: ratios between the replicators and against the ceiling, the printed table, the PNG charts (one
per run or per suite case, one for a soak)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.replication.repeat import (
    EOS_GOALS,
    GOALS,
    REPLICATORS,
    judge,
    median_and_spread,
    pair_ratios,
    stalls_of,
)


def records_described(c: dict[str, Any]) -> str:
    """'1,000,000 records of 1024 B', with their headers when they carry some."""
    headers = c.get("headers_per_record", 0)
    return f"{c['records']:,} records of {c['record_size_bytes']} B" + (f", {headers} headers each" if headers else "")


def ratio(a: float | None, b: float | None) -> float | None:
    if not a or not b:
        return None
    return round(a / b, 2)


def runs_of(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The replicator runs of a result set, in table order: MM2, its variants, kmirror, its variants."""
    if results.get("pairs"):  # --repeat: each pair's MM2 then kmirror, in the order they ran
        return [(f"{name} #{i}", run) for i, pair in enumerate(results["pairs"], start=1)
                for name in REPLICATORS if (run := pair.get(name))]  # fmt: skip
    runs = [("mm2", results["mm2"])] if results.get("mm2") else []
    runs += [(f"mm2 [{k}]", v) for k, v in results.get("mm2_variants", {}).items()]
    runs += [("kmirror", results["kmirror"])] if results.get("kmirror") else []
    runs += [(f"kmirror [{k}]", v) for k, v in results.get("kmirror_variants", {}).items()]
    return runs


def ratios(results: dict[str, Any]) -> dict[str, Any]:
    km, mm, ceil = results.get("kmirror"), results.get("mm2"), results.get("ceiling")
    out: dict[str, Any] = {}
    if km and mm:
        out["throughput_kmirror_over_mm2"] = ratio(km["records_per_s"], mm["records_per_s"])
        out["throughput_steady_kmirror_over_mm2"] = ratio(
            km.get("records_per_s_steady"), mm.get("records_per_s_steady")
        )
        out["cpu_per_record_kmirror_over_mm2_all"] = ratio(km["cpu_s_per_m_records_all"], mm["cpu_s_per_m_records_all"])
        out["cpu_per_record_kmirror_over_mm2_replicator"] = ratio(
            km["cpu_s_per_m_records"]["replicator"], mm["cpu_s_per_m_records"]["replicator"]
        )
        if "latency" in km and "latency" in mm:
            for q in ("p50_ms", "p99_ms"):
                out[f"latency_{q}_kmirror_over_mm2"] = ratio(
                    km["latency"]["target"].get(q), mm["latency"]["target"].get(q)
                )
        first_km, first_mm = km.get("first_record_after_s"), mm.get("first_record_after_s")
        if first_km is not None and first_mm is not None:
            out["first_record_kmirror_minus_mm2_s"] = round(first_km - first_mm, 1)
    if ceil:
        # The ceiling is the faster of the two ways to measure it: on a busy machine the perf tools' JVMs (two
        # at once, JIT warm-up inside their timing) can fall below what a plain librdkafka loop copies.
        best = max(ceil["perf_tools"]["records_per_s"], ceil["copy_loop"]["records_per_s"])
        out["ceiling_records_per_s"] = best
        for name, x in (("kmirror", km), ("mm2", mm)):
            if x:
                out[f"throughput_{name}_over_ceiling"] = ratio(x["records_per_s"], best)
    if km and ceil:
        out["throughput_kmirror_over_ceiling_perf_tools"] = ratio(
            km["records_per_s"], ceil["perf_tools"]["records_per_s"]
        )
        out["throughput_kmirror_over_copy_loop"] = ratio(km["records_per_s"], ceil["copy_loop"]["records_per_s"])
        out["cpu_per_record_kmirror_over_copy_loop"] = ratio(
            km["cpu_s_per_m_records_all"], ceil["copy_loop"]["cpu_s_per_m_records_all"]
        )
    if mm and ceil:
        out["throughput_mm2_over_ceiling_perf_tools"] = ratio(mm["records_per_s"], ceil["perf_tools"]["records_per_s"])
    # Every variant against MM2 (and the exactly-once ones against MM2's exactly-once run, when both ran).
    mm_eos = results.get("mm2_variants", {}).get("eos")
    for name, x in results.get("kmirror_variants", {}).items():
        base = mm_eos if mm_eos and str(x.get("config", {}).get("delivery", "")).startswith("exactly") else mm
        if base:
            out[f"variant_{name}_throughput_over_mm2"] = ratio(x["records_per_s"], base["records_per_s"])
            out[f"variant_{name}_cpu_per_record_over_mm2_all"] = ratio(
                x["cpu_s_per_m_records_all"], base["cpu_s_per_m_records_all"]
            )
    return out


def case_ratios(results: dict[str, Any]) -> dict[str, Any]:
    """The ratios of a run or suite case for its report: one run's `ratios`; with interleaved pairs (`pairs`,
    --repeat) the medians as `ratios`, `ratios_spread` ({name: [min, max]} of the pairs' ratios),
    `ratios_per_pair`, `goals` (judged on the median and on the worst pair) and `stalls` (a stalled pair gives no
    ratios). Exactly-once pairs (`pairs_exactly_once`: MM2 exactly-once against kmirror exactly-once) are judged
    on issue 34's goals (repeat.EOS_GOALS)."""
    pairs = results.get("pairs")
    if not pairs:  # one run of each: a stalled replicator's figures are left out of the ratios, and reported
        stalled = [n for n in REPLICATORS if (results.get(n) or {}).get("stalled")]
        if not stalled:
            return {"ratios": ratios(results)}
        kept = {k: v for k, v in results.items() if k not in stalled}
        return {"ratios": ratios(kept), "stalls": [{"replicator": n, **results[n]["stalled"]} for n in stalled]}
    per_pair = [pair_ratios(pair, results.get("ceiling"), ratios) for pair in pairs]
    medians, spread = median_and_spread(per_pair)
    return {
        "ratios": medians,
        "ratios_spread": spread,
        "ratios_per_pair": per_pair,
        "pairs_measured": sum(1 for r in per_pair if r),
        "goals": judge(medians, spread, EOS_GOALS if results.get("pairs_exactly_once") else GOALS),
        "stalls": stalls_of(pairs),
    }


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(doc: dict[str, Any]) -> str:
    """The figures of one run (or one suite case) as an aligned text table, then its ratios."""
    r = doc["results"]
    rows = [("", "records/s", "steady", "MB/s", "1st rec s", "CPU s/M (all)", "CPU s/M (repl)", "p50 ms", "p99 ms")]
    if "ceiling" in r:
        p, c = r["ceiling"]["perf_tools"], r["ceiling"]["copy_loop"]
        rows.append(("ceiling: perf tools", _fmt(p["records_per_s"]), "-", f"{p['mb_per_s']}", "-",
                     f"{p['cpu_s_per_m_records_all']}", "-", "-", "-"))  # fmt: skip
        loop_cpu = round(c["cpu_s"]["copy_loop"] * 1e6 / doc["conditions"]["records"], 1)
        rows.append(("ceiling: librdkafka copy loop", _fmt(c["records_per_s"]), "-", f"{c['mb_per_s']}", "-",
                     f"{c['cpu_s_per_m_records_all']}", f"{loop_cpu}", "-", "-"))  # fmt: skip
    runs = runs_of(r)
    for name, x in runs:
        lat = x.get("latency", {}).get("target", {})
        rows.append((name, _fmt(x["records_per_s"]), _fmt(x.get("records_per_s_steady")), f"{x['mb_per_s']}",
                     _fmt(x.get("first_record_after_s")), f"{x['cpu_s_per_m_records_all']}",
                     f"{x['cpu_s_per_m_records']['replicator']}", _fmt(lat.get("p50_ms")),
                     _fmt(lat.get("p99_ms"))))  # fmt: skip
    for name, x in runs:
        if "latency" in x:
            src = x["latency"]["source_only"]
            rows.append((f"  (source only, during {name})", "-", "-", "-", "-", "-", "-", _fmt(src.get("p50_ms")),
                         _fmt(src.get("p99_ms"))))  # fmt: skip
    for name, err in r.get("kmirror_failed_variants", {}).items():
        rows.append((f"kmirror [{name}] FAILED", err.splitlines()[0][:60] if err else "", "", "", "", "", "", "", ""))
    for name, err in r.get("mm2_failed_variants", {}).items():
        rows.append((f"mm2 [{name}] FAILED", err.splitlines()[0][:60] if err else "", "", "", "", "", "", "", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    if r.get("pairs"):
        lines.append(f"ratios: the median of {doc.get('pairs_measured', 0)} of {len(r['pairs'])} interleaved pairs "
                     "(min-max of the pairs in brackets)")  # fmt: skip
        spread = doc.get("ratios_spread", {})
        for key, value in doc.get("ratios", {}).items():
            lo_hi = spread.get(key)
            lines.append(f"  {key}: {value}" + (f" [{lo_hi[0]} - {lo_hi[1]}]" if lo_hi else ""))
        for name, g in doc.get("goals", {}).items():
            lines.append(f"  goal {name} {g['goal']}: median {_fmt(g['median'])} (met: {_fmt(g['met_on_median'])}), "
                         f"worst pair {_fmt(g['worst_pair'])} (met: {_fmt(g['met_on_worst_pair'])})")  # fmt: skip
        for stall in doc.get("stalls", []):
            lines.append(f"  STALLED: pair {stall['pair']} {stall['replicator']}: {stall['records_on_target']:,} of "
                         f"{stall['expected']:,} records, no progress for {stall['no_progress_s']} s")  # fmt: skip
        short = [name for name, x in runs if x.get("window_short")]
        if short:
            lines.append(f"  copy window under {r['pairs'][0].get('window_seconds', '?')} s: {', '.join(short)}")
    else:
        lines.append("ratios: " + json.dumps(doc.get("ratios", {})))
        for stall in doc.get("stalls", []):
            lines.append(f"STALLED: {stall['replicator']}: {stall['records_on_target']:,} of {stall['expected']:,} "
                         f"records, no progress for {stall['no_progress_s']} s")  # fmt: skip
    jit = [(name, share) for name, x in runs if (share := x.get("jit_share_replicator_copy_window")) is not None]
    if jit:
        lines.append("JIT compiler threads' share of the replicator's CPU in the copy window: "
                     + ", ".join(f"{name} {share:.0%}" for name, share in jit))  # fmt: skip
    warmup = doc.get("results", {}).get("broker_warmup")
    if warmup:
        warmed = [name for name in ("mm2", "kmirror") if name in warmup]
        lines.append(
            f"brokers warmed first: {', '.join(warmed)} each copied {warmup['records']:,} records of their own"
        )
    machine = doc["conditions"].get("machine")
    if machine:
        lines.append(
            f"machine: {machine['cpus']} CPUs, quiet={machine['quiet']}, whole run: steal "
            f"{machine['whole_run']['steal_s']} s, foreign CPU {machine['whole_run']['foreign_cpu_s']} s, load "
            f"{machine['whole_run']['loadavg_before'][0]} -> {machine['whole_run']['loadavg_after'][0]}"
        )
    return "\n".join(lines)


def suite_table(doc: dict[str, Any]) -> str:
    parts = []
    for name, case in doc["cases"].items():
        c = case["conditions"]
        parts.append(f"== {name}: {c['topics']} topic(s) x {c['partitions']} partitions, {records_described(c)}")
        parts.append(table(case) if case.get("results") else f"(no results: {case.get('error', '?')})")
    m = doc["conditions"].get("machine")
    if m:
        parts.append(f"suite: {m['cpus']} CPUs, quiet={m['quiet']}, steal {m['whole_run']['steal_s']} s, "
                     f"foreign CPU {m['whole_run']['foreign_cpu_s']} s")  # fmt: skip
    return "\n".join(parts)


def chart(doc: dict[str, Any], path: Path) -> None:
    """Throughput, CPU per record, copy curves and latency of one run (or one suite case), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = doc["results"]
    c = doc["conditions"]
    names: list[str] = []
    rates: list[float] = []
    cpus: list[float] = []
    if "ceiling" in r:
        names += ["ceiling\nperf tools", "ceiling\ncopy loop"]
        rates += [r["ceiling"]["perf_tools"]["records_per_s"], r["ceiling"]["copy_loop"]["records_per_s"]]
        cpus += [
            r["ceiling"]["perf_tools"]["cpu_s_per_m_records_all"],
            r["ceiling"]["copy_loop"]["cpu_s_per_m_records_all"],
        ]
    runs = [(n.replace("mm2", "MM2", 1).replace(" [", "\n["), x) for n, x in runs_of(r)]
    for label, x in runs:
        names.append(label)
        rates.append(x["records_per_s"])
        cpus.append(x["cpu_s_per_m_records_all"])

    def color(n: str) -> str:
        if n == "MM2":
            return "#d62728"
        if n.startswith("MM2"):
            return "#ff9896"
        if n == "kmirror":
            return "#1f77b4"
        return "#6baed6" if n.startswith("kmirror") else "#999999"

    colors = [color(n) for n in names]
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    ax = axes[0][0]
    bars = ax.bar(names, rates, color=colors)
    ax.bar_label(bars, labels=[f"{v:,.0f}\n{v * c['record_size_bytes'] / 1e6:.1f} MB/s" for v in rates], fontsize=8)
    ax.set_title("Throughput (records/s, copy window)")
    ax.set_ylim(0, max(rates) * 1.25 if rates else 1)
    ax = axes[0][1]
    bars = ax.bar(names, cpus, color=colors)
    ax.bar_label(bars, labels=[f"{v:.1f}" for v in cpus], fontsize=8)
    ax.set_title("CPU seconds per million records (replicator + both brokers)")
    ax.set_ylim(0, max(cpus) * 1.2 if cpus else 1)
    ax = axes[1][0]
    for label, x in runs:
        first = x.get("first_record_after_s")
        suffix = f" (1st record {first} s)" if first is not None else ""
        ax.plot([p[0] for p in x["curve"]], [p[1] for p in x["curve"]], label=label.replace("\n", " ") + suffix)
    ax.set_title("Records on the target since the replicator started")
    ax.set_xlabel("seconds")
    ax.legend(fontsize=8)
    ax = axes[1][1]
    labels: list[str] = []
    p50: list[float] = []
    p99: list[float] = []
    for label, x in runs:
        lat = x.get("latency")
        if lat and lat["target"].get("records"):
            labels += [label, "(source\nonly)"]
            p50 += [lat["target"]["p50_ms"], lat["source_only"].get("p50_ms", 0)]
            p99 += [lat["target"]["p99_ms"], lat["source_only"].get("p99_ms", 0)]
    if labels:
        xs = list(range(len(labels)))
        b1 = ax.bar([x - 0.2 for x in xs], p50, width=0.4, label="p50")
        b2 = ax.bar([x + 0.2 for x in xs], p99, width=0.4, label="p99")
        ax.bar_label(b1, fmt="%.0f", fontsize=8)
        ax.bar_label(b2, fmt="%.0f", fontsize=8)
        ax.set_xticks(xs, labels, fontsize=8)
        ax.set_yscale("log")
        ax.legend()
    ax.set_title(f"End-to-end latency ms at {c['latency_rate']:,} records/s (consume time - CreateTime)")
    machine = c.get("machine")
    quiet = f", quiet={machine['quiet']}" if machine else ""
    fig.suptitle(
        f"{c['topics']} topic(s) x {c['partitions']} partitions, "
        f"{records_described(c)}; "
        f"{c['cpus']} CPUs, 1-min load avg {c['loadavg_start'][0]:.1f} at start, "
        f"{c.get('loadavg_end', [float('nan')])[0]:.1f} at end (shared machine{quiet})",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- soak -------------------------------------------------------------------------------------------------------


def soak_table(doc: dict[str, Any]) -> str:
    lines = []
    for name, run in doc["soak"].items():
        lines.append(f"== soak {name}: memory {run['memory_verdict']}")
        lines.append("min  sent/s  recv/s  p50 ms  p99 ms  max ms  replicator RSS MiB  GC s (replicator JVMs)")
        for m in run["per_minute"]:
            lines.append(
                f"{m['minute']:>3}  {_fmt(m.get('sent_per_s')):>6}  {_fmt(m['records_per_s']):>6}  "
                f"{_fmt(m.get('p50_ms')):>6}  {_fmt(m.get('p99_ms')):>6}  {_fmt(m.get('max_ms')):>6}  "
                f"{_fmt(m.get('replicator_rss_mib')):>18}  {_fmt(m.get('replicator_gc_s'))}"
            )
        for label, g in run["rss_growth"].items():
            lines.append(
                f"  {label}: {g['verdict']} (MiB/min first half {g.get('slope_first_half_mib_per_min', '-')}, "
                f"last half {g.get('slope_last_half_mib_per_min', '-')}; {g['first_mib']} -> {g['last_mib']} MiB)"
            )
    return "\n".join(lines)


def soak_chart(doc: dict[str, Any], path: Path) -> None:
    """Per minute: records/s, latency p50/p99/max; over time: RSS of every process; per minute: GC seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = doc["conditions"]
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    for name, run in doc["soak"].items():
        minutes = [m["minute"] + 1 for m in run["per_minute"]]
        axes[0][0].plot(minutes, [m["records_per_s"] for m in run["per_minute"]], marker="o", label=f"{name} recv")
        axes[0][0].plot(minutes, [m.get("sent_per_s") or 0 for m in run["per_minute"]], ls=":", label=f"{name} sent")
        for q, ls in (("p50_ms", "-"), ("p99_ms", "--"), ("max_ms", ":")):
            axes[0][1].plot(minutes, [m.get(q) or float("nan") for m in run["per_minute"]], ls=ls, marker=".",
                            label=f"{name} {q[:-3]}")  # fmt: skip
        for label, series in run["rss"].items():
            axes[1][0].plot([p[0] / 60 for p in series], [p[1] for p in series], label=f"{name} {label}")
        for label, per_min in run["gc_s_per_minute"].items():
            axes[1][1].plot(minutes[: len(per_min)], [v if v is not None else float("nan") for v in per_min],
                            marker=".", label=f"{name} {label}")  # fmt: skip
    axes[0][0].set_title("records/s per minute (sent by the producer, received on the target)")
    axes[0][1].set_title("latency per minute, ms (consume time - CreateTime)")
    axes[0][1].set_yscale("log")
    axes[1][0].set_title("RSS MiB of every process")
    axes[1][0].set_xlabel("minutes")
    axes[1][1].set_title("GC seconds per minute (each JVM)")
    for row in axes:
        for ax in row:
            ax.legend(fontsize=6)
    m = c.get("machine", {})
    fig.suptitle(
        f"soak: {c['soak_rate']:,} records/s of {c['record_size_bytes']} B for {c['soak_minutes']} min, "
        f"{c['topics']} topic x {c['partitions']} partitions; {m.get('cpus')} CPUs, quiet={m.get('quiet')}",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
