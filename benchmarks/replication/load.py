"""The load: Kafka's perf tools (filling the source, the ceiling), a librdkafka producer filling it with records
that carry headers (`_fill`: the perf producer sends none), the steady-rate producer of the latency runs and the
soak (`_pace`), and the plain librdkafka copy loop of the ceiling (`_copy`).

`_fill`, `_pace` and `_copy` run as their own processes (`python -m benchmarks.replication.load _pace ...`), so
that their CPU is theirs (wait4's rusage) and they do not share this process's GIL with the latency readers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from benchmarks.replication.common import (
    SINK_PRODUCER,
    Cluster,
    Workload,
    end_offsets_by_topic,
    java,
    partitions_of,
    total_end_offsets,
    worker_command,
)
from benchmarks.replication.measure import run_measured
from reconciler.devenv.jars import KAFKA_TARGET_VERSION, kafka_libs


def producer_perf(bootstrap: str, topic: str, records: int, size: int, props: dict[str, str]) -> list[str]:
    libs = kafka_libs(KAFKA_TARGET_VERSION)
    return [
        java(), "-Xmx512m", "-cp", f"{libs}/*", "org.apache.kafka.tools.ProducerPerformance",
        "--topic", topic, "--num-records", str(records), "--record-size", str(size), "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}", *(f"{k}={v}" for k, v in props.items()),
    ]  # fmt: skip


def parse_producer_perf(out: str) -> float:
    match = re.search(r"([\d.]+) records/sec", out.strip().splitlines()[-1])
    if match is None:
        raise RuntimeError(f"unexpected ProducerPerformance output: {out[-500:]}")
    return float(match.group(1))


def consumer_perf(bootstrap: str, records: int, pattern: str) -> list[str]:
    libs = kafka_libs(KAFKA_TARGET_VERSION)
    return [
        java(), "-Xmx512m", "-cp", f"{libs}/*", "org.apache.kafka.tools.ConsumerPerformance",
        "--bootstrap-server", bootstrap, "--include", pattern, "--num-records", str(records),
        "--timeout", "60000", "--group", f"perf-{time.time_ns()}",
    ]  # fmt: skip


def parse_consumer_perf(out: str) -> dict[str, float]:
    """ConsumerPerformance's CSV row, wherever its header is (warnings may follow it)."""
    lines = [ln for ln in out.strip().splitlines() if ln.strip()]
    at = next((i for i, ln in enumerate(lines) if "nMsg.sec" in ln and i + 1 < len(lines)), None)
    if at is None:
        raise RuntimeError(f"unexpected ConsumerPerformance output: {out[-500:]}")
    header = [h.strip() for h in lines[at].split(",")]
    values = [v.strip() for v in lines[at + 1].split(",")]
    row = dict(zip(header, values, strict=False))
    return {"records_per_s": float(row["nMsg.sec"]), "fetch_records_per_s": float(row["fetch.nMsg.sec"])}


def fill_source(source: Cluster, wl: Workload) -> dict[str, Any]:
    """Load the source with `wl` (the perf producer, topic by topic), and check it holds every record."""
    started = time.monotonic()
    fill_cpu = 0.0
    for topic in wl.data_topics:
        if wl.headers:
            cmd = _fill_command(source, topic, wl.per_topic, wl)
        else:
            cmd = producer_perf(source.bootstrap, topic, wl.per_topic, wl.record_size, SINK_PRODUCER)
        _, cpu = run_measured(cmd)
        fill_cpu += cpu
    # The perf tool reports what it sent, not what the source kept: a record it timed out on a loaded machine would
    # leave every replicator's copy waiting for a count the source never had. (Once, loading 240 partitions, it
    # lost 253 of 1,000,000.) A topic left short is topped up by the librdkafka producer, which waits for every
    # acknowledgement: the records are random values without keys either way, and every replicator copies the
    # same set.
    admin = source.admin()
    held_by_topic = end_offsets_by_topic(admin, wl.data_topics)
    if held_by_topic is None:
        raise RuntimeError("a source partition has no leader after the fill; run the benchmark again")
    topped_up = 0
    for topic in wl.data_topics:
        short = wl.per_topic - held_by_topic.get(topic, 0)
        if short > 0:
            _, cpu = run_measured(_fill_command(source, topic, short, wl))
            fill_cpu += cpu
            topped_up += short
    fill = time.monotonic() - started
    held = total_end_offsets(admin, wl.data_topics)
    if held != wl.records:
        raise RuntimeError(f"the source holds {held:,} of the {wl.records:,} records loaded; run the benchmark again")
    return {
        "records_per_s_incl_jvm_start": round(wl.records / fill),
        "seconds": round(fill, 1),
        "producer_cpu_s": round(fill_cpu, 1),
        "topped_up_records": topped_up,
    }


def _fill_command(source: Cluster, topic: str, records: int, wl: Workload) -> list[str]:
    """The `_fill` worker loading `records` of `wl`'s records into `topic`."""
    return worker_command(
        "_fill", "--source", source.bootstrap, "--topic", topic, "--records", str(records),
        "--size", str(wl.record_size), "--headers", str(wl.headers),
    )  # fmt: skip


# -- workers (run as child processes) ---------------------------------------------------------------------------


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
            produce_waiting(
                producer,
                0.05,
                f"{args.prefix}{m.topic()}",
                m.value(),
                m.key(),
                partition=m.partition(),
                timestamp=m.timestamp()[1],
                headers=m.headers(),
            )
        producer.poll(0)
        copied += len(msgs)
    remaining = producer.flush(120)
    seconds = time.monotonic() - first
    consumer.close()
    print(json.dumps({"records": copied, "seconds": seconds, "unflushed": remaining}))
    return 0


def produce_waiting(producer: Producer, wait_s: float, *args: Any, **kwargs: Any) -> None:
    """`producer.produce(*args, **kwargs)`, serving deliveries for `wait_s` at a time while the local queue is full."""
    while True:
        try:
            producer.produce(*args, **kwargs)
            return
        except BufferError:
            producer.poll(wait_s)


def record_headers(count: int) -> list[tuple[str, bytes]]:
    """`count` headers the size of a trace context each (`traceparent`-like: an 11-byte key, a 55-byte value)."""
    return [(f"bench-h{i:04d}", os.urandom(55)) for i in range(count)]


def fill_worker(args: argparse.Namespace) -> int:
    """Produce `records` records of `size` random bytes with `headers` headers each, no key, as the perf producer
    does (its settings: SINK_PRODUCER), and wait for every acknowledgement."""
    producer = Producer({"bootstrap.servers": args.source, **SINK_PRODUCER})
    value = os.urandom(args.size)
    headers = record_headers(args.headers)
    failed = 0

    def acked(err: Any, _msg: Any) -> None:
        nonlocal failed
        failed += err is not None

    for _ in range(args.records):
        produce_waiting(producer, 0.05, args.topic, value, headers=headers, on_delivery=acked)
        producer.poll(0)
    remaining = producer.flush(120)
    if remaining or failed:
        print(f"{failed} records failed, {remaining} unflushed", file=sys.stderr)
        return 1
    return 0


def pace_worker(args: argparse.Namespace) -> int:
    """Produce at a steady rate (records/s) for some seconds, in 10 ms ticks; the record's CreateTime is its send
    time. Prints the records sent, the seconds, and the records sent in each minute (the soak's offered load)."""
    producer = Producer({"bootstrap.servers": args.source, "linger.ms": 5, "acks": "all"})
    value = os.urandom(args.size)
    per_tick = max(1, args.rate // 100)
    start = time.monotonic()
    sent = 0
    tick = 0
    per_minute: list[int] = []
    while time.monotonic() - start < args.seconds:
        for _ in range(per_tick):
            produce_waiting(producer, 0.01, args.topic, value)  # a wait here lowers the rate: the broker is behind
        sent += per_tick
        minute = int((time.monotonic() - start) // 60)
        while len(per_minute) <= minute:
            per_minute.append(0)
        per_minute[minute] += per_tick
        producer.poll(0)
        tick += 1
        delay = start + tick / 100 - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    producer.flush(60)
    print(json.dumps({"records": sent, "seconds": time.monotonic() - start, "sent_per_minute": per_minute}))
    return 0


def worker_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("worker", choices=["_copy", "_fill", "_pace"])
    p.add_argument("--source", required=True)
    p.add_argument("--target")
    p.add_argument("--topics")
    p.add_argument("--topic")
    p.add_argument("--prefix", default="")
    p.add_argument("--records", type=int)
    p.add_argument("--rate", type=int)
    p.add_argument("--seconds", type=float)
    p.add_argument("--size", type=int)
    p.add_argument("--headers", type=int, default=0)
    args = p.parse_args(argv)
    workers = {"_copy": copy_loop_worker, "_fill": fill_worker, "_pace": pace_worker}
    return workers[args.worker](args)


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
