"""`kmirror dev demo`: the main job end to end on the local clusters, as a new user first sees it.

Writes a desired-state file for the running dev clusters (a Kafka 3.9 `source` migrating to a 4.x `target`,
identity naming, group offsets synced), creates example topics with data and a consumer group half-way
through on the source, then runs the real commands: `kmirror plan`, `kmirror apply --auto-approve` (which
deploys the PySpark replication job), and `kmirror status` until the lag is zero. Everything it starts keeps
running for the user to explore; `kmirror dev down` stops the job and the clusters.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from reconciler.devenv import dev_clusters
from reconciler.jobcontract.layout import local_job_folder, local_state_keys
from reconciler.spec.defaults import DEFAULT_STATE_TOPIC

FLOW = "source-to-target"
TOPICS = {"demo.orders": (6, {"retention.ms": "604800000"}), "demo.payments": (3, {"cleanup.policy": "compact"})}
RECORDS_PER_TOPIC = 20_000
GROUP = "demo-billing"


def demo_dir(root: Path) -> Path:
    return root / "demo"


def spec_text(source: str, target: str) -> str:
    return f"""\
# yaml-language-server: $schema=../../../schemas/kmirror.schema.json
# Written by `kmirror dev demo`: migrate the local Kafka 3.9 cluster to the local 4.x cluster.
version: 1
clusters:
  source: {{bootstrap_servers: "{source}"}}
  target: {{bootstrap_servers: "{target}"}}
state: {{cluster: target}}
spark: {{deploy: local, checkpoint_root: .kmirror/checkpoints}}
flows:
  - name: {FLOW}
    source: source
    target: target
    topics: {{include: ['demo\\..*']}}
    groups: {{include: ['demo-.*']}}
    naming: {{policy: identity}}
    sync: {{configs: true, acls: true, group_offsets: true}}
    offsets: {{offset_lag_max: 100, checkpoint_interval: 5s}}
    heartbeats: {{enabled: true, interval: 1s}}
"""


def run(root: Path, say: Callable[[str], None] = print) -> Path:
    clusters = {c.name: c for c in dev_clusters.up(root)}
    source, target = clusters["source"].bootstrap_servers, clusters["target"].bootstrap_servers
    folder = demo_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "kmirror.yaml"
    spec.write_text(spec_text(source, target))
    say(f"\n== desired state: {spec}")
    _seed(source, say)

    kmirror = [sys.executable, "-m", "reconciler.cli"]
    apply_title = "kmirror apply --auto-approve  (creates the topics, deploys the PySpark job)"
    for title, args in (
        ("kmirror plan", ["plan", "-f", str(spec)]),
        (apply_title, ["apply", "-f", str(spec), "--auto-approve"]),
    ):
        say(f"\n== {title}")
        result = subprocess.run([*kmirror, *args], cwd=folder, check=False)
        if result.returncode != 0:
            raise SystemExit(f"`kmirror {' '.join(args)}` failed (exit {result.returncode})")

    say("\n== kmirror status  (until the lag is 0 and the consumer group is translated)")
    deadline = time.monotonic() + 420
    while True:
        out = subprocess.run([*kmirror, "status", "-f", str(spec)], cwd=folder, capture_output=True, text=True)
        say(out.stdout.rstrip())
        if "cutover: ready" in out.stdout and "records copied" in out.stdout:
            break
        if time.monotonic() > deadline:
            logs = [local_job_folder(k, FLOW).log for k in local_state_keys(DEFAULT_STATE_TOPIC)]
            log = max((p for p in logs if p.exists()), key=lambda p: p.stat().st_mtime, default="the job's driver.log")
            raise SystemExit(f"the flow was not ready (lag 0, groups translated) within 7 minutes; see {log}")
        time.sleep(5)
    say(
        "\nReplication runs. Try:\n"
        f"  kmirror status -f {spec} --watch 2\n"
        f"  kmirror plan -f {spec} --detailed-exitcode      # 0: nothing to change\n"
        f"  kmirror cutover -f {spec} --flow {FLOW} --dry-run\n"
        "  kmirror dev down                                   # stops the job and both clusters"
    )
    return spec


def _seed(bootstrap: str, say: Callable[[str], None]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=30).topics
    new = [NewTopic(t, p, 1, config=c) for t, (p, c) in TOPICS.items() if t not in existing]
    for f in admin.create_topics(new, request_timeout=30).values() if new else ():
        f.result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    for topic in TOPICS:
        for i in range(RECORDS_PER_TOPIC):
            producer.produce(topic, key=f"k{i % 1000}".encode(), value=f"{topic} #{i}".encode(),
                             headers=[("seq", str(i).encode())])  # fmt: skip
            if i % 10_000 == 0:
                producer.poll(0)
    producer.flush(60)
    say(f"== source: {', '.join(TOPICS)} with {RECORDS_PER_TOPIC:,} more records each")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    consumer.assign([TopicPartition("demo.orders", p, 0) for p in range(TOPICS["demo.orders"][0])])
    read = 0
    while read < RECORDS_PER_TOPIC // 2:
        msgs = consumer.consume(1000, timeout=5)
        if not msgs:
            break
        read += len(msgs)
    consumer.commit(asynchronous=False)
    consumer.close()
    say(f"== source: consumer group {GROUP} read {read:,} of demo.orders and committed (half-way)")
