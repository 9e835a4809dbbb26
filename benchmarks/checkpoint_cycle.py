"""Checkpoint cycle time for many groups: 200 consumer groups x 50 partitions on real local Kafka clusters.

Uses the clusters of KMIRROR_TEST_SOURCE_BOOTSTRAP / KMIRROR_TEST_TARGET_BOOTSTRAP, or `kmirror dev up`'s
(127.0.0.1:19092 / 127.0.0.1:29092), or `--source/--target`. Under a fresh run prefix it creates one source
topic with P partitions, an offset-syncs topic holding `syncs_per_partition` syncs per partition (as the job
writes them), and G source groups each committed on every partition (through the admin API: EMPTY groups, no
consumers). Then it measures, with the real `Checkpointer`:
  - start: create the checkpoints topic, load checkpoints, read the offset-syncs to the end;
  - the first cycle (G x P checkpoints emitted, and with --sync G groups' offsets written on the target);
  - steady cycles with nothing new (what runs every checkpoint_interval when groups are idle);
  - cycles after every group moved forward on every partition (G x P new checkpoints again).

    .venv/bin/python benchmarks/checkpoint_cycle.py [--groups 200] [--partitions 50] [--sync] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reconciler.core.mm2.wire import OffsetSync
from reconciler.kafka_clients.checkpointer import Checkpointer, CycleReport
from reconciler.spec.loader import load_text


def _commit_all(admin: AdminClient, groups: list[str], topic: str, partitions: int, offset: int) -> None:
    def one(group: str) -> None:
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p, offset) for p in range(partitions)])
        for f in admin.alter_consumer_group_offsets([request], request_timeout=60).values():
            f.result(timeout=90)

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(one, groups))


def _report(r: CycleReport) -> dict[str, Any]:
    return {
        "seconds": round(r.total_seconds, 3),
        "parts": {k: round(v, 3) for k, v in r.seconds.items()},
        "groups": r.groups,
        "partitions": r.partitions,
        "translated": r.translated,
        "emitted": r.emitted,
        "synced_groups": r.synced_groups,
        "failures": len(r.failures),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=os.environ.get("KMIRROR_TEST_SOURCE_BOOTSTRAP", "127.0.0.1:19092"))
    parser.add_argument("--target", default=os.environ.get("KMIRROR_TEST_TARGET_BOOTSTRAP", "127.0.0.1:29092"))
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--records", type=int, default=100_000, help="upstream offsets covered per partition")
    parser.add_argument("--syncs-per-partition", type=int, default=100)
    parser.add_argument("--steady-cycles", type=int, default=3)
    parser.add_argument("--sync", action="store_true", help="also write translated offsets (sync.group_offsets)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    run = uuid.uuid4().hex[:6]
    src, dst = f"bs{run}", f"bd{run}"
    topic = f"bench{run}.events"
    syncs_topic = f"mm2-offset-syncs.{dst}.internal"
    text = f"""
version: 1
clusters:
  {src}: {{bootstrap_servers: "{args.source}"}}
  {dst}: {{bootstrap_servers: "{args.target}"}}
state: {{cluster: {dst}, topic: "_kmirror.state-{run}"}}
flows:
  - name: bench{run}
    source: {src}
    target: {dst}
    topics: {{include: ['bench{run}\\..*']}}
    groups: {{include: ['bench{run}-.*']}}
    sync: {{group_offsets: {str(args.sync).lower()}}}
    heartbeats: {{enabled: false}}
"""
    desired = load_text(text).state
    flow = desired.flows[0]
    source_admin = AdminClient({"bootstrap.servers": args.source})
    for f in source_admin.create_topics(
        [NewTopic(topic, args.partitions, 1), NewTopic(syncs_topic, 1, 1, config={"cleanup.policy": "compact"})],
        request_timeout=60,
    ).values():
        f.result(timeout=90)

    # offset-syncs as the job writes them: every records/syncs upstream offsets, downstream = upstream
    producer = Producer({"bootstrap.servers": args.source, "linger.ms": 20})
    step = max(1, args.records // args.syncs_per_partition)
    for up in range(0, args.records + 1, step):
        for p in range(args.partitions):
            s = OffsetSync(topic, p, up, up)
            producer.produce(syncs_topic, key=s.key_bytes(), value=s.value_bytes())
        producer.poll(0)
    producer.flush(60)

    groups = [f"bench{run}-g{i:03d}" for i in range(args.groups)]
    started = time.monotonic()
    _commit_all(source_admin, groups, topic, args.partitions, args.records // 2 + 7)
    setup_commit = time.monotonic() - started

    cp = Checkpointer(flow, desired.client_config(src), desired.client_config(dst))
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "groups": args.groups,
        "partitions": args.partitions,
        "sync_group_offsets": args.sync,
        "setup_commit_seconds": round(setup_commit, 2),
    }
    try:
        t0 = time.monotonic()
        cp.start()
        result["start_seconds"] = round(time.monotonic() - t0, 3)
        result["first_cycle"] = _report(cp.cycle())
        result["steady_cycles"] = [_report(cp.cycle()) for _ in range(args.steady_cycles)]
        _commit_all(source_admin, groups, topic, args.partitions, args.records // 2 + 5007)
        result["moved_cycle"] = _report(cp.cycle())
    finally:
        cp.close()
    steady = sorted(c["seconds"] for c in result["steady_cycles"])
    summary = (
        f"checkpoint cycle, {args.groups} groups x {args.partitions} partitions "
        f"({args.groups * args.partitions} group-partitions): first {result['first_cycle']['seconds']:.2f}s "
        f"({result['first_cycle']['emitted']} checkpoints), steady {steady[len(steady) // 2]:.2f}s (median), "
        f"all moved {result['moved_cycle']['seconds']:.2f}s ({result['moved_cycle']['emitted']} checkpoints); "
        f"start {result['start_seconds']:.2f}s"
    )
    result["summary"] = summary
    print(json.dumps(result, indent=2))
    print(summary)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
