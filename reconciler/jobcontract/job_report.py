"""The job's status record (`status.json` in its folder): written by the job, read by the runners and `kmirror status`.

One typed record instead of string keys scattered across modules. The job rewrites the whole record atomically
on every change (state, each batch, each restart); readers take what they find and treat a missing or unreadable
file as "no report yet".

Must not: import a Kafka or Spark client; read anything but the one file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, TypedDict

JobState = Literal["starting", "running", "restarting", "stopping", "stopped", "failed"]

#: States in which the job's query runs or is about to run again by itself.
LIVE_STATES: frozenset[str] = frozenset({"starting", "running", "restarting", "stopping"})


class JobReport(TypedDict, total=False):
    """What the job says about itself. Counters are since the job's process started."""

    flow: str
    digest: str
    state: JobState
    pid: int
    host: str
    app_id: str
    query_id: str
    started_at: float
    updated_at: float
    stopped_at: float
    #: The last failure of the query (one line), kept while it restarts; None once a batch succeeds again.
    error: str | None
    #: Query restarts after failures (transient outages included); the job never gives up on its own.
    restarts: int
    records: int
    bytes: int
    batches: int
    last_batch_id: int
    last_batch_at: float
    last_batch_seconds: float
    last_batch_records: int
    last_batch_phases: dict[str, int]
    offset_syncs: int | None
    metrics_port: int
    #: Records the source no longer had when the job reached them (retention, DeleteRecords): skipped.
    data_loss_records: int
    #: Events of data loss: skipped ranges, and topics whose offsets went back (deleted and re-created).
    data_loss_events: int
    #: The last data-loss event, in words.
    data_loss_last: str | None
    #: The Spark execution mode the query runs in ("realtime" or "microbatch"), why, and its task slots.
    mode: str
    mode_reason: str
    task_slots: int
    #: The flow's delivery guarantee the job writes with: "at_least_once" or "exactly_once".
    delivery: str
    #: True once the job left real-time mode because source partitions outgrew its task slots.
    mode_fallback: bool
    #: Where the job started reading: "checkpoint", "offset-syncs" (its checkpoint was missing) or "start_from".
    resumed_from: str
    #: The deployment generation an exactly-once job writes with (the state records it with the deployment).
    generation: int
    #: The newer generation that superseded this exactly-once job: it stopped for good instead of fencing it.
    superseded_by: int
    #: Times another writer of the flow's partitions (a stray task, an older deployment still alive) fenced this
    #: exactly-once job's writers; each time the task failed and its retry took the partition back.
    fenced_writers: int


def read_report(path: Path) -> JobReport:
    """The record at `path`, or an empty one when there is none (yet) or it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}  # type: ignore[return-value]
