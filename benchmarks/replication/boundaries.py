"""Where a real-time checkpoint boundary's time goes, from Spark's event logs.

    python -m benchmarks.replication.boundaries EVENTLOG_DIR

EVENTLOG_DIR is a `spark.eventLog.dir` of a benchmark run (`--kmirror-conf spark.eventLog.enabled=true
--kmirror-conf spark.eventLog.dir=DIR`, the folder must exist). For each application in it (one per replicator run,
in start order), per batch: how far apart its tasks ended (they share one deadline), the time from the last task's
end to the next batch's first task launch (the driver's commit, offsets, offset log and planning: records wait
meanwhile), and Spark's own per-phase durations of that batch besides `addBatch`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Batch:
    launches: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)


def events(app: Path) -> list[dict[str, Any]]:
    """The application's events, rolled files in order (zstd-compressed or plain)."""
    lines: list[str] = []
    for part in sorted(app.glob("events_*"), key=lambda p: int(p.name.split("_")[1])):
        if part.suffix == ".zstd":
            text = subprocess.run(["zstd", "-dc", str(part)], capture_output=True, check=True).stdout.decode()
        else:
            text = part.read_text()
        lines.extend(text.splitlines())
    return [json.loads(line) for line in lines if line.strip()]


def analyse(app: Path) -> dict[str, Any]:
    jobs: dict[int, Batch] = defaultdict(Batch)
    stage_job: dict[int, int] = {}
    phases: list[dict[str, int]] = []
    for e in events(app):
        kind = e["Event"]
        if kind == "SparkListenerJobStart":
            stage_job.update({stage: e["Job ID"] for stage in e["Stage IDs"]})
        elif kind == "SparkListenerTaskStart":
            jobs[stage_job[e["Stage ID"]]].launches.append(e["Task Info"]["Launch Time"])
        elif kind == "SparkListenerTaskEnd":
            jobs[stage_job[e["Stage ID"]]].ends.append(e["Task Info"]["Finish Time"])
        elif kind.endswith("QueryProgressEvent"):
            durations = e["progress"]["durationMs"]
            phases.append({k: v for k, v in durations.items() if k not in ("addBatch", "triggerExecution")})
    spreads, gaps = [], []
    last_end: int | None = None
    for _, batch in sorted(jobs.items()):
        if last_end is not None and batch.launches:
            gaps.append(min(batch.launches) - last_end)
        if batch.ends:
            spreads.append(max(batch.ends) - min(batch.ends))
            last_end = max(batch.ends)
    return {"app": app.name, "task_end_spread_ms": spreads, "last_end_to_next_launch_ms": gaps, "phases_ms": phases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("eventlog_dir", type=Path)
    args = parser.parse_args()
    apps = sorted(args.eventlog_dir.glob("eventlog_v2_*"), key=lambda p: p.stat().st_mtime)
    if not apps:
        raise SystemExit(f"no Spark event log (eventlog_v2_*) in {args.eventlog_dir}")
    for app in apps:
        result = analyse(app)
        print(result["app"])
        print(f"  task ends spread (ms):              {result['task_end_spread_ms']}")
        print(f"  last task end -> next launch (ms):  {result['last_end_to_next_launch_ms']}")
        for i, phases in enumerate(result["phases_ms"]):
            print(f"  batch {i}: {phases}")


if __name__ == "__main__":
    main()
