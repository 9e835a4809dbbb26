"""`python -m benchmarks.schema_ids`: the replication job's throughput with schema id translation against the same run
without it, on 1 KB Avro records in the Confluent wire format (magic byte 0, 4-byte id).

Starts its own Kafka pair and two schema registries (Apicurio, as `kmirror dev up --schema-registry`) under a
temporary folder (removed at the end unless `--keep`), fills **one** source topic (schema registered on the source;
unrelated schemas on the target first, so every id is rewritten), then runs `--repeat` interleaved pairs of the
real job (LocalRunner, the path `kmirror apply` takes) over that same topic: one flow without `sync.schemas`, one
with (odd pairs in the other order). Every run reads the same records from the same log (same page-cache state),
and the remote topic is deleted after each run, so the target holds one copy at a time. Each copy window is timed
on the target from 10 % to 90 % of the records (the job's start and its last records are outside it), with one
watermark client kept open for the whole run; over the same window the job's CPU (its process tree, from /proc) and
the machine's (load average, CPU used by processes this benchmark did not start) are recorded. `--jfr` records
each job with Java Flight Recorder and counts the window's execution samples of the task threads, and those in
`SchemaIds`. Writes JSON with each run's records/s and CPU seconds per million records, the ratios (with /
without) as median and spread.

Must not: be imported by kmirror (a benchmark, not production code).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
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


class _Counter:
    """Records on the target's topic (the sum of its partitions' high watermarks), through one client kept open."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-count"})
        self.partitions: dict[str, list[int]] = {}

    def count(self, topic: str) -> int:
        from confluent_kafka import TopicPartition

        if not self.partitions.get(topic):
            meta = self.consumer.list_topics(topic, timeout=10).topics.get(topic)
            if meta is None or meta.error is not None or not meta.partitions:
                return 0
            self.partitions[topic] = sorted(meta.partitions)
        return sum(
            self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in self.partitions[topic]
        )

    def forget(self, topic: str) -> None:
        self.partitions.pop(topic, None)

    def close(self) -> None:
        self.consumer.close()


def _delete_topic(bootstrap: str, topic: str, timeout: float = 120) -> None:
    """Delete `topic` and wait until the cluster no longer lists it (the next run's job creates it afresh)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=60)[topic].result(timeout=90)
    deadline = time.monotonic() + timeout
    while topic in admin.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} still listed {timeout:.0f}s after its deletion")
        time.sleep(0.5)


def _window_samples(jfr: Path, since: float, until: float) -> dict[str, Any]:
    """Execution samples of the job's task threads between two wall-clock times, and how many of them were in
    SchemaIds (`jfr print`; a sample is a running Java thread's stack, every 10-20 ms with the `profile`
    settings)."""
    from datetime import datetime

    printed = subprocess.run(
        ["jfr", "print", "--json", "--events", "jdk.ExecutionSample", str(jfr)],
        capture_output=True,
        text=True,
        check=True,
    )
    tasks = translating = 0
    for event in json.loads(printed.stdout)["recording"]["events"]:
        values = event["values"]
        at = datetime.fromisoformat(values["startTime"].replace("Z", "+00:00")[:26] + "+00:00").timestamp()
        thread = (values.get("sampledThread") or {}).get("javaName") or ""
        if not since <= at <= until or not thread.startswith("Executor task launch worker"):
            continue
        tasks += 1
        frames = (values.get("stackTrace") or {}).get("frames") or []
        translating += any(f["method"]["type"]["name"].endswith("/SchemaIds") for f in frames)
    return {
        "task_samples": tasks,
        "schema_ids_samples": translating,
        "schema_ids_share": round(translating / tasks, 4) if tasks else None,
    }


def _run(
    work: Path,
    name: str,
    clusters: dict[str, Any],
    topic: str,
    records: int,
    schemas: bool,
    counter: _Counter,
    jfr: bool,
) -> dict[str, Any]:
    from benchmarks.replication.measure import MachineMark, between, thread_cpu, tree_cpu
    from reconciler.jobcontract.spec import EffectiveSpec
    from reconciler.runners import LocalRunner
    from reconciler.spec.loader import load_text

    folder = work / name
    folder.mkdir()
    conf = {}
    recording = work / f"{name}.jfr"
    if jfr:
        conf["spark.driver.extraJavaOptions"] = (
            f"-XX:StartFlightRecording=settings=profile,dumponexit=true,filename={recording}"
        )
    doc = {
        "version": 1,
        "clusters": clusters,
        "state": {"cluster": "dst"},
        "spark": {"deploy": "local", "master": "local[2]", "checkpoint_root": "checkpoints", "conf": conf},
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
    runner = LocalRunner(folder, state.spark, root=folder, stop_timeout=120, start_timeout=300)
    bootstrap = str(clusters["dst"]["bootstrap_servers"])
    remote = f"src.{topic}"
    marks: dict[str, Any] = {}
    deployed = runner.deploy(name, EffectiveSpec.of(state, name), state.flow_digest(name))
    assert deployed.pid is not None and deployed.folder is not None
    job = [deployed.pid]
    status_file = Path(deployed.folder) / "status.json"
    try:
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            n = counter.count(remote)
            for share in (10, 90):
                if n >= records * share / 100 and f"n{share}" not in marks:
                    marks[f"n{share}"], marks[f"cpu{share}"] = n, tree_cpu(job)
                    marks[f"threads{share}"] = thread_cpu(job[0])  # spark-submit execs the driver's JVM
                    marks[f"m{share}"], marks[f"t{share}"] = MachineMark.now(), time.time()
            if n >= records:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"{name}: the target did not get {records} records in 30 minutes")
        status = json.loads(status_file.read_text())
    finally:
        runner.stop(name)
        counter.forget(remote)
        _delete_topic(bootstrap, remote)
    copied = marks["n90"] - marks["n10"]
    window = marks["m90"].at - marks["m10"].at
    machine = between(marks["m10"], marks["m90"], os.cpu_count() or 1)
    run = {
        "run": name,
        "schemas": schemas,
        "mode": status.get("mode"),
        "task_slots": status.get("task_slots"),
        "records_per_s": round(copied / window),
        "window_s": round(window, 2),
        "job_cpu_s_per_million": round((marks["cpu90"] - marks["cpu10"]) / copied * 1e6, 2),
        "loadavg_before": machine["loadavg_before"],
        "loadavg_after": machine["loadavg_after"],
        "foreign_cpu_share": machine["foreign_cpu_share"],
        "jvm_threads_cpu_s_per_million": _thread_groups(marks["threads10"], marks["threads90"], copied),
    }
    if jfr and recording.exists():
        run["profile"] = {"jfr": str(recording), **_window_samples(recording, marks["t10"], marks["t90"])}
    return run


def _thread_groups(before: dict[str, float], after: dict[str, float], records: int, top: int = 10) -> dict[str, float]:
    """The JVM's thread groups that used the most CPU between two /proc readings, in seconds per million records."""
    used = {name: after[name] - before.get(name, 0.0) for name in after}
    busiest = sorted(used.items(), key=lambda kv: -kv[1])[:top]
    return {name: round(seconds / records * 1e6, 2) for name, seconds in busiest}


def _summary(values: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(values), 3), "spread": [round(min(values), 3), round(max(values), 3)]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the source topic (copied per run)")
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3, help="interleaved pairs (odd pairs translate first)")
    parser.add_argument("--jfr", action="store_true", help="record each job with JFR; count SchemaIds' samples")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (clusters' data, jobs, JFR files)")
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
    counter = _Counter(dst.bootstrap_servers)
    try:
        for i in range(5):  # the target's ids mean other schemas: every record's id is rewritten
            _register(dst_sr.url, f"unrelated-{i}-value", {"type": "enum", "name": f"U{i}", "symbols": ["A"]})
        topic = "payments"
        schema_id = _register(src_sr.url, f"{topic}-value", SCHEMA)
        _fill(src.bootstrap_servers, topic, args.partitions, args.records, schema_id, args.record_size)
        clusters = {
            "src": {"bootstrap_servers": src.bootstrap_servers, "schema_registry": {"url": src_sr.url}},
            "dst": {"bootstrap_servers": dst.bootstrap_servers, "schema_registry": {"url": dst_sr.url}},
        }
        runs = []
        by_pair: dict[tuple[int, bool], dict[str, Any]] = {}
        for pair in range(args.repeat):
            # Odd pairs run the translating job first: a drift of the machine's load within a pair does not
            # always favour the same side.
            order = (False, True) if pair % 2 == 0 else (True, False)
            for schemas in order:
                name = f"{'with' if schemas else 'without'}-{pair}"
                runs.append(_run(work, name, clusters, topic, args.records, schemas, counter, args.jfr))
                by_pair[(pair, schemas)] = runs[-1]
                print(json.dumps(runs[-1]), file=sys.stderr)
        pairs = range(args.repeat)

        def ratios(key: str) -> list[float]:
            return [by_pair[(p, True)][key] / by_pair[(p, False)][key] for p in pairs]

        rate, cpu = ratios("records_per_s"), ratios("job_cpu_s_per_million")
        report = {
            "records": args.records,
            "record_size": args.record_size,
            "partitions": args.partitions,
            "design": "one source topic read by every run; remote topic deleted after each run",
            "runs": runs,
            "ratio_with_over_without": _summary(rate)["median"],
            "ratios_spread": _summary(rate)["spread"],
            "cpu_per_record_with_over_without": _summary(cpu),
            "windows_s": [min(r["window_s"] for r in runs), max(r["window_s"] for r in runs)],
            "loadavg_1min": [min(r["loadavg_before"][0] for r in runs), max(r["loadavg_after"][0] for r in runs)],
            "cpus": os.cpu_count(),
            "loadavg_end": os.getloadavg(),
        }
        text = json.dumps(report, indent=2)
        print(text)
        if args.output:
            args.output.write_text(text + "\n")
    finally:
        counter.close()
        for name in ("src", "dst"):
            schema_registry.stop(work / name)
        kafka_local.stop(work / "src")
        kafka_local.stop(work / "dst")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)  # a 4M-record run leaves gigabytes per cluster otherwise
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
