"""Measurement: CPU accounting from /proc, the machine's conditions, the latency reader and its percentiles,
RSS and GC sampling of the processes a run starts, per-minute buckets and the memory-growth verdict.

The pure parts (percentiles, buckets, slopes, verdicts) take plain data and are unit-tested
(tests/unit/test_benchmark_*.py); the rest reads /proc or talks to Kafka.
"""

from __future__ import annotations

import contextlib
import math
import os
import pwd
import re
import statistics
import struct
import subprocess
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from benchmarks.replication.common import partitions_of

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
MIB = 2**20


# -- CPU accounting ---------------------------------------------------------------------------------------------


def _stat(path: str) -> tuple[str, list[str]] | None:
    """A /proc stat file: (the name between the parentheses, the fields after it), None once it is gone. The
    first field is field 3 (state): ppid = fields[1], utime, stime, cutime, cstime = fields[11:15], rss (pages)
    = fields[21]."""
    try:
        stat = Path(path).read_text()
    except OSError:
        return None
    return stat[stat.index("(") + 1 : stat.rindex(")")], stat.rpartition(")")[2].split()


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    name: str
    cpu_s: float  # the process's CPU and that of its children it has waited for
    rss_bytes: int


def proc_table() -> dict[int, Proc]:
    """Every live process: pid -> Proc."""
    table: dict[int, Proc] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or (stat := _stat(f"/proc/{entry.name}/stat")) is None:
            continue
        name, fields = stat
        ticks = sum(int(x) for x in fields[11:15])
        table[int(entry.name)] = Proc(
            int(entry.name), int(fields[1]), name, ticks / CLK_TCK, int(fields[21]) * PAGE_SIZE
        )
    return table


def tree(roots: Sequence[int], table: dict[int, Proc] | None = None) -> list[Proc]:
    """The live processes under `roots` (each once), roots first."""
    table = proc_table() if table is None else table
    children: dict[int, list[int]] = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p.pid)
    seen: set[int] = set()
    out: list[Proc] = []
    stack = [r for r in reversed(roots) if r in table]
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        out.append(table[pid])
        stack.extend(sorted(children.get(pid, ()), reverse=True))
    return out


def tree_cpu(roots: Sequence[int]) -> float:
    """CPU seconds (user + system) of the live processes under `roots` and of the children they reaped."""
    return sum(p.cpu_s for p in tree(roots))


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of a process's live threads, by thread name without its trailing number (e.g.
    `data-plane-kafka-request-handler-`, `C2 CompilerThread`, `G1 Conc#`): which part of a broker works."""
    groups: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir(f"/proc/{pid}/task"):
            if (stat := _stat(f"/proc/{pid}/task/{entry.name}/stat")) is None:
                continue
            name, fields = re.sub(r"\d+$", "", stat[0]), stat[1]
            groups[name] = groups.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / CLK_TCK
    return groups


def run_measured(cmd: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 1800) -> tuple[str, float]:
    """Run a command to its end: (stdout, CPU seconds of it and its children, from wait4's rusage)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else "")),
        threading.Thread(target=lambda: err.append(proc.stderr.read() if proc.stderr else "")),
    ]
    for t in readers:
        t.start()
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{cmd[:6]} did not finish within {timeout:.0f}s")
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:8])} ... exited {proc.returncode}:\n{''.join(err)[-3000:]}")
    return "".join(out), usage.ru_utime + usage.ru_stime


# -- the machine's conditions -----------------------------------------------------------------------------------


def _cpu_line() -> list[int]:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return [int(x) for x in fields[1:]]


def steal_seconds() -> float:
    """CPU time the hypervisor gave other guests while this machine's vCPUs wanted to run (/proc/stat, all CPUs)."""
    fields = _cpu_line()
    return fields[7] / CLK_TCK if len(fields) > 7 else 0.0


def busy_seconds() -> float:
    """CPU seconds every process on the machine used (user, nice, system, irq, softirq over all CPUs)."""
    f = _cpu_line()
    return (f[0] + f[1] + f[2] + f[5] + f[6]) / CLK_TCK


@dataclass(frozen=True)
class MachineMark:
    at: float
    loadavg: tuple[float, float, float]
    steal_s: float
    busy_s: float
    ours_s: float  # CPU of this benchmark's process tree (everything it started: brokers, replicators, tools)

    @staticmethod
    def now() -> MachineMark:
        return MachineMark(time.monotonic(), os.getloadavg(), steal_seconds(), busy_seconds(), tree_cpu([os.getpid()]))


def between(before: MachineMark, after: MachineMark, cpus: int) -> dict[str, Any]:
    """The machine between two marks: load averages, steal, and the CPU that processes not started here used."""
    wall = max(after.at - before.at, 1e-9)
    steal = after.steal_s - before.steal_s
    foreign = max(0.0, (after.busy_s - before.busy_s) - (after.ours_s - before.ours_s))
    return {
        "wall_s": round(wall, 1),
        "loadavg_before": [round(x, 2) for x in before.loadavg],
        "loadavg_after": [round(x, 2) for x in after.loadavg],
        "steal_s": round(steal, 1),
        "steal_share": round(steal / (wall * cpus), 3),
        "foreign_cpu_s": round(foreign, 1),
        "foreign_cpu_share": round(foreign / (wall * cpus), 3),
    }


#: A run counts as quiet when processes not started by it used under this share of the machine's CPU time, the
#: hypervisor stole under STEAL_QUIET, and the 1-min load average at the start was under half the CPU count.
FOREIGN_QUIET = 0.10
STEAL_QUIET = 0.05


def quiet(phases: Iterable[dict[str, Any]], loadavg_start: Sequence[float], cpus: int) -> bool:
    """Whether the machine was quiet over every phase (see FOREIGN_QUIET, STEAL_QUIET)."""
    return loadavg_start[0] < cpus / 2 and all(
        p["foreign_cpu_share"] < FOREIGN_QUIET and p["steal_share"] < STEAL_QUIET for p in phases
    )


class Conditions:
    """Records the machine's conditions around each phase of a run (`with conditions.phase("mm2"): ...`)."""

    def __init__(self) -> None:
        self.cpus = os.cpu_count() or 1
        self.start = MachineMark.now()
        self.phases: dict[str, dict[str, Any]] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        before = MachineMark.now()
        try:
            yield
        finally:
            self.phases[name] = between(before, MachineMark.now(), self.cpus)

    def summary(self) -> dict[str, Any]:
        whole = between(self.start, MachineMark.now(), self.cpus)
        return {
            "cpus": self.cpus,
            "phases": self.phases,
            "whole_run": whole,
            "quiet": quiet([*self.phases.values(), whole], self.start.loadavg, self.cpus),
            "quiet_rule": f"1-min load at start < cpus/2, foreign CPU share < {FOREIGN_QUIET}, steal share "
            f"< {STEAL_QUIET} in every phase",
        }


# -- latency ----------------------------------------------------------------------------------------------------


@dataclass
class LatencyReader:
    """Consumes a topic from its beginning and keeps (CreateTime ms, now - CreateTime ms) of each record (in
    `samples`, or hands each to `on_sample` instead). Reads with `isolation.level` read_committed by default:
    what an exactly-once replicator's readers see (an aborted or open transaction's records are not
    consumable), and the same as read_uncommitted for records written outside transactions."""

    bootstrap: str
    topic: str
    isolation: str = "read_committed"
    on_sample: Callable[[int, float], None] | None = None
    samples: list[tuple[int, float]] = field(default_factory=list)
    received: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"lat-{time.time_ns()}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "fetch.min.bytes": 1,
                "isolation.level": self.isolation,
            }
        )
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        tps: list[TopicPartition] = []
        while not tps and not self._stop.is_set():
            tps = partitions_of(admin, [self.topic])
            time.sleep(0.2)
        c.assign([TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING) for tp in tps])
        sink = self.on_sample
        while not self._stop.is_set():
            # poll, not consume(n, timeout): consume waits for n records or the timeout, which adds latency
            m = c.poll(0.1)
            if m is not None and not m.error():
                created = m.timestamp()[1]
                latency = time.time() * 1000 - created
                self.received += 1
                if sink is None:
                    self.samples.append((created, latency))
                else:
                    sink(created, latency)
        c.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def latency_stats(values: Iterable[float]) -> dict[str, Any]:
    """records, p50/p90/p99/p99.9 (nearest rank, rounded down), max and mean of latencies in ms."""
    lat = sorted(values)
    if not lat:
        return {"records": 0}

    def pct(q: float) -> float:
        return round(lat[min(len(lat) - 1, int(q * len(lat)))], 1)

    return {
        "records": len(lat),
        "p50_ms": pct(0.50),
        "p90_ms": pct(0.90),
        "p99_ms": pct(0.99),
        "p999_ms": pct(0.999),
        "max_ms": round(lat[-1], 1),
        "mean_ms": round(statistics.fmean(lat), 1),
    }


def percentiles(samples: Iterable[tuple[int, float]], since_ms: float) -> dict[str, Any]:
    """`latency_stats` of the samples created at or after `since_ms`."""
    return latency_stats(v for t, v in samples if t >= since_ms)


def max_per_second(samples: Iterable[tuple[int, float]], since_ms: float) -> list[float]:
    """The worst latency of the records created in each second of the run: where the stalls are, and how often."""
    worst: dict[int, float] = {}
    for created, latency in samples:
        if created >= since_ms:
            second = int((created - since_ms) // 1000)
            worst[second] = max(worst.get(second, 0.0), latency)
    return [round(worst.get(i, 0.0)) for i in range(max(worst, default=-1) + 1)]


class MinuteBuckets:
    """Latencies bucketed by the minute of their record's CreateTime since `start_ms` (float32 arrays: a 30-minute
    soak at 10,000 records/s keeps 18M values in about 72 MB, not 18M Python tuples)."""

    def __init__(self, start_ms: float, width_s: float = 60.0) -> None:
        self.start_ms = start_ms
        self.width_ms = width_s * 1000
        self.buckets: dict[int, array[float]] = {}
        self.before_start = 0

    def add(self, created_ms: float, latency_ms: float) -> None:
        if created_ms < self.start_ms:
            self.before_start += 1
            return
        index = int((created_ms - self.start_ms) // self.width_ms)
        bucket = self.buckets.get(index)
        if bucket is None:
            bucket = self.buckets[index] = array("f")
        bucket.append(latency_ms)

    def summary(self, minutes: int | None = None) -> list[dict[str, Any]]:
        """Per bucket (0 .. minutes-1, or up to the last one seen): records, records/s, latency stats."""
        n = minutes if minutes is not None else max(self.buckets, default=-1) + 1
        width_s = self.width_ms / 1000
        out = []
        for i in range(n):
            values = self.buckets.get(i, array("f"))
            stats = latency_stats(values)
            out.append({"minute": i, "records_per_s": round(len(values) / width_s), **stats})
        return out


# -- memory and GC ----------------------------------------------------------------------------------------------


def _cmd_hint(pid: int) -> str:
    """A short name for a process: its executable and, for a JVM, its main class or jar (the last dotted word)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return ""
    exe = Path(argv[0]).name if argv and argv[0] else ""
    if exe == "java":
        mains = [a for a in argv[1:] if re.fullmatch(r"[a-zA-Z_][\w$]*(\.[\w$]+)+", a) and not a.startswith("-")]
        if mains:
            return f"java {mains[0].rsplit('.', 1)[-1]}"
    if exe.startswith("python") and len(argv) > 1:
        script = next((a for a in argv[1:] if not a.startswith("-")), "")
        return f"{exe} {Path(script).name}" if script else exe
    return exe


def perfdata(pid: int) -> dict[str, int | str] | None:
    """The JVM's own counters (what jstat reads): the hsperfdata file /tmp/hsperfdata_<user>/<pid>, parsed.
    None when the JVM has none (another user, -XX:-UsePerfData, another /tmp)."""
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
        data = Path(f"/tmp/hsperfdata_{user}/{pid}").read_bytes()
    except (OSError, KeyError):
        return None
    return parse_perfdata(data)


def parse_perfdata(data: bytes) -> dict[str, int | str] | None:
    """hsperfdata: a prologue (magic 0xcafec0c0, byte order, ..., entry offset, entry count), then entries of
    (length, name offset, vector length, type, flags, units, variability, data offset): longs ('J') and strings
    (byte vectors 'B')."""
    if len(data) < 32 or data[:4] != b"\xca\xfe\xc0\xc0":
        return None
    order = "<" if data[4] == 1 else ">"
    entry_offset, entries = struct.unpack_from(f"{order}ii", data, 24)
    out: dict[str, int | str] = {}
    at = entry_offset
    for _ in range(entries):
        if at + 20 > len(data):
            break
        length, name_off, vector, kind, _flags, _units, _var, data_off = struct.unpack_from(
            f"{order}iiibbbbi", data, at
        )
        if length <= 0:
            break
        name = data[at + name_off : data.index(b"\0", at + name_off)].decode(errors="replace")
        if kind == ord("J") and vector == 0:
            out[name] = struct.unpack_from(f"{order}q", data, at + data_off)[0]
        elif kind == ord("B") and vector > 0:
            raw = data[at + data_off : at + data_off + vector]
            out[name] = raw.split(b"\0", 1)[0].decode(errors="replace")
        at += length
    return out


def gc_from_perfdata(counters: dict[str, int | str]) -> dict[str, Any]:
    """GC count and seconds (all collectors; young, full and concurrent apart as jstat's YGC/FGC/CGC), old-gen
    and whole-heap use in MiB, from a JVM's perf counters."""
    freq = counters.get("sun.os.hrt.frequency")
    if not isinstance(freq, int) or freq <= 0:
        return {}
    counts: list[int] = []
    seconds: list[float] = []
    i = 0
    while isinstance(n := counters.get(f"sun.gc.collector.{i}.invocations"), int):
        t = counters.get(f"sun.gc.collector.{i}.time")
        counts.append(n)
        seconds.append(t / freq if isinstance(t, int) else 0.0)
        i += 1
    heap = sum(v for k, v in counters.items() if re.fullmatch(r"sun\.gc\.generation\.\d+\.space\.\d+\.used", k)
               and isinstance(v, int))  # fmt: skip
    old = counters.get("sun.gc.generation.1.space.0.used")
    return {
        "gc_count": sum(counts),
        "gc_s": round(sum(seconds), 3),
        "young_gc": counts[0] if counts else 0,
        "full_gc": counts[1] if len(counts) > 1 else 0,
        "concurrent_gc": counts[2] if len(counts) > 2 else 0,
        "heap_used_mib": round(heap / MIB, 1),
        "old_used_mib": round(old / MIB, 1) if isinstance(old, int) else None,
    }


def jstat_path() -> str:
    """jstat beside the `java` on PATH (or $KMIRROR_JAVA)."""
    from shutil import which

    java = os.environ.get("KMIRROR_JAVA") or which("java") or "java"
    return str(Path(os.path.realpath(java)).parent / "jstat")


def parse_jstat_gcutil(out: str) -> dict[str, Any]:
    """`jstat -gcutil PID` output (a header line, a value line) -> the keys of `gc_from_perfdata` it has."""
    lines = [ln.split() for ln in out.strip().splitlines() if ln.strip()]
    if len(lines) < 2:
        return {}
    row = dict(zip(lines[0], lines[1], strict=False))

    def num(key: str) -> float:
        v = row.get(key, "-")
        return float(v) if v not in ("-", "") else 0.0

    return {
        "gc_count": int(num("YGC") + num("FGC") + num("CGC")),
        "gc_s": round(num("GCT"), 3),
        "young_gc": int(num("YGC")),
        "full_gc": int(num("FGC")),
        "concurrent_gc": int(num("CGC")),
        "old_used_pct": num("O"),
    }


def gc_stats(pid: int, *, jstat: bool = True) -> dict[str, Any]:
    """A JVM's GC figures: from its perf counters (free), else (`jstat`) from `jstat -gcutil` (a JVM start, about
    0.3 CPU s: the sampler asks for it at most once a minute per JVM)."""
    counters = perfdata(pid)
    if counters:
        return gc_from_perfdata(counters)
    if not jstat:
        return {}
    try:
        out = subprocess.run([jstat_path(), "-gcutil", str(pid)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_jstat_gcutil(out.stdout) if out.returncode == 0 else {}


@dataclass
class ProcessSampler:
    """Every `interval` seconds: RSS of every process of each named group (a replicator's process tree, a broker),
    and the GC counters of the JVMs among them. `series[label]` = [(seconds since start, rss bytes, gc dict)]."""

    groups: dict[str, Sequence[int]]
    interval: float = 10.0
    series: dict[str, list[tuple[float, int, dict[str, Any]]]] = field(default_factory=dict)
    started: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _labels: dict[int, str] = field(default_factory=dict)
    _jstat: dict[int, tuple[float, dict[str, Any]]] = field(default_factory=dict)  # pid -> (when, figures)

    def _gc(self, pid: int) -> dict[str, Any]:
        gc = gc_stats(pid, jstat=False)
        if gc:
            return gc
        when, last = self._jstat.get(pid, (-math.inf, {}))
        if time.monotonic() - when >= 60:
            last = gc_stats(pid)
            self._jstat[pid] = (time.monotonic(), last)
        return last

    def start(self) -> None:
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> None:
        table = proc_table()
        now = round(time.monotonic() - self.started, 1)
        for group, roots in self.groups.items():
            for p in tree(roots, table):
                label = self._labels.get(p.pid)
                if label is None:
                    label = self._labels[p.pid] = f"{group}: {_cmd_hint(p.pid) or p.name} (pid {p.pid})"
                gc = self._gc(p.pid) if p.name == "java" else {}
                self.series.setdefault(label, []).append((now, p.rss_bytes, gc))

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # a process gone between the scan and its read: next sample
                self.sample()
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)


def linear_slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of y over x (0 with fewer than two distinct x)."""
    if len(points) < 2:
        return 0.0
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / sxx


#: RSS counts as flat when it grows by at most this many MiB per minute over the second half of the soak, or by at
#: most GROWTH_REL of its size over that half.
GROWTH_ABS_MIB_PER_MIN = 1.0
GROWTH_REL = 0.02
MIN_POINTS_PER_HALF = 6
#: ... and each half must span this many seconds: a JVM's first minutes always grow (heap sizing, JIT, caches).
MIN_HALF_SECONDS = 300.0


def growth_verdict(
    points: Sequence[tuple[float, float]],
    *,
    abs_mib_per_min: float = GROWTH_ABS_MIB_PER_MIN,
    rel: float = GROWTH_REL,
    min_points: int = MIN_POINTS_PER_HALF,
    min_half_s: float = MIN_HALF_SECONDS,
) -> dict[str, Any]:
    """Does a series of (seconds, bytes) grow without bound? The slope of a linear fit over the first and over the
    second half of the series, in MiB/min, and a verdict:

    - `flat`: the second half grows by at most `abs_mib_per_min`, or by at most `rel` of its mean size over that
      half (a JVM that sized its heap and stays there);
    - `slowing`: still growing, at under half the first half's rate (levelling off; a longer soak tells);
    - `grows`: growing in the second half at least half as fast as in the first: no sign of a bound;
    - `too_short`: fewer than `min_points` samples per half, or a half shorter than `min_half_s` seconds.
    """
    half = len(points) // 2
    first, last = list(points[:half]), list(points[half:])
    s1 = linear_slope(first) * 60 / MIB
    s2 = linear_slope(last) * 60 / MIB
    out: dict[str, Any] = {"slope_first_half_mib_per_min": round(s1, 2), "slope_last_half_mib_per_min": round(s2, 2)}
    if half < min_points or last[-1][0] - last[0][0] < min_half_s or first[-1][0] - first[0][0] < min_half_s * 0.9:
        return out | {"verdict": "too_short"}
    span_min = (last[-1][0] - last[0][0]) / 60
    mean_mib = statistics.fmean(y for _, y in last) / MIB
    if s2 <= abs_mib_per_min or s2 * span_min <= rel * mean_mib:
        verdict = "flat"
    elif s2 < 0.5 * s1:
        verdict = "slowing"
    else:
        verdict = "grows"
    return out | {"verdict": verdict}


def overall_verdict(verdicts: Iterable[str]) -> str:
    """`grows` if any series grows, else `slowing` / `too_short` if any is, else `flat` (`transient` series, of
    processes that lived through under half of the soak, do not count)."""
    seen = set(verdicts)
    for v in ("grows", "slowing", "too_short"):
        if v in seen:
            return v
    return "flat"


def per_minute_deltas(points: Sequence[tuple[float, float]], minutes: int) -> list[float | None]:
    """A cumulative counter sampled as (seconds, value): its increase within each minute [60 i, 60 (i+1)), from
    the last sample at or before each boundary (the first sample for a boundary before it; None without samples
    or for a minute that ends after the last sample)."""

    def at(t: float) -> float | None:
        if not points or (t > points[-1][0] + 1e-9 and t - points[-1][0] >= 60):
            return None
        best = points[0][1]
        for x, y in points:
            if x <= t:
                best = y
            else:
                break
        return best

    out: list[float | None] = []
    for i in range(minutes):
        a, b = at(60.0 * i), at(60.0 * (i + 1))
        out.append(None if a is None or b is None else round(b - a, 3))
    return out
