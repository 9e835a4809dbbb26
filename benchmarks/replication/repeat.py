"""Interleaved pairs (`--repeat N`): MM2, kmirror, MM2, kmirror, ... on the same clusters and the same source set,
every ratio the median of the pairs' ratios with its spread, the goals judged on the median and on the worst pair,
and the stall watch that ends a replicator's copy without failing the case.

One run of each replicator decided the ratio before (issue 37: the same case measured 1.57x MM2's records/s on a
busy machine and 0.72x on a quiet one an hour later, each copy window 7-10 s): JIT, GC and page-cache effects
weigh as much as the replicators' difference. Here each replicator copies for `--window-seconds` (30 s) or more,
N times, alternating, and the report gives the median and the min-max of the N pairs' ratios.

The pure parts (the order, medians and spreads, goal verdicts, the set's size for a window, the stall rule) take
plain data and are unit-tested in tests/unit/test_benchmark_repeat.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

REPLICATORS = ("mm2", "kmirror")

#: The default copy window: every replicator copies for at least this long in each pair.
WINDOW_SECONDS = 30.0
#: The set is sized for the window at this many times the fastest warm-up rate: a warm-up copies a smaller set on
#: colder brokers (its ramp-up weighs more), so the measured copy runs faster than it: 2.3-2.6x on the idle machine
#: of 2026-11-28 (1 KB x 6), where a margin of 2 left five of six windows at 24-29 s.
SIZE_MARGIN = 3.0
#: A replicator whose records on the target have not moved for this long (after its first record) is stalled.
STALL_SECONDS = 60.0


def pair_order(repeat: int, replicators: Sequence[str] = REPLICATORS) -> list[tuple[int, str]]:
    """The runs of `repeat` interleaved pairs, in order: (1, mm2), (1, kmirror), (2, mm2), ... (pairs from 1;
    `replicators` in the order given, MM2 first as the contract says)."""
    if repeat < 1:
        raise ValueError(f"--repeat {repeat}: at least one pair")
    return [(i, name) for i in range(1, repeat + 1) for name in replicators]


def records_for_window(
    window_s: float, rates: Sequence[float | None], floor: int, *, margin: float = SIZE_MARGIN, multiple: int = 1
) -> int:
    """Records the source set needs so that the fastest replicator's copy lasts `window_s` or more: the fastest of
    `rates` (records/s, e.g. the warm-up's; None or 0 left out) x `window_s` x `margin`, never under `floor` (the
    user's --records), rounded up to a `multiple` (the topics: the fill splits the set evenly)."""
    known = [r for r in rates if r]
    wanted = math.ceil(max(known) * window_s * margin) if known else 0
    n = max(floor, wanted)
    return n + (-n % multiple)


# -- medians and spreads ----------------------------------------------------------------------------------------

#: How each ratio's worst pair is chosen: for these keys a higher value is better (throughput), for the others
#: (CPU, latency, the first record's difference) a lower one.
HIGHER_IS_BETTER_PREFIXES = ("throughput_", "variant_")


def higher_is_better(key: str) -> bool:
    return (key.startswith(HIGHER_IS_BETTER_PREFIXES) or key.endswith("_records_per_s")) and "cpu" not in key


def median_and_spread(per_pair: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """The median of each ratio over the pairs that have it (numbers only; None left out) and its [min, max]: the
    `ratios` and `ratios_spread` of the report. A key no pair has a number for is left out of both."""
    keys: list[str] = []
    for r in per_pair:
        keys.extend(k for k in r if k not in keys)
    medians: dict[str, Any] = {}
    spread: dict[str, list[float]] = {}
    for key in keys:
        values = [r[key] for r in per_pair if isinstance(r.get(key), int | float) and not isinstance(r[key], bool)]
        if not values:
            continue
        medians[key] = round(statistics.median(values), 2)
        spread[key] = [round(min(values), 2), round(max(values), 2)]
    return medians, spread


def worst(key: str, spread: Mapping[str, Sequence[float]]) -> float | None:
    """The worst pair's value of a ratio: its min when higher is better, else its max."""
    lo_hi = spread.get(key)
    if lo_hi is None:
        return None
    return lo_hi[0] if higher_is_better(key) else lo_hi[1]


# -- goals ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Goal:
    """One goal of issue 37 ("Must show"): `key` a ratio (or `kmirror_p99_ms`), met when `ok(value)`."""

    name: str
    key: str
    text: str
    ok: Callable[[float], bool] = field(compare=False)


GOALS = (
    Goal("records_per_s", "throughput_kmirror_over_mm2", ">= 1.0x MM2", lambda v: v >= 1.0),
    Goal("cpu_per_record", "cpu_per_record_kmirror_over_mm2_all", "<= 1.0x MM2", lambda v: v <= 1.0),
    Goal("p99_at_latency_rate", "kmirror_p99_ms", "<= 100 ms", lambda v: v <= 100.0),
)
#: Issue 34's goals for exactly-once pairs (`--repeat N --mm2-eos --variant 'eos delivery=exactly_once'`): MM2's
#: exactly-once is the baseline, and the latency goal is relative (p99 no higher than MM2's in the same pair).
EOS_GOALS = (
    Goal("records_per_s", "throughput_kmirror_over_mm2", ">= 1.0x MM2 exactly-once", lambda v: v >= 1.0),
    Goal("cpu_per_record", "cpu_per_record_kmirror_over_mm2_all", "<= 1.0x MM2 exactly-once", lambda v: v <= 1.0),
    Goal("p99_at_latency_rate", "latency_p99_ms_kmirror_over_mm2", "<= 1.0x MM2 exactly-once", lambda v: v <= 1.0),
    Goal("first_record", "first_record_kmirror_minus_mm2_s", "no later than MM2 exactly-once", lambda v: v <= 0.0),
)


def judge(
    medians: Mapping[str, Any], spread: Mapping[str, Sequence[float]], goals: Sequence[Goal] = GOALS
) -> dict[str, Any]:
    """Each goal on the median and on the worst pair: {name: {goal, median, worst_pair, met_on_median,
    met_on_worst_pair}} (None where no pair measured it). The verdict says what the figures say; whether the
    machine was quiet enough to trust them is `conditions.machine.quiet`."""
    out: dict[str, Any] = {}
    for g in goals:
        med = medians.get(g.key)
        bad = worst(g.key, spread)
        out[g.name] = {
            "goal": g.text,
            "ratio": g.key,
            "median": med,
            "worst_pair": bad,
            "met_on_median": None if med is None else g.ok(float(med)),
            "met_on_worst_pair": None if bad is None else g.ok(float(bad)),
        }
    return out


def pair_ratios(
    pair: Mapping[str, Any], ceiling: Mapping[str, Any] | None, ratios_of: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """One pair's ratios (the report's `ratios` of a single run, with the run's one ceiling), plus each
    replicator's own figures (pair_figures; issue 37's p99 goal is on `kmirror_p99_ms`, absolute). A pair in which
    either replicator stalled gives no ratios: its figures are of a copy that did not finish (the stall is reported
    on its own)."""
    if any((pair.get(name) or {}).get("stalled") for name in REPLICATORS):
        return {}
    results: dict[str, Any] = {k: v for k, v in pair.items() if k in REPLICATORS and v}
    if ceiling:
        results["ceiling"] = ceiling
    return ratios_of(results) | pair_figures(pair)


#: A pair's own figures kept beside its ratios (their medians show what each ratio is a ratio of).
FIGURES = (("records_per_s", ("records_per_s",)), ("first_record_s", ("first_record_after_s",)),
           ("p50_ms", ("latency", "target", "p50_ms")), ("p99_ms", ("latency", "target", "p99_ms")))  # fmt: skip


def pair_figures(pair: Mapping[str, Any]) -> dict[str, Any]:
    """Each replicator's records/s, first record (s after its start) and p50 / p99 (ms, at the latency rate) in the
    pair, as `mm2_records_per_s`, `kmirror_p99_ms`, ...; a figure the run has not is left out."""
    out: dict[str, Any] = {}
    for name in REPLICATORS:
        for key, path in FIGURES:
            value: Any = pair.get(name) or {}
            for step in path:
                value = value.get(step) if isinstance(value, Mapping) else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[f"{name}_{key}"] = value
    return out


# -- stalls -----------------------------------------------------------------------------------------------------


@dataclass
class StallWatch:
    """Progress of a copy from polled counts: stalled once the count has not moved for `stall_s` seconds after the
    first record (before it, the phase timeout governs: a start-up is not a stall). `update` returns whether the
    copy is stalled now."""

    stall_s: float = STALL_SECONDS
    last_count: int = -1
    last_change: float | None = None

    def update(self, now: float, count: int) -> bool:
        if count != self.last_count:
            self.last_count, self.last_change = count, now
            return False
        return count > 0 and self.last_change is not None and now - self.last_change >= self.stall_s

    def report(self, now: float, expected: int) -> dict[str, Any]:
        """What the report says of a stalled copy."""
        return {
            "records_on_target": self.last_count,
            "expected": expected,
            "missing": expected - self.last_count,
            "no_progress_s": round(now - (self.last_change or now), 1),
        }


def stalls_of(pairs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every stalled run of the pairs: [{pair, replicator, records_on_target, expected, missing, no_progress_s}]."""
    out = []
    for i, pair in enumerate(pairs, start=1):
        for name in REPLICATORS:
            stalled = (pair.get(name) or {}).get("stalled")
            if stalled:
                out.append({"pair": i, "replicator": name, **stalled})
    return out
