"""`python -m benchmarks.applications`: what N flows cost in memory as one Spark application (`spark.application`)
against one flow alone (issue 37, item 3: 6 flows' resident memory <= 1.5x one flow's).

Starts its own Kafka pair (3.9 source, 4.x target) under a temporary folder and creates `--flows` topic families of
`--partitions` partitions each. Then, through the `kmirror` command as a user does:

1. one flow alone (its own application, the default): `--warm-records` records written into its topic, apply,
   wait until the warm copy has arrived (while `--rate` records per second keep coming), sample the resident memory
   (RSS) of the job's whole process tree (spark-submit's process group: the launcher, the driver JVM and its Python)
   once a second for `--seconds`, then disable the flow (apply stops the job);
2. the N flows in one application (`spark.application: fleet`): the same, the same warm copy into every flow's
   topic (a flow of arm 1 resumes from its checkpoint: it copies the new records only);
3. with `--separate`, the N flows each in an application of its own (N drivers), for the comparison.

Reports each arm's median and peak RSS (MiB), the ratio of the application's to the single flow's, and the load.
RSS sums each process's resident pages (pages shared between the processes counted in each, the same in every arm).
`--java-options` adds JVM options to every arm's driver (`spark.driver.extraJavaOptions`); `--diagnose` adds
Native Memory Tracking and a GC log and, at the end of each arm's sampling, keeps the driver's `jcmd`
VM.native_memory summary, GC.heap_info and the top of GC.class_histogram beside the report (`-o`'s folder).

Must not: be imported by kmirror (a benchmark, not production code).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: `--driver-memory`: the same `spark.driver.memory` in every arm (None: kmirror's default, 1g).
DRIVER_MEMORY: str | None = None
#: `--java-options` (and `--diagnose`'s): the same driver JVM options in every arm.
JAVA_OPTIONS: list[str] = []


def _kmirror(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args, "-f", str(folder / "kmirror.yaml")],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if result.returncode not in (0, 2):
        raise RuntimeError(f"kmirror {' '.join(args)} failed: {result.stdout[-2000:]} {result.stderr[-2000:]}")
    return result


def _write_spec(folder: Path, src: str, dst: str, flows: list[str], application: str | None, enabled: bool) -> None:
    spark: dict[str, Any] = {"deploy": "local", "checkpoint_root": "checkpoints"}
    conf: dict[str, str] = {}
    if DRIVER_MEMORY:
        conf["spark.driver.memory"] = DRIVER_MEMORY
    if JAVA_OPTIONS:
        conf["spark.driver.extraJavaOptions"] = " ".join(JAVA_OPTIONS)
    if conf:
        spark["conf"] = conf
    if application:
        spark["application"] = application
    doc = {
        "version": 1,
        "clusters": {"src": {"bootstrap_servers": src}, "dst": {"bootstrap_servers": dst}},
        "state": {"cluster": "dst", "topic": "_kmirror.state.bench-apps"},
        "spark": spark,
        "flows": [
            {
                "name": name,
                "source": "src",
                "target": "dst",
                "enabled": enabled,
                "topics": {"include": [f"{name}\\..*"]},
                "heartbeats": {"enabled": False},
                "sync": {"acls": False, "group_offsets": False},
            }
            for name in flows
        ],
    }
    (folder / "kmirror.yaml").write_text(json.dumps(doc, indent=2))


def _produce(bootstrap: str, topics: list[str], partitions: int, rate: int, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    body = os.urandom(512)
    i = 0
    while not stop.is_set():
        started = time.monotonic()
        for topic in topics:
            for _ in range(rate // 10):
                producer.produce(topic, value=body, partition=i % partitions)
                i += 1
        producer.poll(0)
        stop.wait(max(0.0, 0.1 - (time.monotonic() - started)))
    producer.flush(30)


def _warm(bootstrap: str, topics: list[str], partitions: int, records: int) -> None:
    """`records` records of 512 B into each of `topics`, acknowledged: the backlog every arm's flows copy first."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144})
    body = os.urandom(512)
    for topic in topics:
        for i in range(records):
            while True:
                try:
                    producer.produce(topic, value=body, partition=i % partitions)
                    break
                except BufferError:
                    producer.poll(0.1)
    if producer.flush(120):
        raise RuntimeError("the warm copy's records were not all acknowledged")


def _source_ends(bootstrap: str, topics: list[str]) -> dict[str, int]:
    from confluent_kafka.admin import AdminClient

    from benchmarks.replication.common import end_offsets_by_topic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for _ in range(30):
        ends = end_offsets_by_topic(admin, topics)
        if ends is not None and len(ends) == len(topics):
            return ends
        time.sleep(1)
    raise RuntimeError(f"no end offsets for {topics}")


def _java_pid(pgids: set[int]) -> int | None:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            if int(text.rpartition(")")[2].split()[2]) in pgids and "(java)" in text:
                return int(stat.parent.name)
        except (OSError, ValueError, IndexError):
            continue
    return None


def _diagnose(pgids: set[int], out: Path, label: str) -> dict[str, Any]:
    """The driver JVM's `jcmd` answers (NMT summary, heap info, class histogram top) into `out`; a summary back."""
    pid = _java_pid(pgids)
    if pid is None:
        return {}
    found: dict[str, Any] = {"java_pid": pid}
    for command, name in (
        (["VM.native_memory", "summary"], "nmt"),
        (["GC.heap_info"], "heap"),
        (["GC.class_histogram"], "histogram"),
    ):
        result = subprocess.run(["jcmd", str(pid), *command], capture_output=True, text=True, timeout=120, check=False)
        text = result.stdout if name != "histogram" else "\n".join(result.stdout.splitlines()[:45])
        (out / f"{label}-{name}.txt").write_text(text)
        if name == "nmt":
            found["nmt_committed_kb"] = _nmt_committed(text)
    return found


def _nmt_committed(text: str) -> dict[str, int]:
    """`Java Heap (reserved=..KB, committed=..KB)` lines of an NMT summary, as {category: committed KB}."""
    import re

    found = {}
    for match in re.finditer(r"^(?:-\s*)?([A-Za-z][A-Za-z ]+?) \(reserved=\d+KB, committed=(\d+)KB\)", text, re.M):
        found[match.group(1).strip()] = int(match.group(2))
    return found


def _tree_rss(pgids: set[int]) -> dict[str, int]:
    """Resident bytes of every process in the process groups `pgids` (each job is a session of its own), by the
    process's command name (`java`: the driver JVM; `python...`: the driver's Python; `bash`: spark-submit)."""
    by_command: dict[str, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            pgrp = int(text.rpartition(")")[2].split()[2])
            if pgrp not in pgids:
                continue
            command = text[text.index("(") + 1 : text.rindex(")")]
            for line in (stat.parent / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    by_command[command] = by_command.get(command, 0) + int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            continue
    return by_command


def _job_pgids(folder: Path, flows: list[str]) -> set[int]:
    from reconciler.jobcontract.layout import local_state_keys
    from reconciler.runners import LocalRunner
    from reconciler.spec.loader import load_desired_state

    desired = load_desired_state(folder / "kmirror.yaml")
    (key,) = local_state_keys(desired.state.topic)  # `<state topic>@<state cluster id>`
    runner = LocalRunner(folder, desired.spark, state_topic=desired.state.topic, state_key=key)
    pids = set()
    for name in flows:
        job = runner.job(name)
        if job is None or not job.running or job.pid is None:
            raise RuntimeError(f"flow {name}'s job does not run after apply")
        pids.add(job.pid)
    return pids


@dataclass(frozen=True)
class Load:
    """What every arm's flows copy: a warm copy of `warm` records per flow, then `rate` records/s each."""

    partitions: int
    rate: int
    warm: int
    diagnose: Path | None  # where `--diagnose` keeps the jcmd answers


def _arm(
    work: Path, label: str, src: str, dst: str, flows: list[str], application: str | None, seconds: float, load: Load
) -> dict[str, Any]:
    folder = work / "flows"  # one folder and state topic for every arm: the remote topics stay kmirror's
    folder.mkdir(exist_ok=True)
    topics = [f"{name}.events" for name in flows]
    _warm(src, topics, load.partitions, load.warm)
    warm_ends = _source_ends(src, topics)
    stop = threading.Event()
    producer = threading.Thread(target=_produce, args=(src, topics, load.partitions, load.rate, stop), daemon=True)
    producer.start()
    try:
        return _measure(folder, label, src, dst, flows, application, seconds, load, warm_ends)
    finally:
        stop.set()
        producer.join(30)


def _measure(
    folder: Path,
    label: str,
    src: str,
    dst: str,
    flows: list[str],
    application: str | None,
    seconds: float,
    load: Load,
    warm_ends: dict[str, int],
) -> dict[str, Any]:
    _write_spec(folder, src, dst, flows, application, True)
    started = time.monotonic()
    _kmirror(folder, "apply", "--auto-approve")
    applied_s = time.monotonic() - started
    from confluent_kafka.admin import AdminClient

    from benchmarks.replication.common import end_offsets_by_topic

    admin = AdminClient({"bootstrap.servers": dst})
    remotes = {f"src.{t}": end for t, end in warm_ends.items()}  # identity of naming: prefix `src.`
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ends = end_offsets_by_topic(admin, list(remotes)) or {}
        if all(ends.get(r, 0) >= end for r, end in remotes.items()):
            break
        time.sleep(1)
    else:
        raise RuntimeError(f"arm {label}: the warm copy did not arrive in 600 s")
    first_records_s = time.monotonic() - started
    pgids = _job_pgids(folder, flows)
    load_before = os.getloadavg()
    samples: list[int] = []
    parts: dict[str, list[int]] = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        found = _tree_rss(pgids)
        samples.append(sum(found.values()))
        for command, rss in found.items():
            parts.setdefault(command, []).append(rss)
        time.sleep(1)
    load_after = os.getloadavg()
    diagnosis = _diagnose(pgids, load.diagnose, label) if load.diagnose is not None else None
    _write_spec(folder, src, dst, flows, application, False)
    _kmirror(folder, "apply", "--auto-approve")  # stops the jobs
    report_label = label
    mib = 1024 * 1024
    return {
        "arm": report_label,
        "flows": len(flows),
        "application": application,
        "processes_groups": len(pgids),
        "apply_s": round(applied_s, 1),
        "warm_copy_done_s": round(first_records_s, 1),
        "rss_mib_median": round(statistics.median(samples) / mib, 1),
        "rss_mib_peak": round(max(samples) / mib, 1),
        "rss_mib_median_by_process": {c: round(statistics.median(v) / mib, 1) for c, v in sorted(parts.items())},
        "samples": len(samples),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        **({"diagnosis": diagnosis} if diagnosis is not None else {}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--flows", type=int, default=6)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rate", type=int, default=200, help="records per second into each flow's topic")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long each arm's RSS is sampled")
    parser.add_argument("--separate", action="store_true", help="also run the N flows as N applications")
    parser.add_argument("--warm-records", type=int, default=50_000, help="each flow's warm copy (records of 512 B)")
    parser.add_argument("--driver-memory", default=None, help="spark.driver.memory of every arm (default: 1g)")
    parser.add_argument("--java-options", default="", help="driver JVM options of every arm")
    parser.add_argument(
        "--diagnose",
        action="store_true",
        help="NMT and a GC log; jcmd's answers kept beside -o (or in the temp folder)",
    )
    parser.add_argument("-o", "--output", type=Path, default=None)
    args = parser.parse_args(argv)
    global DRIVER_MEMORY
    DRIVER_MEMORY = args.driver_memory
    JAVA_OPTIONS[:] = args.java_options.split()

    from confluent_kafka.admin import AdminClient, NewTopic

    from reconciler.artifacts.jars import KAFKA_SOURCE_VERSION, KAFKA_TARGET_VERSION
    from reconciler.devenv import kafka_local

    work = Path(tempfile.mkdtemp(prefix="kmirror-bench-apps-"))
    diagnose = None
    if args.diagnose:
        diagnose = ((args.output.parent if args.output else work) / "diagnosis").resolve()
        diagnose.mkdir(parents=True, exist_ok=True)
        JAVA_OPTIONS.extend(["-XX:NativeMemoryTracking=summary", f"-Xlog:gc*:file={diagnose}/gc-%p.log:time,uptime"])
    os.environ["KMIRROR_HOME"] = str(work / "home")  # this run's job folders only (kmirror and the jobs inherit it)
    src_home, dst_home = work / "src", work / "dst"
    src = kafka_local.start("src", KAFKA_SOURCE_VERSION, src_home)
    dst = kafka_local.start("dst", KAFKA_TARGET_VERSION, dst_home)
    flows = [f"f{i}" for i in range(args.flows)]
    topics = [f"{name}.events" for name in flows]
    admin = AdminClient({"bootstrap.servers": src.bootstrap_servers})
    for future in admin.create_topics([NewTopic(t, args.partitions, 1) for t in topics]).values():
        future.result(timeout=30)
    report: dict[str, Any] = {
        "flows": args.flows,
        "partitions_per_flow": args.partitions,
        "rate_per_flow": args.rate,
        "warm_records_per_flow": args.warm_records,
        "driver_memory": args.driver_memory or "1g (default)",
        "java_options": " ".join(JAVA_OPTIONS),
    }
    load = Load(args.partitions, args.rate, args.warm_records, diagnose)
    try:
        s, d = src.bootstrap_servers, dst.bootstrap_servers
        report["one_flow"] = _arm(work, "one", s, d, flows[:1], None, args.seconds, load)
        report["one_application"] = _arm(work, "app", s, d, flows, "fleet", args.seconds, load)
        if args.separate:
            report["separate_applications"] = _arm(work, "separate", s, d, flows, None, args.seconds, load)
        one, app = report["one_flow"], report["one_application"]
        report["ratio_median"] = round(app["rss_mib_median"] / one["rss_mib_median"], 2)
        report["ratio_peak"] = round(app["rss_mib_peak"] / one["rss_mib_peak"], 2)
        report["cpus"] = os.cpu_count()
        text = json.dumps(report, indent=2)
        print(text)
        if args.output:
            args.output.write_text(text + "\n")
    finally:
        kafka_local.stop(src_home)
        kafka_local.stop(dst_home)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
