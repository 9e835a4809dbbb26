"""`python -m benchmarks.schema_ids`: the replication job's throughput with schema id translation against the same run
without it, on 1 KB Avro records in the Confluent wire format (magic byte 0, 4-byte id).

Starts its own Kafka pair and two schema registries (Apicurio, as `kmirror dev up --schema-registry`) under a
temporary folder, fills two source topics with the same records (schema registered on the source; unrelated schemas
on the target first, so every id is rewritten), then runs `--repeat` interleaved pairs of the real job (LocalRunner,
the path `kmirror apply` takes): one flow without `sync.schemas`, one with (odd pairs in the other order). Each copy
window is timed on the target from 10 % to 90 % of the records (the job's start and its last batch are outside it).
Writes JSON with each run's records/s, the ratios (with / without) as median and spread, and the machine's load
average and CPU count.

Must not: be imported by kmirror (a benchmark, not production code).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

SCHEMA = {
    "type": "record",
    "name": "Payment",
    "fields": [{"name": "id", "type": "long"}, {"name": "body", "type": "string"}],
}


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _record(schema_id: int, i: int, size: int) -> bytes:
    body = (f"{i:012d}" * (size // 12 + 1))[: size - 20].encode()
    return b"\x00" + struct.pack(">I", schema_id) + _zigzag(i) + _zigzag(len(body)) + body


def _register(url: str, subject: str, schema: dict[str, Any]) -> int:
    request = urllib.request.Request(
        f"{url}/subjects/{subject}/versions",
        data=json.dumps({"schema": json.dumps(schema)}).encode(),
        method="POST",
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(json.loads(response.read())["id"])


def _fill(bootstrap: str, topic: str, partitions: int, records: int, schema_id: int, size: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20, "acks": "1"})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=_record(schema_id, i, size), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def _count(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return 0
        total = 0
        for p in meta.partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high
        return total
    finally:
        consumer.close()


def _run(work: Path, name: str, clusters: dict[str, Any], topic: str, records: int, schemas: bool) -> dict[str, Any]:
    from reconciler.runners import LocalRunner
    from reconciler.spec.loader import load_text

    folder = work / name
    folder.mkdir()
    doc = {
        "version": 1,
        "clusters": clusters,
        "state": {"cluster": "dst"},
        "spark": {"deploy": "local", "master": "local[2]", "checkpoint_root": "checkpoints"},
        "flows": [
            {
                "name": name,
                "source": "src",
                "target": "dst",
                "topics": {"include": [topic]},
                "heartbeats": {"enabled": False},
                "offsets": {"emit_checkpoints": False},
                "sync": {"acls": False, "configs": False, "schemas": schemas},
            }
        ],
    }
    (folder / "kmirror.yaml").write_text(json.dumps(doc, indent=2))
    state = load_text(json.dumps(doc)).state.with_source_path(folder / "kmirror.yaml")
    runner = LocalRunner(folder, state.spark, root=folder, stop_timeout=60, start_timeout=300)
    bootstrap = str(clusters["dst"]["bootstrap_servers"])
    remote = f"src.{topic}"
    marks: dict[str, float] = {}
    load_before = os.getloadavg()
    runner.deploy(name, state.flow_effective_spec(name), state.flow_digest(name))
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            n = _count(bootstrap, remote)
            now = time.monotonic()
            if n >= records * 0.1 and "p10" not in marks:
                marks["p10"], marks["n10"] = now, n
            if n >= records * 0.9 and "p90" not in marks:
                marks["p90"], marks["n90"] = now, n
            if n >= records:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"{name}: the target did not get {records} records in 15 minutes")
    finally:
        runner.stop(name)
    rate = (marks["n90"] - marks["n10"]) / (marks["p90"] - marks["p10"])
    return {
        "run": name,
        "schemas": schemas,
        "records_per_s": round(rate),
        "window_s": round(marks["p90"] - marks["p10"], 2),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3, help="interleaved pairs (odd pairs translate first)")
    parser.add_argument("-o", "--output", type=Path, default=None)
    args = parser.parse_args(argv)

    from reconciler.artifacts.jars import KAFKA_SOURCE_VERSION, KAFKA_TARGET_VERSION
    from reconciler.devenv import kafka_local, schema_registry

    work = Path(tempfile.mkdtemp(prefix="kmirror-bench-schemas-"))
    with ThreadPoolExecutor(4) as pool:
        kafka = [
            pool.submit(kafka_local.start, "src", KAFKA_SOURCE_VERSION, work / "src"),
            pool.submit(kafka_local.start, "dst", KAFKA_TARGET_VERSION, work / "dst"),
        ]
        registries = [pool.submit(schema_registry.start, n, work / n) for n in ("src", "dst")]
        src, dst = (f.result() for f in kafka)
        src_sr, dst_sr = (f.result() for f in registries)
    try:
        for i in range(5):  # the target's ids mean other schemas: every record's id is rewritten
            _register(dst_sr.url, f"unrelated-{i}-value", {"type": "enum", "name": f"U{i}", "symbols": ["A"]})
        topics = [f"payments-{i}" for i in range(2 * args.repeat)]
        schema_id = 0
        for topic in topics:
            schema_id = _register(src_sr.url, f"{topic}-value", SCHEMA)
            _fill(src.bootstrap_servers, topic, args.partitions, args.records, schema_id, args.record_size)
        clusters = {
            "src": {"bootstrap_servers": src.bootstrap_servers, "schema_registry": {"url": src_sr.url}},
            "dst": {"bootstrap_servers": dst.bootstrap_servers, "schema_registry": {"url": dst_sr.url}},
        }
        runs = []
        rates: dict[tuple[int, bool], int] = {}
        for pair in range(args.repeat):
            # Odd pairs run the translating job first: a drift of the machine's load within a pair does not
            # always favour the same side.
            order = (False, True) if pair % 2 == 0 else (True, False)
            for j, schemas in enumerate(order):
                name = f"{'with' if schemas else 'without'}-{pair}"
                runs.append(_run(work, name, clusters, topics[2 * pair + j], args.records, schemas))
                rates[(pair, schemas)] = runs[-1]["records_per_s"]
                print(json.dumps(runs[-1]), file=sys.stderr)
        ratios = [rates[(p, True)] / rates[(p, False)] for p in range(args.repeat)]
        report = {
            "records": args.records,
            "record_size": args.record_size,
            "partitions": args.partitions,
            "runs": runs,
            "ratio_with_over_without": round(statistics.median(ratios), 3),
            "ratios_spread": [round(min(ratios), 3), round(max(ratios), 3)],
            "cpus": os.cpu_count(),
            "loadavg_end": os.getloadavg(),
        }
        text = json.dumps(report, indent=2)
        print(text)
        if args.output:
            args.output.write_text(text + "\n")
    finally:
        for name in ("src", "dst"):
            schema_registry.stop(work / name)
        kafka_local.stop(work / "src")
        kafka_local.stop(work / "dst")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
