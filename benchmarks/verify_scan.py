"""Records verified per second by `kmirror verify`, against a plain consumer reading both sides.

Uses `--source/--target` (bootstrap servers), or KMIRROR_TEST_SOURCE_BOOTSTRAP / KMIRROR_TEST_TARGET_BOOTSTRAP, or
starts a Kafka 3.9 source and a 4.x target of its own under a temporary folder (stopped at the end). Under a fresh
prefix it writes R records of S bytes over P partitions to the source, the same records (key, value, headers,
timestamp) to the remote topic on the target, and an offset-sync every 100 records (what the job writes for a
clean copy). Then, each `--repeat` times, interleaved:
  - plain: one read_committed consumer per cluster, assigned to every partition, reads everything (no compare);
  - verify: `reconciler.verify.run.verify` over the same flow (reads both sides, compares every record), with
    `--engine python` (this process) or `spark` (one local Spark task per partition; the session's start is
    included in the time).

    .venv/bin/python benchmarks/verify_scan.py [--records 200000] [--partitions 2] [--size 1024] [--repeat 3]
        [--engine python|spark]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reconciler.core.mm2.wire import OffsetSync
from reconciler.spec.loader import load_text
from reconciler.verify.run import verify


def _create(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a collected client fails its futures
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)


def _fill(
    source: str, target: str, topic: str, remote: str, syncs: str, records: int, partitions: int, size: int
) -> None:
    producers = [
        Producer({"bootstrap.servers": b, "linger.ms": 20, "batch.size": 1_000_000, "compression.type": "lz4"})
        for b in (source, target)
    ]
    body = os.urandom(size)
    base = int(time.time() * 1000) - records
    for i in range(records):
        part = i % partitions
        value = i.to_bytes(8, "big") + body[8:]
        for p, name in zip(producers, (topic, remote), strict=True):
            while True:
                try:
                    p.produce(name, key=f"k{i}".encode(), value=value, headers=[("seq", str(i).encode())],
                              timestamp=base + i, partition=part)  # fmt: skip
                    break
                except BufferError:
                    p.poll(0.1)
        if i % 10_000 == 0:
            for p in producers:
                p.poll(0)
    for p in producers:
        assert p.flush(120) == 0
    sync = Producer({"bootstrap.servers": source})
    per = records // partitions
    for part in range(partitions):
        for offset in [*range(0, per, 100), per - 1]:
            s = OffsetSync(topic, part, offset, offset)
            sync.produce(syncs, key=s.key_bytes(), value=s.value_bytes(), partition=0)
    assert sync.flush(60) == 0


def _plain(bootstrap: str, name: str, partitions: int, ends: int) -> int:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(name, p, 0) for p in range(partitions)])
    n, eof = 0, set[int]()
    try:
        while len(eof) < partitions:
            for m in c.consume(10_000, 1.0):
                if m.error():
                    eof.add(m.partition())
                    continue
                m.value()
                n += 1
    finally:
        c.close()
    assert n == ends, (n, ends)
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=os.environ.get("KMIRROR_TEST_SOURCE_BOOTSTRAP"))
    ap.add_argument("--target", default=os.environ.get("KMIRROR_TEST_TARGET_BOOTSTRAP"))
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engine", choices=["python", "spark"], default="python")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    homes: list[Path] = []
    source, target = args.source, args.target
    if not (source and target):
        from reconciler.devenv import kafka_local
        from reconciler.devenv.jars import KAFKA_SOURCE_VERSION, KAFKA_TARGET_VERSION

        root = Path(tempfile.mkdtemp(prefix="kmirror-verify-bench-"))
        with ThreadPoolExecutor(2) as pool:
            started = list(
                pool.map(
                    lambda nv: kafka_local.start(nv[0], nv[1], root / nv[0]),
                    [("source", KAFKA_SOURCE_VERSION), ("target", KAFKA_TARGET_VERSION)],
                )
            )
        homes = [Path(c.home) for c in started]
        source, target = started[0].bootstrap_servers, started[1].bootstrap_servers
    try:
        tag = uuid.uuid4().hex[:6]
        spec = load_text(f"""
version: 1
clusters:
  s{tag}: {{bootstrap_servers: "{source}"}}
  t{tag}: {{bootstrap_servers: "{target}"}}
state: {{cluster: t{tag}, topic: _kmirror.state-{tag}}}
flows:
  - name: bench
    source: s{tag}
    target: t{tag}
    topics: {{include: ['vb{tag}\\..*']}}
""").state
        flow = spec.flow("bench")
        topic = f"vb{tag}.data"
        remote = flow.remote_topic(topic)
        syncs = flow.policy().offset_syncs_topic(flow.target)
        _create(source, topic, args.partitions)
        _create(target, remote, args.partitions)
        _create(source, syncs, 1)
        began = time.monotonic()
        _fill(source, target, topic, remote, syncs, args.records, args.partitions, args.size)
        print(f"wrote {args.records} records of {args.size} B to each side in {time.monotonic() - began:.1f}s")
        plain, checked = [], []
        for i in range(args.repeat):
            t0 = time.monotonic()
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(lambda bn: _plain(bn[0], bn[1], args.partitions, args.records),
                              [(source, topic), (target, remote)]))  # fmt: skip
            plain.append(time.monotonic() - t0)
            t0 = time.monotonic()
            report = verify(spec, "bench", engine=args.engine)
            checked.append(time.monotonic() - t0)
            assert report.ok and report.total("checked") == args.records, report.to_json()["summary"]
            print(f"run {i + 1}: plain consumer (both sides) {plain[-1]:.2f}s, verify {checked[-1]:.2f}s")
        result: dict[str, Any] = {
            "engine": args.engine,
            "records": args.records,
            "record_bytes": args.size,
            "partitions": args.partitions,
            "plain_seconds": plain,
            "verify_seconds": checked,
            "plain_records_per_second": round(args.records / statistics.median(plain)),
            "verify_records_per_second": round(args.records / statistics.median(checked)),
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load": os.getloadavg()},
        }
        print(json.dumps(result, indent=2))
        if args.out:
            args.out.write_text(json.dumps(result, indent=2) + "\n")
    finally:
        if homes:
            from reconciler.devenv import kafka_local

            for h in homes:
                kafka_local.stop(h)


if __name__ == "__main__":
    main()
