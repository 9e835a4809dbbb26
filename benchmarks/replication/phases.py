"""The phases of a run: the ceiling (perf tools, copy loop), MirrorMaker 2 and the kmirror job, each copying the same
source set, timed from its start to the first and to the last record on the target, then measured for latency.

Both replicators are timed the same way: `started` just before the process is launched (MM2's JVM, the job's
spark-submit), the end offsets of the target polled every 0.2 s from a thread started at the same moment, the copy
window from the first record seen on the target to the last, the CPU of every process this benchmark started that
is neither broker (the replicator's process tree) over that window.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from benchmarks.replication.common import (
    KMIRROR_ALIASES,
    MM2_ALIASES,
    SINK_PRODUCER,
    Cluster,
    Workload,
    await_leaders,
    create_topics,
    java,
    partitions_of,
    stop_group,
    total_end_offsets,
    worker_command,
    worker_env,
)
from benchmarks.replication.load import consumer_perf, parse_consumer_perf, parse_producer_perf, producer_perf
from benchmarks.replication.measure import (
    LatencyReader,
    Proc,
    max_per_second,
    percentiles,
    proc_table,
    run_measured,
    thread_cpu,
    tree,
)
from benchmarks.replication.repeat import StallWatch
from reconciler.devenv.jars import KAFKA_TARGET_VERSION, kafka_libs, mm2_libs
from reconciler.jobcontract.spec import EffectiveSpec

# -- copy timing ------------------------------------------------------------------------------------------------


@dataclass
class CopyTiming:
    """Wall-clock marks of one replicator's copy of the set, polled from the target's end offsets.

    `started`: just before the replicator's process was launched; `first_record`: the first poll that saw a record
    on the target (the copy window opens there, `first_count` records already in); `done`: the poll that saw
    every record (with `stable_end`, the last poll at which the end offsets still moved).
    """

    started: float
    first: float = 0.0
    first_record: float = 0.0
    done: float = 0.0
    first_count: int = 0
    curve: list[tuple[float, int]] = field(default_factory=list)
    #: Set when the copy stalled (no progress for the stall watch's time): what the report says of it
    #: (`StallWatch.report`); `done` is then the last poll at which the count moved, `final_count` the count.
    stalled: dict[str, Any] | None = None
    final_count: int | None = None


#: With transactions (exactly-once), a partition's end offset also counts one commit marker per transaction, so
#: "end offsets >= records" comes early: the copy is done when they reach it and stop moving for this long.
STABLE_FOR_S = 3.0


def watch_copy(
    target: Cluster,
    remotes: Sequence[str],
    expected: int,
    timeout: float,
    on_window_start: Callable[[], object],
    *,
    stable_end: bool = False,
    stop: threading.Event | None = None,
    stall_s: float = 0.0,
) -> CopyTiming:
    """Polls the target's end offsets of `remotes` until `expected` records are there. With `stall_s` > 0, a copy
    whose count has not moved for that long after its first record ends as stalled (`timing.stalled`) instead
    of waiting for the timeout: MM2 4.3.1 can retry a batch forever (KAFKA-14359), and the case must still
    report what the other replicator did."""
    admin = target.admin()
    timing = CopyTiming(time.monotonic())
    last_change = (0.0, -1)
    stall = StallWatch(stall_s) if stall_s > 0 else None
    while True:
        if stop is not None and stop.is_set():
            raise RuntimeError("the copy watch was stopped (the replicator failed to start)")
        count = total_end_offsets(admin, remotes)
        now = time.monotonic()
        timing.curve.append((round(now - timing.started, 2), count))
        if count != last_change[1]:
            last_change = (now, count)
        if count and not timing.first_record:
            timing.first_record = timing.first = now
            timing.first_count = count
            on_window_start()
        if count >= expected and (not stable_end or now - last_change[0] >= STABLE_FOR_S):
            timing.done = last_change[0] if stable_end else now
            return timing
        if stall is not None and stall.update(now, count):
            timing.stalled = stall.report(now, expected)
            timing.done, timing.final_count = last_change[0], count
            return timing
        if now - timing.started > timeout:
            raise RuntimeError(f"only {count:,} of {expected:,} records on the target after {timeout:.0f}s")
        time.sleep(0.2)


#: The steady-state rate is measured from when this share of the records is on the target to the last one:
#: after the JVMs' JIT warm-up and the first batch, as a long-running replicator spends its life.
STEADY_FROM = 0.25


def steady_rate(curve: Sequence[Sequence[float]], expected: int) -> int | None:
    """Records/s from the first curve point with >= STEADY_FROM of `expected` copied to the last point."""
    start = next(((t, n) for t, n in curve if n >= STEADY_FROM * expected), None)
    if start is None or curve[-1][0] <= start[0]:
        return None
    return round((curve[-1][1] - start[1]) / (curve[-1][0] - start[0]))


def summarise(
    timing: CopyTiming, expected: int, size: int, cpu: dict[str, float], cpu_at_first: dict[str, float]
) -> dict[str, Any]:
    window = timing.done - timing.first
    on_target = timing.final_count if timing.final_count is not None else expected
    copied = on_target - timing.first_count
    rate = copied / window if window > 0 else float("nan")
    window_cpu = {k: round(cpu[k] - cpu_at_first[k], 2) for k in cpu}
    per_m = 1e6 / copied if copied else float("nan")
    after_first = timing.done - timing.first_record
    return {
        "records": expected,
        "copy_window": "first record on the target -> last record on the target",
        "startup_s": round(timing.first - timing.started, 1),
        "first_record_after_s": round(timing.first_record - timing.started, 1),
        "copy_s": round(window, 1),
        "wall_s": round(timing.done - timing.started, 1),
        "records_per_s": round(rate),
        "mb_per_s": round(rate * size / 1e6, 1),
        "records_per_s_from_first_record": round(on_target / after_first) if after_first > 0 else None,
        "records_per_s_incl_startup": round(on_target / (timing.done - timing.started)),
        "records_per_s_steady": steady_rate(timing.curve, expected) if timing.stalled is None else None,
        "cpu_s_copy_window": window_cpu,
        "cpu_s_per_m_records": {k: round(v * per_m, 1) for k, v in window_cpu.items()},
        "cpu_s_per_m_records_all": round(sum(window_cpu.values()) * per_m, 1),
        "cpu_s_replicator_incl_startup": round(cpu["replicator"], 1),
        "curve": timing.curve,
        **({"stalled": timing.stalled} if timing.stalled is not None else {}),
    }


def replicator_cpu(source: Cluster, target: Cluster) -> float:
    """CPU seconds of the live process trees this benchmark started other than the brokers: during a replicator's
    phase, that replicator (MM2's JVM; spark-submit's JVM and the Python driver it starts). The same rule for both,
    and usable before the replicator's pid is known (kmirror's deploy returns it only once the query runs)."""
    table = proc_table()
    return sum(p.cpu_s for p in tree(_replicator_roots(source, target, table), table))


def _replicator_roots(source: Cluster, target: Cluster, table: dict[int, Proc]) -> list[int]:
    """The processes this benchmark started other than the brokers (see replicator_cpu)."""
    return [p.pid for p in table.values() if p.ppid == os.getpid() and p.pid not in (source.pid, target.pid)]


def cpu_snapshot(source: Cluster, target: Cluster) -> dict[str, float]:
    table = proc_table()
    return {
        "replicator": replicator_cpu(source, target),
        "source_broker": sum(p.cpu_s for p in tree([source.pid], table)),
        "target_broker": sum(p.cpu_s for p in tree([target.pid], table)),
    }


def process_threads(source: Cluster, target: Cluster) -> dict[str, dict[str, float]]:
    """CPU seconds by thread group (see `thread_cpu`) of the replicator (its processes' live threads together)
    and of each broker."""
    table = proc_table()
    replicator: dict[str, float] = {}
    for p in tree(_replicator_roots(source, target, table), table):
        for name, cpu in thread_cpu(p.pid).items():
            replicator[name] = replicator.get(name, 0.0) + cpu
    return {"replicator": replicator, "source_broker": thread_cpu(source.pid), "target_broker": thread_cpu(target.pid)}


def thread_delta(after: dict[str, dict[str, float]], before: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per process, the thread groups that used >= 0.5 CPU s between two `process_threads` snapshots, busiest
    first."""
    out: dict[str, Any] = {}
    for process, groups in after.items():
        used = {k: round(v - before.get(process, {}).get(k, 0.0), 1) for k, v in groups.items()}
        out[process] = dict(sorted(((k, v) for k, v in used.items() if v >= 0.5), key=lambda kv: -kv[1]))
    return out


def compiler_share(after: dict[str, float], before: dict[str, float], cpu_s: float) -> float | None:
    """The share of `cpu_s` that JIT compiler threads (`C1 CompilerThread`, `C2 CompilerThread`) used between two
    snapshots of one process's thread groups."""
    used = sum(v - before.get(k, 0.0) for k, v in after.items() if k.startswith(("C1 Compiler", "C2 Compiler")))
    return round(used / cpu_s, 2) if cpu_s > 0 else None


@dataclass
class Watch:
    """A copy watch running in a thread from just before a replicator is launched, with the CPU and broker-thread
    snapshots taken when the first record lands."""

    source: Cluster
    target: Cluster
    remotes: Sequence[str]
    expected: int
    timeout: float
    stable_end: bool = False
    stall_s: float = 0.0
    at_first: dict[str, float] = field(default_factory=dict)
    threads: dict[str, dict[str, float]] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def _on_first(self) -> None:
        self.at_first.update(cpu_snapshot(self.source, self.target))
        self.threads.update(process_threads(self.source, self.target))

    def run(self) -> CopyTiming:
        return watch_copy(
            self.target, self.remotes, self.expected, self.timeout, self._on_first,
            stable_end=self.stable_end, stop=self.stop, stall_s=self.stall_s,
        )  # fmt: skip

    def result(self, timing: CopyTiming, size: int) -> dict[str, Any]:
        cpu = cpu_snapshot(self.source, self.target)
        out = summarise(timing, self.expected, size, cpu, self.at_first)
        threads = process_threads(self.source, self.target)
        delta = thread_delta(threads, self.threads)
        out["replicator_threads_copy_window"] = delta.pop("replicator")
        out["broker_threads_copy_window"] = delta
        out["jit_share_replicator_copy_window"] = compiler_share(
            threads["replicator"], self.threads.get("replicator", {}), out["cpu_s_copy_window"]["replicator"]
        )
        return out


def count_committed(target: Cluster, topics: Sequence[str], timeout: float = 120) -> int:
    """Records (not offsets: no transaction markers) a read_committed consumer finds in `topics` now."""
    admin = target.admin()
    tps = partitions_of(admin, topics)
    c = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": f"count-{time.time_ns()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING) for tp in tps])
    at_eof: set[tuple[str, int]] = set()
    count = 0
    deadline = time.monotonic() + timeout
    while len(at_eof) < len(tps) and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            err = m.error()
            if err is None:
                count += 1
                at_eof.discard((m.topic(), m.partition()))
            elif err.code() == KafkaError._PARTITION_EOF:
                at_eof.add((m.topic(), m.partition()))
    c.close()
    return count


# -- latency ----------------------------------------------------------------------------------------------------


def measure_latency(
    source: Cluster, target: Cluster, topic: str, remote: str, args: argparse.Namespace, size: int
) -> dict[str, Any]:
    """Steady `latency_rate` records/s into `topic` for `latency_seconds`; latency on the source and target."""
    on_source = LatencyReader(source.bootstrap, topic, args.latency_isolation)
    on_target = LatencyReader(target.bootstrap, remote, args.latency_isolation)
    on_source.start()
    on_target.start()
    time.sleep(2)  # the readers are assigned before the first record is sent
    started_ms = time.time() * 1000
    out, _ = run_measured(
        worker_command("_pace", "--source", source.bootstrap, "--topic", topic, "--rate", str(args.latency_rate),
                       "--seconds", str(args.latency_seconds), "--size", str(size)),
        env=worker_env(),
    )  # fmt: skip
    sent = json.loads(out.strip().splitlines()[-1])
    deadline = time.monotonic() + 60
    while len(on_target.samples) < sent["records"] and time.monotonic() < deadline:
        time.sleep(0.5)
    on_source.stop()
    on_target.stop()
    since = started_ms + args.latency_warmup * 1000
    return {
        "rate": args.latency_rate,
        "seconds": args.latency_seconds,
        "warmup_seconds_excluded": args.latency_warmup,
        "isolation_level": args.latency_isolation,
        "sent": sent["records"],
        "achieved_rate": round(sent["records"] / sent["seconds"]),
        "received_on_target": len(on_target.samples),
        "target": percentiles(on_target.samples, since),
        "source_only": percentiles(on_source.samples, since),
        "target_max_ms_per_second": max_per_second(on_target.samples, since),
    }


# -- MirrorMaker 2 ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MM2Run:
    """One MirrorMaker 2 configuration: its cluster aliases (so its remote topics and internal topics are its own),
    and whether it runs with exactly-once source support (KIP-618 in dedicated mode, Kafka 3.5+)."""

    name: str
    aliases: tuple[str, str]
    eos: bool = False

    @property
    def latency_topic(self) -> str:
        return "bench.lat-mm2" if self.name == "default" else f"bench.lat-mm2{self.name}"


MM2_DEFAULT = MM2Run("default", MM2_ALIASES)
MM2_EOS = MM2Run("eos", ("mm2esrc", "mm2edst"), eos=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mm2_properties(
    source: Cluster, target: Cluster, args: argparse.Namespace, wl: Workload, run: MM2Run = MM2_DEFAULT
) -> dict[str, str]:
    s, t = run.aliases
    sources = source_aliases(s, wl.flows)
    lines = {"clusters": ",".join([*sources, t])}
    for i, a in enumerate(sources):
        lines |= {
            f"{a}.bootstrap.servers": source.bootstrap,
            f"{a}->{t}.enabled": "true",
            f"{t}->{a}.enabled": "false",
            f"{t}->{a}.emit.heartbeats.enabled": "false",
        }
        if wl.flows > 1:  # one flow per topic family, every one in this process; the latency topic in the first
            latency = f",{run.latency_topic.replace('.', '[.]')}" if i == 0 else ""
            lines[f"{a}->{t}.topics"] = wl.family_pattern(i) + latency
            # MM2 emits heartbeats for every pair of its clusters, disabled flows too: without these it runs a
            # herder per pair of source aliases (one cluster under several names) that fails to configure
            for b in sources:
                if b != a:
                    lines |= {f"{a}->{b}.enabled": "false", f"{a}->{b}.emit.heartbeats.enabled": "false"}
    lines |= {
        f"{t}.bootstrap.servers": target.bootstrap,
        "topics": f"{wl.pattern},{run.latency_topic.replace('.', '[.]')}",
        "tasks.max": str(args.mm2_tasks),
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        # As kmirror's job: heartbeats every second, an offset-sync at least every 100 records, no config or
        # ACL sync in the data path, no checkpoints (there are no consumer groups to translate here).
        "emit.heartbeats.interval.seconds": "1",
        "offset.lag.max": "100",
        "emit.checkpoints.enabled": "false",
        "sync.group.offsets.enabled": "false",
        "refresh.groups.enabled": "false",
        "sync.topic.configs.enabled": "false",
        "sync.topic.acls.enabled": "false",
        "refresh.topics.interval.seconds": "5",
        # The producer of the source tasks: the same settings as kmirror's sink (fair comparison).
        **{f"{t}.producer.{k}": v for k, v in SINK_PRODUCER.items()},
        f"{t}.producer.max.in.flight.requests.per.connection": "5",
    }
    if run.eos:
        # Exactly-once in dedicated mode (Kafka docs, "Geo-replication: exactly once"; KIP-618 for Connect's
        # source tasks, KIP-710 for the internal REST server dedicated mode needs for it): the target cluster's
        # workers write each poll's records and their source offsets in one transaction; the source is read
        # read_committed so aborted transactions upstream are not copied.
        lines |= {
            f"{t}.exactly.once.source.support": "enabled",
            "dedicated.mode.enable.internal.rest": "true",
            "listeners": f"http://127.0.0.1:{_free_port()}",
            f"{s}.consumer.isolation.level": "read_committed",
        }
    for item in args.mm2_prop:
        k, _, v = item.partition("=")
        lines[k] = v
    return lines


def source_aliases(alias: str, flows: int) -> list[str]:
    """The source cluster's alias for each flow: `alias` itself for one flow; `<alias>f1`.. for several (one
    alias per flow, the same bootstrap: MM2's way to run several flows of one cluster pair in one process, and
    the same shape for kmirror's flows)."""
    return [alias] if flows == 1 else [f"{alias}f{i}" for i in range(1, flows + 1)]


def remote_topics(alias: str, wl: Workload) -> list[str]:
    """The remote data topics of a run whose source alias is `alias` (`<alias>[fN].<topic>`, flow by flow)."""
    return [f"{a}.{t}" for a, family in zip(source_aliases(alias, wl.flows), wl.families(), strict=True)
            for t in family]  # fmt: skip


def precreate_remotes(target: Cluster, remotes: Sequence[str], partitions: int) -> float:
    """Create a run's remote topics (as many partitions as their sources) and wait for every partition's leader,
    before its replicator starts: the same for both replicators, so neither pays for (or stumbles on, as MM2 does
    on a new remote partition: KAFKA-14359) topic creation inside its measured copy. The seconds it took."""
    started = time.monotonic()
    create_topics(target, list(remotes), partitions)
    await_leaders(target, remotes, partitions)
    return round(time.monotonic() - started, 1)


def maybe_precreate(args: argparse.Namespace, target: Cluster, remotes: Sequence[str], wl: Workload) -> float | None:
    """`precreate_remotes` when the run asks for it (--precreate-remotes, the fleet suite); else None."""
    if not getattr(args, "precreate_remotes", False):
        return None
    return precreate_remotes(target, remotes, wl.partitions)


def start_mm2(folder: Path, properties: dict[str, str], heap: str) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mm2.properties").write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    (folder / "log4j2.properties").write_text(
        "status = warn\nappender.file.type = File\nappender.file.name = FILE\n"
        f"appender.file.fileName = {folder / 'mm2.log'}\nappender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = [%d] %p %m (%c)%n\nrootLogger.level = INFO\n"
        "rootLogger.appenderRef.file.ref = FILE\n"
    )
    kafka = kafka_libs(KAFKA_TARGET_VERSION)
    log_jars = [str(p) for p in sorted(kafka.glob("log4j-*.jar"))]
    classpath = ":".join([f"{mm2_libs(KAFKA_TARGET_VERSION)}/*", *log_jars])
    out = (folder / "mm2.out").open("ab")
    proc = subprocess.Popen(
        [java(), f"-Xmx{heap}", f"-Xms{heap}", "-XX:+UseG1GC",
         f"-Dlog4j2.configurationFile={folder / 'log4j2.properties'}", "-cp", classpath,
         "org.apache.kafka.connect.mirror.MirrorMaker", str(folder / "mm2.properties")],
        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=folder,
    )  # fmt: skip
    out.close()
    return proc


def run_mm2(
    work: Path, source: Cluster, target: Cluster, wl: Workload, args: argparse.Namespace, run: MM2Run = MM2_DEFAULT
) -> dict[str, Any]:
    s, _ = run.aliases
    remotes = remote_topics(s, wl)
    props = mm2_properties(source, target, args, wl, run)
    mm2_libs(KAFKA_TARGET_VERSION)  # fetched once from Maven Central: before the clock starts
    precreated = maybe_precreate(args, target, [*remotes, f"{source_aliases(s, wl.flows)[0]}.{run.latency_topic}"], wl)
    stall_s = getattr(args, "stall_seconds", 0.0)
    watch = Watch(source, target, remotes, wl.records, args.phase_timeout, stable_end=run.eos, stall_s=stall_s)
    folder = work / ("mm2" if run.name == "default" else f"mm2-{run.name}")
    with ThreadPoolExecutor(1) as pool:
        watching = pool.submit(watch.run)
        proc = start_mm2(folder, props, args.mm2_heap)
        try:
            timing = watching.result()
            result = watch.result(timing, wl.record_size)
            result["config"] = {
                "variant": run.name,
                "tasks.max": args.mm2_tasks,
                "heap": args.mm2_heap,
                "exactly_once": run.eos,
                "extra": args.mm2_prop,
                "flows": wl.flows,
            }
            result["loadavg_after_copy"] = os.getloadavg()
            if precreated is not None:
                result["remote_topics_precreated_s"] = precreated
            if "stalled" in result:
                print(f"[{wl.name}] MM2 ({run.name}) stalled: {json.dumps(result['stalled'])}")
                result["stall_log"] = mm2_stall_lines(folder / "mm2.log")
                return result  # no latency run on a stalled copy
            if run.eos:
                result["records_committed_on_target"] = count_committed(target, remotes)
            if args.latency_seconds > 0:
                remote = f"{source_aliases(s, wl.flows)[0]}.{run.latency_topic}"  # the first flow's
                result["latency"] = measure_latency(source, target, run.latency_topic, remote, args, wl.record_size)
            return result
        finally:
            watch.stop.set()
            stop_group(proc)


def mm2_stall_lines(log: Path, limit: int = 5) -> list[str]:
    """The distinct WARN/ERROR lines of MM2's log about retried or failed sends (e.g. its producer retrying
    OUT_OF_ORDER_SEQUENCE_NUMBER on a new remote partition, KAFKA-14359), at most `limit`, numbers stripped so
    that one retry loop shows once."""
    seen: dict[str, str] = {}
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        if (" WARN " in line or " ERROR " in line) and any(
            k in line for k in ("OUT_OF_ORDER_SEQUENCE_NUMBER", "retrying", "Retrying", "failed to send")
        ):
            key = "".join(ch for ch in line.split("] ", 1)[-1] if not ch.isdigit())[:200]
            seen.setdefault(key, line[:500])
            if len(seen) >= limit:
                break
    return list(seen.values())


# -- kmirror ----------------------------------------------------------------------------------------------------


def parse_value(text: str) -> Any:
    """A flow field's value as YAML would read the simple cases: JSON numbers, booleans, null, lists and objects;
    anything else (`exactly_once`, `10s`) as the string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def set_path(doc: dict[str, Any], dotted: str, value: Any) -> None:
    """doc["a"]["b"] = value for `a.b` (creating the mappings on the way)."""
    *parents, leaf = dotted.split(".")
    for key in parents:
        nxt = doc.setdefault(key, {})
        if not isinstance(nxt, dict):
            raise ValueError(f"{dotted}: {key} is not a mapping in the flow")
        doc = nxt
    doc[leaf] = value


@dataclass(frozen=True)
class Variant:
    """One configuration of the kmirror job: its Spark settings, its flow's producer and consumer properties, its
    `spark.master`, and any flow-level field (`flow`: dotted path -> value, e.g. `replication.delivery`)."""

    name: str
    conf: dict[str, str]
    producer: dict[str, str]
    index: int = 0
    master: str | None = None  # spark.master of this variant (real-time mode needs a slot per partition)
    consumer: dict[str, str] = field(default_factory=dict)  # the flow's replication.consumer
    flow: dict[str, Any] = field(default_factory=dict)

    @property
    def aliases(self) -> tuple[str, str]:
        s, t = KMIRROR_ALIASES
        return (s, t) if self.index == 0 else (f"{s}{self.index}", f"{t}{self.index}")

    @property
    def latency_topic(self) -> str:
        return "bench.lat-km" if self.index == 0 else f"bench.lat-km{self.index}"

    @property
    def transactional(self) -> bool:
        """Whether the flow writes in transactions (its end offsets then count commit markers too)."""
        return str(self.flow.get("replication.delivery", "")).startswith("exactly")


def parse_pairs(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{item!r}: expected key=value")
        out[key] = value
    return out


def parse_variants(
    kmirror_conf: Sequence[str] = (),
    kmirror_producer: Sequence[str] = (),
    variants: Sequence[str] = (),
    kmirror_flow: Sequence[str] = (),
) -> list[Variant]:
    """The main run (--kmirror-conf/--kmirror-producer/--kmirror-flow) and each --variant 'NAME key=value ...'.

    A variant's settings are added to the main run's. Keys: `producer.X` -> the flow's `replication.producer`,
    `consumer.X` -> its `replication.consumer`, `master` or `spark.master` -> the variant's `spark.master`,
    `delivery` -> the flow's `replication.delivery` (e.g. `delivery=exactly_once`), `flow.a.b` -> any other flow
    field `a.b` (value read as JSON when it parses: numbers, booleans), anything else -> `spark.conf`.
    """
    conf = parse_pairs(kmirror_conf)  # kmirror's own defaults unless asked (real-time mode, sized by the job)
    producer = parse_pairs(kmirror_producer)
    flow = {k: parse_value(v) for k, v in parse_pairs(kmirror_flow).items()}
    out = [Variant("default", conf, producer, flow=flow)]
    for i, text in enumerate(variants, start=1):
        name, *items = text.split()
        if "=" in name:
            raise ValueError(f"--variant {text!r}: the first word is the variant's name")
        pairs = parse_pairs(items)
        extra_producer = {k.removeprefix("producer."): v for k, v in pairs.items() if k.startswith("producer.")}
        consumer = {k.removeprefix("consumer."): v for k, v in pairs.items() if k.startswith("consumer.")}
        master = pairs.pop("master", None) or pairs.pop("spark.master", None)
        extra_flow = {k.removeprefix("flow."): parse_value(v) for k, v in pairs.items() if k.startswith("flow.")}
        if "delivery" in pairs:
            extra_flow["replication.delivery"] = pairs.pop("delivery")
        extra_conf = {k: v for k, v in pairs.items() if not k.startswith(("producer.", "consumer.", "flow."))}
        out.append(
            Variant(name, {**conf, **extra_conf}, {**producer, **extra_producer}, i, master, consumer,
                    {**flow, **extra_flow})
        )  # fmt: skip
    return out


def flow_names(flows: int) -> list[str]:
    """The flows' names: `bench` for one flow (the reports before the fleet case), `bench1`.. for several."""
    return ["bench"] if flows == 1 else [f"bench{i}" for i in range(1, flows + 1)]


def kmirror_document(
    source: Cluster, target: Cluster, master: str | None, wl: Workload, variant: Variant
) -> dict[str, Any]:
    """The kmirror.yaml of a variant (as a mapping; written as JSON, which YAML reads): one flow per topic family
    of the workload, each from its own alias of the source (the same bootstrap), as MM2's run has them."""
    s, t = variant.aliases
    sources = source_aliases(s, wl.flows)
    flows: list[dict[str, Any]] = []
    for i, (name, alias) in enumerate(zip(flow_names(wl.flows), sources, strict=True)):
        include = [wl.family_pattern(i), *([variant.latency_topic.replace(".", "[.]")] if i == 0 else [])]
        flow: dict[str, Any] = {
            "name": name,
            "source": alias,
            "target": t,
            "topics": {"include": include},
            "replication": {"start_from": "earliest", "producer": variant.producer, "consumer": variant.consumer},
            "offsets": {"offset_lag_max": 100},
            "heartbeats": {"enabled": True, "interval": "1s"},
        }
        for path, value in variant.flow.items():
            set_path(flow, path, value)
        flows.append(flow)
    spark: dict[str, Any] = {"deploy": "local", "checkpoint_root": "checkpoints", "conf": variant.conf}
    if variant.master or master:  # none: the job sizes its master (what a user who writes no settings gets)
        spark["master"] = variant.master or master
    clusters = {a: {"bootstrap_servers": source.bootstrap} for a in sources}
    return {
        "version": 1,
        "clusters": {**clusters, t: {"bootstrap_servers": target.bootstrap}},
        "state": {"cluster": t},
        "spark": spark,
        "flows": flows,
    }


@dataclass
class KmirrorJob:
    """The deployed kmirror flows of a run (`LocalRunner.deploy`, the path `kmirror apply` takes; one job per
    flow) and how to stop them."""

    runner: Any
    flows: list[Any]
    state: Any
    folder: Path

    @property
    def flow(self) -> Any:
        """The first flow (the only one but in the fleet case): its remote topic names, its settings."""
        return self.flows[0]

    @property
    def pid(self) -> int | None:
        job = self.runner.job(self.flow.name)
        return job.pid if job is not None else None

    def stop(self, result: dict[str, Any] | None = None) -> None:
        statuses: dict[str, Any] = {}
        for flow in self.flows:
            self.runner.stop(flow.name)
            folder = self.runner.jobs_dir / flow.name
            if result is not None:
                with contextlib.suppress(OSError, ValueError):
                    status = json.loads((folder / "status.json").read_text())
                    keys = ("batches", "records", "offset_syncs", "restarts")
                    statuses[flow.name] = {k: status.get(k) for k in keys}
                if flow is self.flow:
                    with contextlib.suppress(OSError):
                        # The job logs a batch at INFO when it copies >= 10,000 records or takes >= 10 s.
                        result["batch_log"] = [
                            ln.split("kmirror.job: ", 1)[-1]
                            for ln in (folder / "driver.log").read_text(errors="replace").splitlines()
                            if "kmirror.job: batch " in ln
                        ][-60:]
            job = self.runner.job(flow.name)
            if job is not None and job.pid is not None and job.running:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(job.pid, signal.SIGKILL)
        if result is not None and statuses:
            result["job_status"] = statuses[self.flow.name] if len(self.flows) == 1 else statuses


def prepare_kmirror(
    work: Path, source: Cluster, target: Cluster, master: str | None, wl: Workload, variant: Variant
) -> KmirrorJob:
    from reconciler.artifacts import ensure_driver_archive
    from reconciler.runners import LocalRunner
    from reconciler.spec.loader import load_text

    # What `kmirror dev fetch` records once on a machine (as MM2's jars are fetched): before the clock starts.
    ensure_driver_archive()
    base = work / f"kmirror-{variant.index}-{variant.name}"
    base.mkdir(parents=True, exist_ok=True)
    text = json.dumps(kmirror_document(source, target, master, wl, variant), indent=2) + "\n"
    (base / "kmirror.yaml").write_text(text)
    state = load_text(text).state.with_source_path(base / "kmirror.yaml")
    runner = LocalRunner(base, state.spark, root=base, stop_timeout=60, start_timeout=300)
    return KmirrorJob(runner, [state.flow(name) for name in flow_names(wl.flows)], state, base)


def deploy(job: KmirrorJob) -> None:
    """Deploy every flow of the run, all at once (one thread per flow; each returns once its query runs): MM2
    starts its flows at once in its one process, so kmirror's copy window must not hold one flow's start after
    another's (with 3 flows deployed one after the other on the busy 2-core machine, the window ran 44 s for
    120,000 records, most of it later flows starting)."""
    if len(job.flows) == 1:
        flow = job.flow
        job.runner.deploy(flow.name, EffectiveSpec.of(job.state, flow.name), job.state.flow_digest(flow.name))
        return
    with ThreadPoolExecutor(len(job.flows)) as pool:
        futures = [
            pool.submit(job.runner.deploy, f.name, EffectiveSpec.of(job.state, f.name), job.state.flow_digest(f.name))
            for f in job.flows
        ]
        for future in futures:
            future.result()


def run_kmirror(
    work: Path, source: Cluster, target: Cluster, wl: Workload, args: argparse.Namespace, variant: Variant
) -> dict[str, Any]:
    job = prepare_kmirror(work, source, target, args.spark_master, wl, variant)
    flow = job.flow
    remotes = [f.remote_topic(t) for f, family in zip(job.flows, wl.families(), strict=True) for t in family]
    precreated = maybe_precreate(args, target, [*remotes, flow.remote_topic(variant.latency_topic)], wl)
    stall_s = getattr(args, "stall_seconds", 0.0)
    watch = Watch(
        source, target, remotes, wl.records, args.phase_timeout, stable_end=variant.transactional, stall_s=stall_s
    )
    result: dict[str, Any] = {}
    with ThreadPoolExecutor(1) as pool:
        watching = pool.submit(watch.run)
        try:
            try:
                deploy(job)  # returns once the query runs
            except BaseException:
                watch.stop.set()
                raise
            query_at = time.monotonic()
            timing = watching.result()
            result.update(watch.result(timing, wl.record_size))
            # Also from when deploy returned (the query runs; its first batch plans and warms up then), as the
            # copy window of the reports before 2026-11-23.
            query_s = query_at - timing.started
            result["query_started_after_s"] = round(query_s, 1)
            result["records_per_s_from_query_start"] = (
                round(wl.records / (timing.done - query_at)) if timing.done > query_at else None
            )
            result["config"] = {
                "variant": variant.name,
                "spark.master": variant.master or args.spark_master,
                "spark.conf": dict(job.state.spark.conf),
                "producer": dict(flow.replication.producer),
                "consumer": dict(flow.replication.consumer),
                "flow": variant.flow,
                "delivery": str(getattr(flow.replication, "delivery", "at_least_once")),
                "job_folder": str(job.runner.jobs_dir / flow.name),
                "flows": wl.flows,
            }
            result["loadavg_after_copy"] = os.getloadavg()
            if precreated is not None:
                result["remote_topics_precreated_s"] = precreated
            if "stalled" in result:
                print(f"[{wl.name}] kmirror ({variant.name}) stalled: {json.dumps(result['stalled'])}")
                return result  # no latency run on a stalled copy
            if variant.transactional:
                result["records_committed_on_target"] = count_committed(target, remotes)
            if args.latency_seconds > 0:
                topic = variant.latency_topic
                result["latency"] = measure_latency(
                    source, target, topic, flow.remote_topic(topic), args, wl.record_size
                )
            return result
        finally:
            watch.stop.set()
            job.stop(result)


# -- ceiling ----------------------------------------------------------------------------------------------------


def run_ceiling(source: Cluster, target: Cluster, wl: Workload) -> dict[str, Any]:
    n, size = wl.records, wl.record_size
    create_topics(target, ["ceiling.perf"], wl.partitions * wl.topics)
    brokers_before = cpu_snapshot(source, target)
    started = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        consumed = pool.submit(run_measured, consumer_perf(source.bootstrap, n, wl.pattern))
        produced = pool.submit(run_measured, producer_perf(target.bootstrap, "ceiling.perf", n, size, SINK_PRODUCER))
        c_out, c_cpu = consumed.result()
        p_out, p_cpu = produced.result()
    wall = time.monotonic() - started
    brokers = cpu_snapshot(source, target)
    c = parse_consumer_perf(c_out)
    p_rate = parse_producer_perf(p_out)
    rate = min(c["records_per_s"], p_rate)
    broker_cpu = {k: brokers[k] - brokers_before[k] for k in ("source_broker", "target_broker")}
    cpu_all = c_cpu + p_cpu + sum(broker_cpu.values())
    perf = {
        "consumer_records_per_s": round(c["records_per_s"]),
        "consumer_fetch_records_per_s": round(c["fetch_records_per_s"]),
        "producer_records_per_s": round(p_rate),
        "records_per_s": round(rate),
        "mb_per_s": round(rate * size / 1e6, 1),
        "wall_s_incl_jvm_start": round(wall, 1),
        "cpu_s": {"consumer_perf": round(c_cpu, 1), "producer_perf": round(p_cpu, 1)}
        | {k: round(v, 1) for k, v in broker_cpu.items()},
        "cpu_s_per_m_records_all": round(cpu_all * 1e6 / n, 1),
        "producer_props": SINK_PRODUCER,
    }

    create_topics(target, [f"ceiling.copy.{t}" for t in wl.data_topics], wl.partitions)
    brokers_before = cpu_snapshot(source, target)
    started = time.monotonic()
    out, loop_cpu = run_measured(
        worker_command("_copy", "--source", source.bootstrap, "--target", target.bootstrap,
                       "--topics", ",".join(wl.data_topics), "--records", str(n), "--prefix", "ceiling.copy."),
        env=worker_env(),
    )  # fmt: skip
    wall = time.monotonic() - started
    brokers = cpu_snapshot(source, target)
    loop = json.loads(out.strip().splitlines()[-1])
    copy_count = total_end_offsets(target.admin(), [f"ceiling.copy.{t}" for t in wl.data_topics])
    loop_rate = loop["records"] / loop["seconds"]
    broker_cpu = {k: brokers[k] - brokers_before[k] for k in ("source_broker", "target_broker")}
    copy = {
        "records_per_s": round(loop_rate),
        "mb_per_s": round(loop_rate * size / 1e6, 1),
        "copy_s": round(loop["seconds"], 1),
        "wall_s_incl_start": round(wall, 1),
        "records_on_target": copy_count,
        "cpu_s": {"copy_loop": round(loop_cpu, 1)} | {k: round(v, 1) for k, v in broker_cpu.items()},
        "cpu_s_per_m_records_all": round((loop_cpu + sum(broker_cpu.values())) * 1e6 / n, 1),
    }
    return {"perf_tools": perf, "copy_loop": copy, "loadavg_after": os.getloadavg()}
