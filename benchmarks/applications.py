"""`python -m benchmarks.applications`: what N flows cost in memory as one Spark application (`spark.application`)
against one flow alone (issue 37, item 3: 6 flows' resident memory <= 1.5x one flow's).

Starts its own Kafka pair (3.9 source, 4.x target) under a temporary folder, creates `--flows` topic families of
`--partitions` partitions each and keeps producing `--rate` records per second into each. Then, through the
`kmirror` command as a user does:

1. one flow alone (its own application, the default): apply, wait until its records arrive, sample the resident
   memory (RSS) of the job's whole process tree (spark-submit's process group: the launcher, the driver JVM and its
   Python) once a second for `--seconds`, then disable the flow (apply stops the job);
2. the N flows in one application (`spark.application: fleet`): the same, every flow's records arriving first;
3. with `--separate`, the N flows each in an application of its own (N drivers), for the comparison.

Reports each arm's median and peak RSS (MiB), the ratio of the application's to the single flow's, and the load.
RSS sums each process's resident pages (pages shared between the processes counted in each, the same in every arm).

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
from pathlib import Path
from typing import Any

from benchmarks.replication.common import total_end_offsets

#: `--driver-memory`: the same `spark.driver.memory` in every arm (None: kmirror's default, 1g).
DRIVER_MEMORY: str | None = None


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
    if DRIVER_MEMORY:
        spark["conf"] = {"spark.driver.memory": DRIVER_MEMORY}
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


def _arm(
    work: Path, label: str, src: str, dst: str, flows: list[str], application: str | None, seconds: float
) -> dict[str, Any]:
    folder = work / "flows"  # one folder and state topic for every arm: the remote topics stay kmirror's
    folder.mkdir(exist_ok=True)
    _write_spec(folder, src, dst, flows, application, True)
    started = time.monotonic()
    _kmirror(folder, "apply", "--auto-approve")
    applied_s = time.monotonic() - started
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": dst})
    remotes = [f"src.{name}.events" for name in flows]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not all(total_end_offsets(admin, [r]) > 0 for r in remotes):
        time.sleep(1)
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
        "all_flows_copying_s": round(first_records_s, 1),
        "rss_mib_median": round(statistics.median(samples) / mib, 1),
        "rss_mib_peak": round(max(samples) / mib, 1),
        "rss_mib_median_by_process": {c: round(statistics.median(v) / mib, 1) for c, v in sorted(parts.items())},
        "samples": len(samples),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--flows", type=int, default=6)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rate", type=int, default=200, help="records per second into each flow's topic")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long each arm's RSS is sampled")
    parser.add_argument("--separate", action="store_true", help="also run the N flows as N applications")
    parser.add_argument("--driver-memory", default=None, help="spark.driver.memory of every arm (default: 1g)")
    parser.add_argument("-o", "--output", type=Path, default=None)
    args = parser.parse_args(argv)
    global DRIVER_MEMORY
    DRIVER_MEMORY = args.driver_memory

    from confluent_kafka.admin import AdminClient, NewTopic

    from reconciler.artifacts.jars import KAFKA_SOURCE_VERSION, KAFKA_TARGET_VERSION
    from reconciler.devenv import kafka_local

    work = Path(tempfile.mkdtemp(prefix="kmirror-bench-apps-"))
    os.environ["KMIRROR_HOME"] = str(work / "home")  # this run's job folders only (kmirror and the jobs inherit it)
    src_home, dst_home = work / "src", work / "dst"
    src = kafka_local.start("src", KAFKA_SOURCE_VERSION, src_home)
    dst = kafka_local.start("dst", KAFKA_TARGET_VERSION, dst_home)
    flows = [f"f{i}" for i in range(args.flows)]
    topics = [f"{name}.events" for name in flows]
    admin = AdminClient({"bootstrap.servers": src.bootstrap_servers})
    for future in admin.create_topics([NewTopic(t, args.partitions, 1) for t in topics]).values():
        future.result(timeout=30)
    stop = threading.Event()
    producer = threading.Thread(
        target=_produce, args=(src.bootstrap_servers, topics, args.partitions, args.rate, stop), daemon=True
    )
    producer.start()
    report: dict[str, Any] = {
        "flows": args.flows,
        "partitions_per_flow": args.partitions,
        "rate_per_flow": args.rate,
        "driver_memory": args.driver_memory or "1g (default)",
    }
    try:
        s, d = src.bootstrap_servers, dst.bootstrap_servers
        report["one_flow"] = _arm(work, "one", s, d, flows[:1], None, args.seconds)
        report["one_application"] = _arm(work, "app", s, d, flows, "fleet", args.seconds)
        if args.separate:
            report["separate_applications"] = _arm(work, "separate", s, d, flows, None, args.seconds)
        one, app = report["one_flow"], report["one_application"]
        report["ratio_median"] = round(app["rss_mib_median"] / one["rss_mib_median"], 2)
        report["ratio_peak"] = round(app["rss_mib_peak"] / one["rss_mib_peak"], 2)
        report["cpus"] = os.cpu_count()
        text = json.dumps(report, indent=2)
        print(text)
        if args.output:
            args.output.write_text(text + "\n")
    finally:
        stop.set()
        producer.join(30)
        kafka_local.stop(src_home)
        kafka_local.stop(dst_home)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
