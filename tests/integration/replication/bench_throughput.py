"""First throughput figure of the replication job: 1 KB records, 6 partitions, with Kafka's own ceiling beside it.

Not a test (pytest does not collect it). Run against two running clusters:

    .venv/bin/python -m tests.integration.replication.bench_throughput SOURCE_BOOTSTRAP TARGET_BOOTSTRAP [RECORDS]

It fills a 6-partition source topic with Kafka's ProducerPerformance (the source-side figure), measures
ProducerPerformance into a 6-partition target topic (the Kafka-side ceiling of the target on this machine),
then deploys the job through LocalRunner and times the copy from the first to the last replicated record
(Spark's start-up excluded). Extra Spark settings: `--conf key=value` (repeatable).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from reconciler.devenv.jars import KAFKA_TARGET_VERSION, kafka_libs
from reconciler.jobcontract.spec import EffectiveSpec
from reconciler.runners import LocalRunner
from reconciler.spec.loader import load_text
from tests.conftest import KafkaCluster
from tests.integration.replication.conftest import create_topic, end_offsets

RECORD_SIZE = 1024
PARTITIONS = 6


def producer_perf(bootstrap: str, topic: str, records: int) -> tuple[float, float]:
    """Kafka's ProducerPerformance (acks=all, idempotent, as the job's sink): (records/s, MB/s)."""
    libs = kafka_libs(KAFKA_TARGET_VERSION)
    cmd = [
        "java", "-Xmx512m", "-cp", f"{libs}/*", "org.apache.kafka.tools.ProducerPerformance",
        "--topic", topic, "--num-records", str(records), "--record-size", str(RECORD_SIZE),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all",
        "enable.idempotence=true", "linger.ms=10", "batch.size=262144",
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    last = out.strip().splitlines()[-1]
    match = re.search(r"([\d.]+) records/sec \(([\d.]+) MB/sec\)", last)
    if match is None:
        raise RuntimeError(f"unexpected ProducerPerformance output: {last}")
    return float(match.group(1)), float(match.group(2))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("records", type=int, nargs="?", default=300_000)
    parser.add_argument("--conf", action="append", default=[])
    args = parser.parse_args()
    source, target = KafkaCluster("source", args.source, None), KafkaCluster("target", args.target, None)
    tag = uuid.uuid4().hex[:6]
    topic, ceiling_topic = f"perf{tag}.data", f"perf{tag}.ceiling"
    create_topic(source, topic, PARTITIONS)
    create_topic(target, ceiling_topic, PARTITIONS)
    src_rate, src_mb = producer_perf(args.source, topic, args.records)
    print(f"source fill (ProducerPerformance into the 3.9 source): {src_rate:,.0f} records/s, {src_mb:.1f} MB/s")
    tgt_rate, tgt_mb = producer_perf(args.target, ceiling_topic, args.records)
    print(f"Kafka ceiling (ProducerPerformance into the 4.x target): {tgt_rate:,.0f} records/s, {tgt_mb:.1f} MB/s")

    conf = "".join(f"    {k}: '{v}'\n" for k, v in (c.split("=", 1) for c in args.conf))
    base = Path(tempfile.mkdtemp(prefix="kmirror-bench-"))
    text = f"""
version: 1
clusters:
  src{tag}: {{bootstrap_servers: "{args.source}"}}
  dst{tag}: {{bootstrap_servers: "{args.target}"}}
state: {{cluster: dst{tag}}}
spark:
  checkpoint_root: checkpoints
  conf:
    spark.kmirror.triggerInterval: '200 milliseconds'
{conf}
flows:
  - name: bench
    source: src{tag}
    target: dst{tag}
    topics: {{include: ["perf{tag}\\\\.data"]}}
"""
    state = load_text(text).state.with_source_path(base / "kmirror.yaml")
    runner = LocalRunner(base, state.spark, root=base)
    remote = state.flow("bench").remote_topic(topic)
    target_cluster = KafkaCluster("target", args.target, None)
    t0 = time.monotonic()
    runner.deploy("bench", EffectiveSpec.of(state, "bench"), state.flow_digest("bench"))
    print(f"job running after {time.monotonic() - t0:.1f}s")
    first = None
    try:
        while True:
            copied = sum(end_offsets(target_cluster, remote).values())
            now = time.monotonic()
            if copied and first is None:
                first = (now, copied)
            if copied >= args.records:
                break
            if now - t0 > 1800:
                raise RuntimeError(f"only {copied} of {args.records} copied after 30 min")
            time.sleep(0.2)
        assert first is not None
        seconds = now - first[0]
        rate = (copied - first[1]) / seconds if seconds > 0 else float("nan")
        print(
            f"kmirror job (local[2], 1 KB, {PARTITIONS} partitions): {copied:,} records; "
            f"{rate:,.0f} records/s, {rate * RECORD_SIZE / 1e6:.1f} MB/s after the first batch landed "
            f"({seconds:.1f}s); {copied / (now - t0):,.0f} records/s including Spark's start-up"
        )
        print(f"job folder: {runner.jobs_dir / 'bench'}")
    finally:
        runner.stop("bench")
    return 0


if __name__ == "__main__":
    sys.exit(main())
