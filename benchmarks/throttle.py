"""`python -m benchmarks.throttle`: a throttled backfill holds its rate (issue 37, item 4).

Starts its own Kafka pair (3.9 source, 4.x target) under a temporary folder, fills one source topic with
`--records` records of `--record-size` bytes (1,000,000 x 1 KB: about 1 GB), and applies, through the `kmirror`
command as a user does, a flow from `start_from: earliest` with `replication.throttle` (default `10MB`): apply sets
the client quotas, then deploys the job. From the plan it keeps the quota rows. While the job copies, every second
it reads the records on the target; the bytes the job has read from the source are those records' share of the
source log (its segment files on disk, divided by its records: what a fetch of them sends, less the fetch
protocol's own headers). It reports the rate per second and over each sliding minute (mean, and how far the
slowest and fastest minute are from the throttle), then applies the flow without the throttle (the quotas go) and
measures the best 10 s of the unthrottled copy (from the quotas' removal, which apply does before it redeploys the
job), to show what the machine does when nothing holds it (the throttled phase lasts `--throttled-seconds`, so
that records are left for it).

Must not: be imported by kmirror (a benchmark, not production code).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from benchmarks.replication.common import total_end_offsets

FLOW = "backfill"


def _fill(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20, "acks": "1"})
    body = os.urandom(size)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=i.to_bytes(8, "big") + body[8:], partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0


def _count(bootstrap: str, topic: str) -> int:
    """The records on `topic` (its high watermarks, one round trip through one admin client per cluster)."""
    return total_end_offsets(_admin(bootstrap), [topic])


@functools.cache
def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _log_bytes(home: Path, topic: str) -> int:
    """The bytes of `topic`'s segment files in the broker's data folder (the records as fetched, batch headers
    included)."""
    return sum(f.stat().st_size for f in home.rglob(f"{topic}-*/*.log"))


def _kmirror(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args, "-f", "kmirror.yaml"],
        cwd=folder, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    if result.returncode not in (0, 2):
        raise RuntimeError(f"kmirror {' '.join(args)} failed: {result.stderr[-2000:]}")
    return result


def _write_spec(folder: Path, src: str, dst: str, topic: str, throttle: str | None, enabled: bool = True) -> None:
    replication: dict[str, Any] = {"start_from": "earliest"}
    if throttle:
        replication["throttle"] = throttle
    doc = {
        "version": 1,
        "clusters": {"src": {"bootstrap_servers": src}, "dst": {"bootstrap_servers": dst}},
        # a state topic of its own: the local runner keeps a flow's job folder (and its last checkpoint path) per
        # state topic and flow on this host, so a second run under the default name would resume the first run's
        # checkpoint on these new clusters
        "state": {"cluster": "dst", "topic": f"_kmirror.state.{folder.parent.name}"},
        "spark": {"deploy": "local", "checkpoint_root": "checkpoints"},
        "flows": [
            {
                "name": FLOW,
                "source": "src",
                "target": "dst",
                "enabled": enabled,
                "topics": {"include": [topic]},
                "heartbeats": {"enabled": False},
                "offsets": {"emit_checkpoints": False},
                "sync": {"acls": False, "configs": False},
                "replication": replication,
            }
        ],
    }
    (folder / "kmirror.yaml").write_text(json.dumps(doc, indent=2))


def _sample(dst: str, remote: str, seconds: float, until: int) -> list[tuple[float, int]]:
    """(time, records on the target) once a second, from the first record for `seconds` or until `until`."""
    samples: list[tuple[float, int]] = []
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        n = _count(dst, remote)
        now = time.monotonic()
        if n > 0 or samples:
            samples.append((now, n))
        if n >= until or (samples and now - samples[0][0] >= seconds):
            break
        time.sleep(max(0.0, 1.0 - (time.monotonic() - now)))
    return samples


def _minutes(samples: list[tuple[float, int]], bytes_per_record: float) -> list[float]:
    """The mean byte rate over every 60 s window of the samples (one per second of start)."""
    rates = []
    for i, (t0, n0) in enumerate(samples):
        ends = [(t, n) for t, n in samples[i:] if t - t0 >= 60.0]
        if not ends:
            break
        t1, n1 = ends[0]
        rates.append((n1 - n0) * bytes_per_record / (t1 - t0))
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--throttle", default="10MB", help="replication.throttle of the flow")
    parser.add_argument(
        "--throttled-seconds", type=float, default=80.0, help="throttled copy measured first (60 s windows need more)"
    )
    parser.add_argument("-o", "--output", type=Path, default=None)
    args = parser.parse_args(argv)

    from reconciler.artifacts.jars import KAFKA_SOURCE_VERSION, KAFKA_TARGET_VERSION
    from reconciler.devenv import kafka_local
    from reconciler.spec.byte_rates import parse_byte_rate

    limit = parse_byte_rate(args.throttle)
    work = Path(tempfile.mkdtemp(prefix="kmirror-bench-throttle-"))
    src_home, dst_home, folder = work / "src", work / "dst", work / "flow"
    folder.mkdir()
    src = kafka_local.start("src", KAFKA_SOURCE_VERSION, src_home)
    dst = kafka_local.start("dst", KAFKA_TARGET_VERSION, dst_home)
    topic, remote = "history", "src.history"
    try:
        started = time.monotonic()
        _fill(src.bootstrap_servers, topic, args.partitions, args.records, args.record_size)
        fill_s = time.monotonic() - started
        source_bytes = _log_bytes(src_home, topic)
        per_record = source_bytes / args.records
        _write_spec(folder, src.bootstrap_servers, dst.bootstrap_servers, topic, args.throttle)
        plan = json.loads(_kmirror(folder, "plan", "--format", "json").stdout)
        quotas = [
            {"address": c["address"], "action": c["action"], "after": c.get("after")}
            for c in plan["changes"]
            if c["kind"] == "quota"
        ]
        _kmirror(folder, "apply", "--auto-approve")
        load_before = os.getloadavg()
        throttled = _sample(dst.bootstrap_servers, remote, seconds=args.throttled_seconds, until=args.records)
        load_after = os.getloadavg()
        # whole-run rates exclude the first 5 s (the job's first fetches are not yet throttled by the broker's
        # quota window) and the tail where the source runs out
        steady = [s for s in throttled if s[0] - throttled[0][0] >= 5.0 and s[1] < args.records * 0.98]
        per_second = [(n1 - n0) * per_record / (t1 - t0) for (t0, n0), (t1, n1) in itertools.pairwise(steady)]
        minutes = _minutes(steady, per_record)
        # the same flow without the throttle: apply removes the quotas and the job copies freely
        copied_all = _count(dst.bootstrap_servers, remote) >= args.records
        free: dict[str, Any] = {"skipped": "the throttled copy already copied everything"} if copied_all else {}
        if not copied_all:
            # apply removes the quotas first, then redeploys the job (its graceful stop waits for the running
            # interval): the job runs unthrottled from the quotas' removal, so the samples run through the apply
            _write_spec(folder, src.bootstrap_servers, dst.bootstrap_servers, topic, None)
            with ThreadPoolExecutor(1) as pool:
                sampling = pool.submit(_sample, dst.bootstrap_servers, remote, 300.0, args.records)
                _kmirror(folder, "apply", "--auto-approve")  # the job's clients drop the quotas' ids
                unthrottled = sampling.result()
            windows = [
                (n1 - n0) * per_record / (t1 - t0)
                for i, (t0, n0) in enumerate(unthrottled)
                for t1, n1 in unthrottled[i + 1 :]
                if 10.0 <= t1 - t0 < 11.0
            ]
            free = {
                "bytes_per_s_best_10s": round(max(windows)) if windows else None,
                "seconds_sampled": round(unthrottled[-1][0] - unthrottled[0][0], 1) if unthrottled else 0,
            }
        _write_spec(folder, src.bootstrap_servers, dst.bootstrap_servers, topic, None, enabled=False)
        _kmirror(folder, "apply", "--auto-approve")  # stops the job
        report = {
            "records": args.records,
            "record_size": args.record_size,
            "partitions": args.partitions,
            "source_log_bytes": source_bytes,
            "fill_s": round(fill_s, 1),
            "throttle": args.throttle,
            "throttle_bytes_per_s": limit,
            "plan_quota_rows": quotas,
            "throttled": {
                "seconds_sampled": round(throttled[-1][0] - throttled[0][0], 1) if throttled else 0,
                "bytes_per_s_mean": round(statistics.mean(per_second)) if per_second else None,
                "bytes_per_s_per_second_min_max": [round(min(per_second)), round(max(per_second))]
                if per_second
                else None,
                "minute_windows": len(minutes),
                "minute_bytes_per_s_median": round(statistics.median(minutes)) if minutes else None,
                "minute_bytes_per_s_min_max": [round(min(minutes)), round(max(minutes))] if minutes else None,
                "minute_deviation_from_throttle": [
                    round(min(minutes) / limit - 1, 4),
                    round(max(minutes) / limit - 1, 4),
                ]
                if minutes
                else None,
            },
            "unthrottled": free,
            # the rate in each second of the steady part (bursts and idle gaps show the quota's arithmetic)
            "throttled_per_second_bytes": [round(r) for r in per_second],
            "cpus": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": load_after,
        }
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
