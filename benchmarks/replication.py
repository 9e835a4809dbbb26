"""Replication throughput, CPU and latency: the Kafka ceiling, Apache MirrorMaker 2 and kmirror, in one run.

On fresh local clusters (Kafka 3.9 source, 4.x target, started here and stopped at the end) it:
  1. loads the source set: T topics `bench.dNN` of P partitions, N records of S bytes (Kafka's ProducerPerformance);
  2. measures the ceiling: ConsumerPerformance reading the set from the source while ProducerPerformance writes
     as many records into the target (both at once, as a replicator does), then a plain confluent-kafka
     consume -> produce copy loop (librdkafka, one Python process);
  3. runs MirrorMaker 2 (dedicated mode, `org.apache.kafka.connect.mirror.MirrorMaker`) over the set and times
     it until the target end offsets hold every record; then, with MM2 still running, measures end-to-end
     latency at a steady rate below saturation;
  4. does the same with the kmirror job (`LocalRunner.deploy`, the path `kmirror apply` takes);
  5. writes JSON (`--out`) and a PNG chart beside it, and prints a table.

    .venv/bin/python benchmarks/replication.py [--record-size 1024] [--partitions 6] [--topics 1]
        [--records 500000] [--latency-rate 10000] [--latency-seconds 60]
        [--kmirror-conf spark.kmirror.maxOffsetsPerTrigger=200000] [--kmirror-producer linger.ms=20]

Figures (see benchmarks/README.md for the method): records/s and MB/s (MB = 10^6 bytes of record value),
CPU seconds per million records of every process involved (the replicator's process tree and both brokers,
from /proc utime+stime, children included), latency p50/p99 = time the record is consumed from the target
minus its source CreateTime (both replicators keep the source timestamp).

Must not: leave a broker, MM2 or a Spark job running (everything started here is stopped in `finally`), or
touch clusters it did not start.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from reconciler.devenv import kafka_local
from reconciler.devenv.jars import KAFKA_SOURCE_VERSION, KAFKA_TARGET_VERSION, kafka_libs, mm2_libs
from reconciler.devenv.kafka_local import BrokerOptions

CLK_TCK = os.sysconf("SC_CLK_TCK")
DATA_PATTERN = "bench[.]d[0-9]+"
#: The producer settings kmirror's sink uses by default; the ceiling and MM2 get the same ones (fairness).
SINK_PRODUCER = {"acks": "all", "enable.idempotence": "true", "linger.ms": "10", "batch.size": "262144"}
MM2_ALIASES = ("mm2src", "mm2dst")
KMIRROR_ALIASES = ("kmsrc", "kmdst")


# -- CPU accounting ---------------------------------------------------------------------------------------------


def _stat(path: str) -> tuple[str, list[str]] | None:
    """A /proc stat file: (the name between the parentheses, the fields after it), None once it is gone. The
    first field is field 3 (state): ppid = fields[1], utime, stime, cutime, cstime = fields[11:15]."""
    try:
        stat = Path(path).read_text()
    except OSError:
        return None
    return stat[stat.index("(") + 1 : stat.rindex(")")], stat.rpartition(")")[2].split()


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (ppid, CPU seconds of the process and of its children it has waited for)."""
    table: dict[int, tuple[int, float]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or (stat := _stat(f"/proc/{entry.name}/stat")) is None:
            continue
        fields = stat[1]
        ticks = sum(int(x) for x in fields[11:15])
        table[int(entry.name)] = (int(fields[1]), ticks / CLK_TCK)
    return table


def tree_cpu(roots: Sequence[int]) -> float:
    """CPU seconds (user + system) of the live processes under `roots` and of the children they reaped."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    seen: set[int] = set()
    stack = [r for r in roots if r in table]
    total = 0.0
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += table[pid][1]
        stack.extend(children.get(pid, ()))
    return total


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


# -- clusters and topics ----------------------------------------------------------------------------------------


@dataclass
class Cluster:
    name: str
    home: Path
    bootstrap: str
    pid: int

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})


def start_clusters(work: Path, heap: str) -> tuple[Cluster, Cluster]:
    def one(name: str, version: str) -> Cluster:
        c = kafka_local.start(name, version, work / name, BrokerOptions(heap=heap))
        assert c.pid is not None
        return Cluster(name, Path(c.home), c.bootstrap_servers, c.pid)

    with ThreadPoolExecutor(2) as pool:
        src = pool.submit(one, "source", KAFKA_SOURCE_VERSION)
        dst = pool.submit(one, "target", KAFKA_TARGET_VERSION)
        return src.result(), dst.result()


def create_topics(cluster: Cluster, names: Sequence[str], partitions: int) -> None:
    admin = cluster.admin()  # kept referenced until the futures resolve (a destroyed handle fails them)
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names], request_timeout=60)
    for f in futures.values():
        f.result(timeout=60)


def partitions_of(admin: AdminClient, topics: Sequence[str]) -> list[TopicPartition]:
    md = admin.list_topics(timeout=10)
    out: list[TopicPartition] = []
    for t in topics:
        meta = md.topics.get(t)
        if meta is not None and meta.error is None:
            out.extend(TopicPartition(t, p) for p in meta.partitions)
    return out


def total_end_offsets(admin: AdminClient, topics: Sequence[str]) -> int:
    """Sum of the high watermarks of `topics` (0 for a topic that does not exist yet)."""
    tps = partitions_of(admin, topics)
    if not tps:
        return 0
    futures = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=10)
    total = 0
    for f in futures.values():
        try:
            total += f.result(timeout=10).offset
        except KafkaException:
            return 0  # a just-created partition without a leader yet: count again next poll
    return total


# -- Kafka's perf tools -----------------------------------------------------------------------------------------


def _java() -> str:
    return os.environ.get("KMIRROR_JAVA", "java")


def producer_perf(bootstrap: str, topic: str, records: int, size: int, props: dict[str, str]) -> list[str]:
    libs = kafka_libs(KAFKA_TARGET_VERSION)
    return [
        _java(), "-Xmx512m", "-cp", f"{libs}/*", "org.apache.kafka.tools.ProducerPerformance",
        "--topic", topic, "--num-records", str(records), "--record-size", str(size), "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}", *(f"{k}={v}" for k, v in props.items()),
    ]  # fmt: skip


def parse_producer_perf(out: str) -> float:
    match = re.search(r"([\d.]+) records/sec", out.strip().splitlines()[-1])
    if match is None:
        raise RuntimeError(f"unexpected ProducerPerformance output: {out[-500:]}")
    return float(match.group(1))


def consumer_perf(bootstrap: str, records: int) -> list[str]:
    libs = kafka_libs(KAFKA_TARGET_VERSION)
    return [
        _java(), "-Xmx512m", "-cp", f"{libs}/*", "org.apache.kafka.tools.ConsumerPerformance",
        "--bootstrap-server", bootstrap, "--include", DATA_PATTERN, "--num-records", str(records),
        "--timeout", "60000", "--group", f"perf-{time.time_ns()}",
    ]  # fmt: skip


def parse_consumer_perf(out: str) -> dict[str, float]:
    lines = [ln for ln in out.strip().splitlines() if ln.strip()]
    header = [h.strip() for h in lines[-2].split(",")]
    values = [v.strip() for v in lines[-1].split(",")]
    row = dict(zip(header, values, strict=False))
    return {"records_per_s": float(row["nMsg.sec"]), "fetch_records_per_s": float(row["fetch.nMsg.sec"])}


# -- workers (run as child processes of this script) ------------------------------------------------------------


def copy_loop_worker(args: argparse.Namespace) -> int:
    """A plain librdkafka consume -> produce loop: partition, key, value, headers and timestamp kept."""
    topics = args.topics.split(",")
    consumer = Consumer(
        {
            "bootstrap.servers": args.source,
            "group.id": f"copy-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "fetch.max.bytes": 52428800,
            "queued.max.messages.kbytes": 262144,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.target,
            **SINK_PRODUCER,
            "batch.size": 1000000,  # librdkafka's default and a good one (its batches are not Java's)
            "queue.buffering.max.messages": 1000000,
            "queue.buffering.max.kbytes": 1048576,
        }
    )
    admin = AdminClient({"bootstrap.servers": args.source})
    consumer.assign([TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING) for tp in partitions_of(admin, topics)])
    copied = 0
    first = 0.0
    while copied < args.records:
        msgs = consumer.consume(10000, 0.5)
        if msgs and not first:
            first = time.monotonic()
        for m in msgs:
            if m.error():
                raise RuntimeError(str(m.error()))
            while True:
                try:
                    producer.produce(
                        f"{args.prefix}{m.topic()}",
                        m.value(),
                        m.key(),
                        partition=m.partition(),
                        timestamp=m.timestamp()[1],
                        headers=m.headers(),
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
        copied += len(msgs)
    remaining = producer.flush(120)
    seconds = time.monotonic() - first
    consumer.close()
    print(json.dumps({"records": copied, "seconds": seconds, "unflushed": remaining}))
    return 0


def pace_worker(args: argparse.Namespace) -> int:
    """Produce at a steady rate (records/s) for some seconds; the record's CreateTime is its send time."""
    producer = Producer({"bootstrap.servers": args.source, "linger.ms": 5, "acks": "all"})
    value = os.urandom(args.size)
    per_tick = max(1, args.rate // 100)
    start = time.monotonic()
    sent = 0
    tick = 0
    while time.monotonic() - start < args.seconds:
        for _ in range(per_tick):
            producer.produce(args.topic, value)
        sent += per_tick
        producer.poll(0)
        tick += 1
        delay = start + tick / 100 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    producer.flush(60)
    print(json.dumps({"records": sent, "seconds": time.monotonic() - start}))
    return 0


# -- latency ----------------------------------------------------------------------------------------------------


@dataclass
class LatencyReader:
    """Consumes a topic from its beginning and keeps (CreateTime ms, now - CreateTime ms) of each record."""

    bootstrap: str
    topic: str
    samples: list[tuple[int, float]] = field(default_factory=list)
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
            }
        )
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        tps: list[TopicPartition] = []
        while not tps and not self._stop.is_set():
            tps = partitions_of(admin, [self.topic])
            time.sleep(0.2)
        c.assign([TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING) for tp in tps])
        while not self._stop.is_set():
            # poll, not consume(n, timeout): consume waits for n records or the timeout, which adds latency
            m = c.poll(0.1)
            if m is not None and not m.error():
                created = m.timestamp()[1]
                self.samples.append((created, time.time() * 1000 - created))
        c.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def percentiles(samples: list[tuple[int, float]], since_ms: float) -> dict[str, Any]:
    lat = sorted(v for t, v in samples if t >= since_ms)
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


def measure_latency(
    source: Cluster, target: Cluster, topic: str, remote: str, args: argparse.Namespace
) -> dict[str, Any]:
    """Steady `latency_rate` records/s into `topic` for `latency_seconds`; latency on the source and target."""
    on_source = LatencyReader(source.bootstrap, topic)
    on_target = LatencyReader(target.bootstrap, remote)
    on_source.start()
    on_target.start()
    time.sleep(2)  # the readers are assigned before the first record is sent
    started_ms = time.time() * 1000
    out, _ = run_measured(
        [sys.executable, __file__, "_pace", "--source", source.bootstrap, "--topic", topic,
         "--rate", str(args.latency_rate), "--seconds", str(args.latency_seconds), "--size", str(args.record_size)],
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
        "sent": sent["records"],
        "achieved_rate": round(sent["records"] / sent["seconds"]),
        "received_on_target": len(on_target.samples),
        "target": percentiles(on_target.samples, since),
        "source_only": percentiles(on_source.samples, since),
        "target_max_ms_per_second": max_per_second(on_target.samples, since),
    }


def max_per_second(samples: list[tuple[int, float]], since_ms: float) -> list[float]:
    """The worst latency of the records created in each second of the run: where the stalls are, and how often."""
    worst: dict[int, float] = {}
    for created, latency in samples:
        if created >= since_ms:
            second = int((created - since_ms) // 1000)
            worst[second] = max(worst.get(second, 0.0), latency)
    return [round(worst.get(i, 0.0)) for i in range(max(worst, default=-1) + 1)]


# -- replicator runs --------------------------------------------------------------------------------------------


@dataclass
class CopyTiming:
    """Wall-clock marks of one replicator's copy of the set, polled from the target's end offsets.

    `first` opens the copy window: the first record seen on the target, or (`window_now`) the moment the
    watch began. `first_record` is always the first record seen.
    """

    started: float
    first: float = 0.0
    first_record: float = 0.0
    done: float = 0.0
    first_count: int = 0
    curve: list[tuple[float, int]] = field(default_factory=list)


def watch_copy(
    target: Cluster,
    remotes: Sequence[str],
    expected: int,
    timeout: float,
    on_window_start: Callable[[], None],
    *,
    window_now: bool = False,
) -> CopyTiming:
    admin = target.admin()
    timing = CopyTiming(time.monotonic())
    if window_now:
        timing.first, timing.first_count = timing.started, total_end_offsets(admin, remotes)
        on_window_start()
    while True:
        count = total_end_offsets(admin, remotes)
        now = time.monotonic()
        timing.curve.append((round(now - timing.started, 2), count))
        if count and not timing.first_record:
            timing.first_record = now
            if not window_now:
                timing.first, timing.first_count = now, count
                on_window_start()
        if count >= expected:
            timing.done = now
            return timing
        if now - timing.started > timeout:
            raise RuntimeError(f"only {count:,} of {expected:,} records on the target after {timeout:.0f}s")
        time.sleep(0.2)


#: The steady-state rate is measured from when this share of the records is on the target to the last one:
#: after the JVMs' JIT warm-up and the first batch, as a long-running replicator spends its life.
STEADY_FROM = 0.25


def steady_rate(curve: Sequence[tuple[float, int]], expected: int) -> int | None:
    """Records/s from the first curve point with >= STEADY_FROM of `expected` copied to the last point."""
    start = next(((t, n) for t, n in curve if n >= STEADY_FROM * expected), None)
    if start is None or curve[-1][0] <= start[0]:
        return None
    return round((curve[-1][1] - start[1]) / (curve[-1][0] - start[0]))


def summarise(
    timing: CopyTiming, expected: int, size: int, cpu: dict[str, float], cpu_at_first: dict[str, float]
) -> dict[str, Any]:
    steady = timing.done - timing.first
    copied = expected - timing.first_count
    rate = copied / steady if steady > 0 else float("nan")
    window_cpu = {k: round(cpu[k] - cpu_at_first[k], 2) for k in cpu}
    per_m = 1e6 / copied if copied else float("nan")
    after_first = timing.done - timing.first_record
    return {
        "records": expected,
        "startup_s": round(timing.first - timing.started, 1),
        "first_record_after_s": round(timing.first_record - timing.started, 1),
        "copy_s": round(steady, 1),
        "wall_s": round(timing.done - timing.started, 1),
        "records_per_s": round(rate),
        "mb_per_s": round(rate * size / 1e6, 1),
        "records_per_s_from_first_record": round(expected / after_first) if after_first > 0 else None,
        "records_per_s_incl_startup": round(expected / (timing.done - timing.started)),
        "records_per_s_steady": steady_rate(timing.curve, expected),
        "cpu_s_copy_window": window_cpu,
        "cpu_s_per_m_records": {k: round(v * per_m, 1) for k, v in window_cpu.items()},
        "cpu_s_per_m_records_all": round(sum(window_cpu.values()) * per_m, 1),
        "cpu_s_replicator_incl_startup": round(cpu["replicator"], 1),
        "curve": timing.curve,
    }


def steal_seconds() -> float:
    """CPU time the hypervisor gave other guests while this machine's vCPUs wanted to run (/proc/stat, all CPUs)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return int(fields[8]) / CLK_TCK if len(fields) > 8 else 0.0


def cpu_snapshot(replicator_pids: Sequence[int], source: Cluster, target: Cluster) -> dict[str, float]:
    return {
        "replicator": tree_cpu(replicator_pids),
        "source_broker": tree_cpu([source.pid]),
        "target_broker": tree_cpu([target.pid]),
    }


def broker_threads(source: Cluster, target: Cluster) -> dict[str, dict[str, float]]:
    return {"source_broker": thread_cpu(source.pid), "target_broker": thread_cpu(target.pid)}


def thread_delta(after: dict[str, dict[str, float]], before: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per broker, the thread groups that used >= 0.5 CPU s between two `broker_threads` snapshots, busiest first."""
    out: dict[str, Any] = {}
    for broker, groups in after.items():
        used = {k: round(v - before.get(broker, {}).get(k, 0.0), 1) for k, v in groups.items()}
        out[broker] = dict(sorted(((k, v) for k, v in used.items() if v >= 0.5), key=lambda kv: -kv[1]))
    return out


def mm2_properties(source: Cluster, target: Cluster, args: argparse.Namespace) -> str:
    s, t = MM2_ALIASES
    lines = {
        "clusters": f"{s},{t}",
        f"{s}.bootstrap.servers": source.bootstrap,
        f"{t}.bootstrap.servers": target.bootstrap,
        f"{s}->{t}.enabled": "true",
        f"{t}->{s}.enabled": "false",
        f"{t}->{s}.emit.heartbeats.enabled": "false",
        "topics": f"{DATA_PATTERN},bench[.]lat-mm2",
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
    for item in args.mm2_prop:
        k, _, v = item.partition("=")
        lines[k] = v
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def start_mm2(work: Path, source: Cluster, target: Cluster, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    folder = work / "mm2"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mm2.properties").write_text(mm2_properties(source, target, args))
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
        [_java(), f"-Xmx{args.mm2_heap}", f"-Xms{args.mm2_heap}", "-XX:+UseG1GC",
         f"-Dlog4j2.configurationFile={folder / 'log4j2.properties'}", "-cp", classpath,
         "org.apache.kafka.connect.mirror.MirrorMaker", str(folder / "mm2.properties")],
        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=folder,
    )  # fmt: skip
    out.close()
    return proc


def stop_group(proc: subprocess.Popen[bytes], grace: float = 30) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(15)


def run_mm2(
    work: Path, source: Cluster, target: Cluster, data_topics: Sequence[str], args: argparse.Namespace
) -> dict[str, Any]:
    s, _ = MM2_ALIASES
    remotes = [f"{s}.{t}" for t in data_topics]
    proc = start_mm2(work, source, target, args)
    try:
        at_first: dict[str, float] = {}
        threads: dict[str, dict[str, float]] = {}
        timing = watch_copy(
            target,
            remotes,
            args.records,
            args.phase_timeout,
            lambda: (
                at_first.update(cpu_snapshot([proc.pid], source, target)),
                threads.update(broker_threads(source, target)),
            ),
        )
        cpu = cpu_snapshot([proc.pid], source, target)
        result = summarise(timing, args.records, args.record_size, cpu, at_first)
        result["broker_threads_copy_window"] = thread_delta(broker_threads(source, target), threads)
        result["config"] = {"tasks.max": args.mm2_tasks, "heap": args.mm2_heap, "extra": args.mm2_prop}
        result["loadavg_after_copy"] = os.getloadavg()
        if args.latency_seconds > 0:
            result["latency"] = measure_latency(source, target, "bench.lat-mm2", f"{s}.bench.lat-mm2", args)
        return result
    finally:
        stop_group(proc)


@dataclass(frozen=True)
class Variant:
    """One configuration of the kmirror job: its Spark settings and its flow's producer and consumer properties."""

    name: str
    conf: dict[str, str]
    producer: dict[str, str]
    index: int = 0
    master: str | None = None  # spark.master of this variant (real-time mode needs a slot per partition)
    consumer: dict[str, str] = field(default_factory=dict)  # the flow's replication.consumer

    @property
    def aliases(self) -> tuple[str, str]:
        s, t = KMIRROR_ALIASES
        return (s, t) if self.index == 0 else (f"{s}{self.index}", f"{t}{self.index}")

    @property
    def latency_topic(self) -> str:
        return "bench.lat-km" if self.index == 0 else f"bench.lat-km{self.index}"


def parse_variants(args: argparse.Namespace) -> list[Variant]:
    """The main run (--kmirror-conf/--kmirror-producer) and each --variant 'NAME key=value ...'.

    A variant's settings are added to the main run's; keys starting with `producer.` go to the flow's
    `replication.producer`, `consumer.` to its `replication.consumer`, `master` is the variant's
    `spark.master`, the others go to `spark.conf`.
    """
    conf = {"spark.kmirror.triggerInterval": "200 milliseconds"}
    conf.update(dict(c.split("=", 1) for c in args.kmirror_conf))
    producer = dict(c.split("=", 1) for c in args.kmirror_producer)
    out = [Variant("default", conf, producer)]
    for i, text in enumerate(args.variant, start=1):
        name, *items = text.split()
        pairs = dict(item.split("=", 1) for item in items)
        extra_producer = {k.removeprefix("producer."): v for k, v in pairs.items() if k.startswith("producer.")}
        consumer = {k.removeprefix("consumer."): v for k, v in pairs.items() if k.startswith("consumer.")}
        master = pairs.pop("master", None)
        extra_conf = {k: v for k, v in pairs.items() if not k.startswith(("producer.", "consumer."))}
        out.append(Variant(name, {**conf, **extra_conf}, {**producer, **extra_producer}, i, master, consumer))
    return out


def kmirror_yaml(source: Cluster, target: Cluster, args: argparse.Namespace, variant: Variant) -> str:
    s, t = variant.aliases
    conf, producer = variant.conf, variant.producer
    conf_text = "".join(f"    {k}: {json.dumps(v)}\n" for k, v in conf.items())
    producer_text = json.dumps(producer)
    return f"""
version: 1
clusters:
  {s}: {{bootstrap_servers: "{source.bootstrap}"}}
  {t}: {{bootstrap_servers: "{target.bootstrap}"}}
state: {{cluster: {t}}}
spark:
  deploy: local
  master: "{variant.master or args.spark_master}"
  checkpoint_root: checkpoints
  conf:
{conf_text}
flows:
  - name: bench
    source: {s}
    target: {t}
    topics: {{include: ["{DATA_PATTERN}", "{variant.latency_topic.replace(".", "[.]")}"]}}
    replication: {{start_from: earliest, producer: {producer_text}, consumer: {json.dumps(variant.consumer)}}}
    offsets: {{offset_lag_max: 100}}
    heartbeats: {{enabled: true, interval: 1s}}
"""


def run_kmirror(
    work: Path,
    source: Cluster,
    target: Cluster,
    data_topics: Sequence[str],
    args: argparse.Namespace,
    variant: Variant,
) -> dict[str, Any]:
    from reconciler.runners import LocalRunner
    from reconciler.spec.loader import load_text

    base = work / f"kmirror-{variant.index}-{variant.name}"
    base.mkdir(parents=True, exist_ok=True)
    text = kmirror_yaml(source, target, args, variant)
    (base / "kmirror.yaml").write_text(text)
    state = load_text(text).state.with_source_path(base / "kmirror.yaml")
    flow = state.flow("bench")
    remotes = [flow.remote_topic(t) for t in data_topics]
    runner = LocalRunner(base, state.spark, root=base, stop_timeout=60, start_timeout=300)
    started = time.monotonic()
    pids: list[int] = []
    at_first: dict[str, float] = {}
    threads: dict[str, dict[str, float]] = {}
    result: dict[str, Any] = {}
    try:
        # deploy returns once the query runs; records may already be landing, so watch from a thread-free
        # poll started right after (the first-record mark is then at most one poll late, as for MM2).
        runner.deploy("bench", state.flow_effective_spec("bench"), state.flow_digest("bench"))
        job = runner.job("bench")
        assert job is not None and job.pid is not None
        pids.append(job.pid)
        timing = watch_copy(
            target,
            remotes,
            args.records,
            args.phase_timeout,
            lambda: (
                at_first.update(cpu_snapshot(pids, source, target)),
                threads.update(broker_threads(source, target)),
            ),
            # The query is running: its first batch plans and warms up before the first record lands, so the
            # copy window starts now (leaving that out would flatter kmirror).
            window_now=True,
        )
        # The curve and the start-up figure count from the spark-submit start, not from when deploy returned.
        shift = timing.started - started
        timing.curve = [(round(t + shift, 2), n) for t, n in timing.curve]
        timing.started = started
        cpu = cpu_snapshot(pids, source, target)
        result.update(summarise(timing, args.records, args.record_size, cpu, at_first))
        result["broker_threads_copy_window"] = thread_delta(broker_threads(source, target), threads)
        result["config"] = {
            "variant": variant.name,
            "spark.master": variant.master or args.spark_master,
            "spark.conf": dict(state.spark.conf),
            "producer": dict(flow.replication.producer),
            "consumer": dict(flow.replication.consumer),
            "job_folder": str(runner.jobs_dir / "bench"),
        }
        result["loadavg_after_copy"] = os.getloadavg()
        if args.latency_seconds > 0:
            topic = variant.latency_topic
            result["latency"] = measure_latency(source, target, topic, flow.remote_topic(topic), args)
        return result
    finally:
        runner.stop("bench")
        folder = runner.jobs_dir / "bench"
        with contextlib.suppress(OSError, ValueError):
            status = json.loads((folder / "status.json").read_text())
            result["job_status"] = {k: status.get(k) for k in ("batches", "records", "offset_syncs", "restarts")}
            # The job logs a batch at INFO when it copies >= 10,000 records or takes >= 10 s.
            result["batch_log"] = [
                ln.split("kmirror.job: ", 1)[-1]
                for ln in (folder / "driver.log").read_text(errors="replace").splitlines()
                if "kmirror.job: batch " in ln
            ][-60:]
        job = runner.job("bench")
        if job is not None and job.pid is not None and job.running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job.pid, signal.SIGKILL)


# -- ceiling ----------------------------------------------------------------------------------------------------


def run_ceiling(
    source: Cluster, target: Cluster, data_topics: Sequence[str], args: argparse.Namespace
) -> dict[str, Any]:
    n, size = args.records, args.record_size
    create_topics(target, ["ceiling.perf"], args.partitions * len(data_topics))
    brokers_before = cpu_snapshot([], source, target)
    started = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        consumed = pool.submit(run_measured, consumer_perf(source.bootstrap, n))
        produced = pool.submit(run_measured, producer_perf(target.bootstrap, "ceiling.perf", n, size, SINK_PRODUCER))
        c_out, c_cpu = consumed.result()
        p_out, p_cpu = produced.result()
    wall = time.monotonic() - started
    brokers = cpu_snapshot([], source, target)
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

    create_topics(target, [f"ceiling.copy.{t}" for t in data_topics], args.partitions)
    brokers_before = cpu_snapshot([], source, target)
    started = time.monotonic()
    out, loop_cpu = run_measured(
        [sys.executable, __file__, "_copy", "--source", source.bootstrap, "--target", target.bootstrap,
         "--topics", ",".join(data_topics), "--records", str(n), "--prefix", "ceiling.copy."],
    )  # fmt: skip
    wall = time.monotonic() - started
    brokers = cpu_snapshot([], source, target)
    loop = json.loads(out.strip().splitlines()[-1])
    copy_count = total_end_offsets(target.admin(), [f"ceiling.copy.{t}" for t in data_topics])
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


# -- report -----------------------------------------------------------------------------------------------------


def ratio(a: float | None, b: float | None) -> float | None:
    if not a or not b:
        return None
    return round(a / b, 2)


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
    return out


def table(doc: dict[str, Any]) -> str:
    r = doc["results"]
    rows = [("", "records/s", "steady", "MB/s", "CPU s/M rec (all)", "CPU s/M rec (replicator)", "p50 ms", "p99 ms")]
    if "ceiling" in r:
        p, c = r["ceiling"]["perf_tools"], r["ceiling"]["copy_loop"]
        rows.append(("ceiling: perf tools", f"{p['records_per_s']:,}", "-", f"{p['mb_per_s']}",
                     f"{p['cpu_s_per_m_records_all']}", "-", "-", "-"))  # fmt: skip
        loop_cpu = round(c["cpu_s"]["copy_loop"] * 1e6 / doc["conditions"]["records"], 1)
        rows.append(("ceiling: librdkafka copy loop", f"{c['records_per_s']:,}", "-", f"{c['mb_per_s']}",
                     f"{c['cpu_s_per_m_records_all']}", f"{loop_cpu}", "-", "-"))  # fmt: skip
    runs = [(name, r[name]) for name in ("mm2", "kmirror") if name in r]
    runs += [(f"kmirror [{k}]", v) for k, v in r.get("kmirror_variants", {}).items()]
    for name, x in runs:
        lat = x.get("latency", {}).get("target", {})
        steady = x.get("records_per_s_steady")
        rows.append((name, f"{x['records_per_s']:,}", f"{steady:,}" if steady else "-", f"{x['mb_per_s']}",
                     f"{x['cpu_s_per_m_records_all']}",
                     f"{x['cpu_s_per_m_records']['replicator']}", str(lat.get("p50_ms", "-")),
                     str(lat.get("p99_ms", "-"))))  # fmt: skip
    for name, x in runs:
        if "latency" in x:
            src = x["latency"]["source_only"]
            rows.append((f"  (source only, during {name})", "-", "-", "-", "-", "-", str(src.get("p50_ms")),
                         str(src.get("p99_ms"))))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.append("ratios: " + json.dumps(doc["ratios"]))
    return "\n".join(lines)


def chart(doc: dict[str, Any], path: Path) -> None:
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
    runs = [("MM2", r["mm2"])] if "mm2" in r else []
    runs += [("kmirror", r["kmirror"])] if "kmirror" in r else []
    runs += [(f"kmirror\n[{k}]", v) for k, v in r.get("kmirror_variants", {}).items()]
    for label, x in runs:
        names.append(label)
        rates.append(x["records_per_s"])
        cpus.append(x["cpu_s_per_m_records_all"])
    palette = {"MM2": "#d62728", "kmirror": "#1f77b4"}
    colors = [palette.get(n, "#6baed6" if n.startswith("kmirror") else "#999999") for n in names]
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
        ax.plot([p[0] for p in x["curve"]], [p[1] for p in x["curve"]], label=label.replace("\n", " "))
    ax.set_title("Records on the target since the replicator started")
    ax.set_xlabel("seconds")
    ax.legend()
    ax = axes[1][1]
    labels: list[str] = []
    p50: list[float] = []
    p99: list[float] = []
    for label, x in runs:
        lat = x.get("latency")
        if lat and lat["target"].get("records"):
            labels += [label, "(source\nonly)"]
            p50 += [lat["target"]["p50_ms"], lat["source_only"]["p50_ms"]]
            p99 += [lat["target"]["p99_ms"], lat["source_only"]["p99_ms"]]
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
    fig.suptitle(
        f"{c['topics']} topic(s) x {c['partitions']} partitions, "
        f"{c['records']:,} records of {c['record_size_bytes']} B; "
        f"{c['cpus']} CPUs, 1-min load avg {c['loadavg_start'][0]:.1f} at start, "
        f"{c.get('loadavg_end', [float('nan')])[0]:.1f} at end (shared machine)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- main -------------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--record-size", type=int, default=1024, help="bytes of record value (100 or 1024)")
    p.add_argument("--partitions", type=int, default=6, help="partitions per source topic (6 or 24)")
    p.add_argument("--topics", type=int, default=1, help="source topics (1 or 10)")
    p.add_argument("--records", type=int, default=500_000, help="records in the whole source set")
    p.add_argument("--latency-rate", type=int, default=10_000, help="records/s of the latency run")
    p.add_argument("--latency-seconds", type=int, default=60, help="length of the latency run (0: skip it)")
    p.add_argument("--latency-warmup", type=int, default=5, help="first seconds of the latency run not counted")
    p.add_argument("--phases", default="ceiling,mm2,kmirror", help="comma-separated subset of ceiling,mm2,kmirror")
    p.add_argument("--mm2-tasks", type=int, default=2, help="MM2 tasks.max (2: one per core)")
    p.add_argument("--mm2-heap", default="1g")
    p.add_argument("--mm2-prop", action="append", default=[], help="extra mm2.properties line key=value")
    p.add_argument("--spark-master", default="local[2]")
    p.add_argument("--kmirror-conf", action="append", default=[], help="extra spark.conf key=value")
    p.add_argument("--kmirror-producer", action="append", default=[], help="flow replication.producer key=value")
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        help="also run kmirror as 'NAME key=value ...' (producer.* keys: the flow's producer; others: spark.conf)",
    )
    p.add_argument("--broker-heap", default="1g")
    p.add_argument("--phase-timeout", type=float, default=900, help="seconds one replicator may take to copy")
    p.add_argument("--work", type=Path, help="folder for clusters and jobs (default: a temporary one, removed)")
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/replication.json"))
    p.add_argument("--rerender", type=Path, help="only recompute ratios, table and chart of this results JSON")
    p.add_argument("--plan-scale", type=Path, default=Path("benchmarks/results/plan_scale.json"),
                   help="plan_scale.py results to fold into the report when present")  # fmt: skip
    return p.parse_args(argv)


@contextlib.contextmanager
def clusters(work: Path, heap: str) -> Iterator[tuple[Cluster, Cluster]]:
    source, target = start_clusters(work, heap)
    try:
        yield source, target
    finally:
        for c in (source, target):
            kafka_local.stop(c.home)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rerender:
        doc: dict[str, Any] = json.loads(args.rerender.read_text())
        runs = [doc["results"].get(k) for k in ("mm2", "kmirror")] + [
            *doc["results"].get("kmirror_variants", {}).values()
        ]
        for run in runs:
            if run and "curve" in run:  # reports written before the steady-state rate was added
                run.setdefault("records_per_s_steady", steady_rate(run["curve"], run["records"]))
        doc["ratios"] = ratios(doc["results"])
        if args.plan_scale.is_file():
            doc["plan_scale"] = json.loads(args.plan_scale.read_text())
        args.rerender.write_text(json.dumps(doc, indent=2) + "\n")
        chart(doc, args.rerender.with_suffix(".png"))
        print(table(doc))
        return 0
    phases = set(args.phases.split(","))
    work = args.work or Path(tempfile.mkdtemp(prefix="kmirror-repl-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    data_topics = [f"bench.d{i:02d}" for i in range(args.topics)]
    per_topic = args.records // args.topics
    args.records = per_topic * args.topics
    doc = {
        "benchmark": "replication",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "conditions": {
            "record_size_bytes": args.record_size,
            "partitions": args.partitions,
            "topics": args.topics,
            "records": args.records,
            "latency_rate": args.latency_rate,
            "latency_seconds": args.latency_seconds,
            "cpus": os.cpu_count(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "loadavg_start": os.getloadavg(),
            "steal_s_at_start": steal_seconds(),
            "python": platform.python_version(),
            "kafka_source": KAFKA_SOURCE_VERSION,
            "kafka_target": KAFKA_TARGET_VERSION,
            "mm2": KAFKA_TARGET_VERSION,
            "broker_heap": args.broker_heap,
        },
        "results": {},
    }
    t0 = time.monotonic()
    try:
        with clusters(work, args.broker_heap) as (source, target):
            print(f"clusters up ({time.monotonic() - t0:.0f}s): source {source.bootstrap}, target {target.bootstrap}")
            variants = parse_variants(args)
            create_topics(
                source, [*data_topics, "bench.lat-mm2", *(v.latency_topic for v in variants)], args.partitions
            )
            started = time.monotonic()
            fill_cpu = 0.0
            for topic in data_topics:
                _, cpu = run_measured(
                    producer_perf(source.bootstrap, topic, per_topic, args.record_size, SINK_PRODUCER)
                )
                fill_cpu += cpu
            fill = time.monotonic() - started
            doc["results"]["source_fill"] = {
                "records_per_s_incl_jvm_start": round(args.records / fill),
                "seconds": round(fill, 1),
                "producer_cpu_s": round(fill_cpu, 1),
            }
            print(f"source loaded: {args.records:,} records in {fill:.0f}s")
            if "ceiling" in phases:
                doc["results"]["ceiling"] = run_ceiling(source, target, data_topics, args)
                print(f"ceiling: {json.dumps(doc['results']['ceiling'])}")
            if "mm2" in phases:
                doc["results"]["mm2"] = run_mm2(work, source, target, data_topics, args)
                print(f"mm2: {doc['results']['mm2']['records_per_s']:,} records/s")
            if "kmirror" in phases:
                for variant in variants:
                    if variant.index == 0:
                        result = run_kmirror(work, source, target, data_topics, args, variant)
                        doc["results"]["kmirror"] = result
                    else:
                        try:
                            result = run_kmirror(work, source, target, data_topics, args, variant)
                        except Exception as exc:  # a bad variant setting must not lose the rest of the run
                            print(f"kmirror {variant.name}: failed: {exc}")
                            doc["results"].setdefault("kmirror_failed_variants", {})[variant.name] = str(exc)[:2000]
                            continue
                        doc["results"].setdefault("kmirror_variants", {})[variant.name] = result
                    print(f"kmirror {variant.name}: {result['records_per_s']:,} records/s")
    finally:
        doc["conditions"]["loadavg_end"] = os.getloadavg()
        doc["conditions"]["steal_s"] = round(steal_seconds() - doc["conditions"].pop("steal_s_at_start"), 1)
        doc["conditions"]["total_seconds"] = round(time.monotonic() - t0)
        doc["ratios"] = ratios(doc["results"])
        if args.plan_scale.is_file():
            doc["plan_scale"] = json.loads(args.plan_scale.read_text())
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.out}")
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    chart(doc, args.out.with_suffix(".png"))
    print(table(doc))
    print(f"wrote {args.out.with_suffix('.png')}")
    return 0


def worker_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("worker", choices=["_copy", "_pace"])
    p.add_argument("--source", required=True)
    p.add_argument("--target")
    p.add_argument("--topics")
    p.add_argument("--topic")
    p.add_argument("--prefix", default="")
    p.add_argument("--records", type=int)
    p.add_argument("--rate", type=int)
    p.add_argument("--seconds", type=float)
    p.add_argument("--size", type=int)
    args = p.parse_args(argv)
    return copy_loop_worker(args) if args.worker == "_copy" else pace_worker(args)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("_copy", "_pace"):
        sys.exit(worker_main(sys.argv[1:]))
    sys.exit(main())
