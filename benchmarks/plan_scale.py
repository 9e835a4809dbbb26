"""Plan and apply time at scale: 1,000 and 10,000 source topics on real local Kafka clusters.

Starts a fresh Kafka 3.9 source and 4.x target (or uses KMIRROR_TEST_SOURCE/TARGET_BOOTSTRAP), creates N
source topics with an explicit config each, then measures, in one run:
  - plan wall time (cold: nothing on the target) and AdminClient round trips per cluster,
  - apply wall time (creating N remote topics, recording each in the state topic),
  - re-plan wall time (everything in place: the no-change plan a drift cron runs) and its changes, which must
    be 0: the script exits 1 when they are not, after writing the results (with a sample of the changes).

The flow runs no replication job (`spark.deploy: none`): what is measured is planning and applying topics and
recording them; a Spark job over N topics would only add its start-up to apply and its CPU to the re-plan.

    .venv/bin/python benchmarks/plan_scale.py --topics 1000 10000 [--out benchmarks/results/plan_scale.json]

Goal from the issue: 10,000 topics planned in under 10 s on this (2-core) machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, NewTopic

from reconciler.adapters.live_reader import admins_for
from reconciler.app import operations
from reconciler.devenv import kafka_local
from reconciler.devenv.jars import KAFKA_SOURCE_VERSION, KAFKA_TARGET_VERSION
from reconciler.spec.loader import load_text


def _create_source_topics(bootstrap: str, prefix: str, n: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    started = time.monotonic()
    for i in range(0, n, 500):
        topics = [
            NewTopic(f"{prefix}{j:05d}", 1, 1, config={"retention.ms": str(3_600_000 + j)})
            for j in range(i, min(n, i + 500))
        ]
        for f in admin.create_topics(topics, request_timeout=120, operation_timeout=120).values():
            f.result(timeout=180)
    # A burst of creates reaches the broker's metadata a little later than the create answers; measure the
    # plan only once every topic is visible, so it plans all N.
    deadline = time.monotonic() + 600
    while sum(1 for t in admin.list_topics(timeout=60).topics if t.startswith(prefix)) < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"only some of the {n} topics became visible in metadata within 600 s")
        time.sleep(0.5)
    return time.monotonic() - started


def _spec(source: str, target: str, prefix: str, run: str) -> Any:
    text = f"""
version: 1
clusters:
  src{run}: {{bootstrap_servers: "{source}"}}
  dst{run}: {{bootstrap_servers: "{target}"}}
state: {{cluster: dst{run}, topic: "_kmirror.state-{run}"}}
flows:
  - name: scale-{run}
    source: src{run}
    target: dst{run}
    topics: {{include: ['{prefix}.*']}}
    naming: {{policy: prefix}}
spark: {{deploy: none}}
"""
    return load_text(text).state


def measure(source: str, target: str, n: int) -> dict[str, Any]:
    load_at_start = round(os.getloadavg()[0], 1)
    run = f"{n}x{int(time.time())}"
    prefix = f"scale{run}-"
    create_s = _create_source_topics(source, prefix, n)
    desired = _spec(source, target, prefix, run)

    admins = admins_for(desired, timeout=120)
    started = time.monotonic()
    plan = operations.make_plan(desired, admins=admins, timeout=120)
    plan_s = time.monotonic() - started
    round_trips = {name: a.round_trips for name, a in admins.items()}

    started = time.monotonic()
    result = operations.apply(desired, timeout=120)
    apply_s = time.monotonic() - started
    assert result is not None and not result.failed, result and result.failed[:3]

    admins = admins_for(desired, timeout=120)
    started = time.monotonic()
    replan = operations.make_plan(desired, admins=admins, timeout=120)
    replan_s = time.monotonic() - started
    return {
        "topics": n,
        "load_average_1m_at_start": load_at_start,
        "load_average_1m": round(os.getloadavg()[0], 1),
        "create_source_topics_s": round(create_s, 2),
        "plan_s": round(plan_s, 2),
        "plan_changes": len(plan.changes),
        "plan_round_trips": round_trips,
        "apply_s": round(apply_s, 2),
        "apply_changes_per_s": round(len(result.outcomes) / apply_s, 1),
        "replan_s": round(replan_s, 2),
        "replan_changes": len(replan.changes),
        "replan_summary": replan.summary.model_dump(),
        "replan_sample": [f"{c.action.value} {c.address}: {c.reason}" for c in replan.changes[:10]],
        "replan_round_trips": {name: a.round_trips for name, a in admins.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/plan_scale.json"))
    args = parser.parse_args()

    source = os.environ.get("KMIRROR_TEST_SOURCE_BOOTSTRAP")
    target = os.environ.get("KMIRROR_TEST_TARGET_BOOTSTRAP")
    homes: list[Path] = []
    if not (source and target):
        root = Path(tempfile.mkdtemp(prefix="kmirror-plan-scale-"))
        opts = kafka_local.BrokerOptions(heap="2g")
        src = kafka_local.start("source", KAFKA_SOURCE_VERSION, root / "source", opts)
        dst = kafka_local.start("target", KAFKA_TARGET_VERSION, root / "target", opts)
        source, target, homes = src.bootstrap_servers, dst.bootstrap_servers, [root / "source", root / "target"]
    try:
        results = []
        for n in args.topics:
            r = measure(source, target, n)
            results.append(r)
            print(
                f"{n:>6} topics: plan {r['plan_s']:.2f}s ({r['plan_changes']} changes, round trips "
                f"{r['plan_round_trips']}), apply {r['apply_s']:.1f}s ({r['apply_changes_per_s']} changes/s), "
                f"no-change re-plan {r['replan_s']:.2f}s ({r['replan_changes']} changes); "
                f"1-min load average {r['load_average_1m_at_start']} at start, {r['load_average_1m']} at end",
                flush=True,
            )
            for line in r["replan_sample"]:
                print(f"        re-plan change: {line}", flush=True)
    finally:
        for home in homes:
            kafka_local.stop(home)
    doc = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "kafka": {"source": KAFKA_SOURCE_VERSION, "target": KAFKA_TARGET_VERSION},
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")
    if any(r["replan_changes"] for r in results):
        raise SystemExit("FAIL: a no-change re-plan right after apply planned changes (see replan_sample)")


if __name__ == "__main__":
    main()
