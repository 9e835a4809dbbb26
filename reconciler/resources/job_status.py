"""How the flows' replication jobs run, as their runners report it: the planner's third input, besides the
desired and the live state, and what `kmirror status` shows.

Must not: import a runner, the job or a client (runners build these values; the planner reads them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class JobInfo:
    """What a job runner knows about one flow's replication job, from the runner's own API (never the checkout)."""

    flow: str
    #: None: the runner cannot tell from here (a local job on another host); the planner changes nothing then.
    running: bool | None
    spec_digest: str | None = None
    runner: str = "local"
    detail: str = ""
    #: The job's own state (`jobcontract.status.JobState`), when it reported one.
    state: str | None = None
    #: Query restarts after failures since the job's process started, and the last failure.
    restarts: int = 0
    last_error: str | None = None
    #: Records the job skipped because the source no longer had them (retention, DeleteRecords, re-created topic).
    data_loss_records: int = 0
    #: Where the job checkpoints; `checkpoint_missing`: a flow deployed before whose checkpoint is gone (None:
    #: cannot be checked from here), so it resumes from the offset-syncs rather than from `start_from`.
    checkpoint: str | None = None
    checkpoint_missing: bool | None = False
    host: str | None = None
    #: The execution mode the running job chose and why (e.g. micro-batch: partitions outgrew its task slots).
    mode: str | None = None
    mode_reason: str | None = None
    #: The job left real-time mode while running because source partitions outgrew its task slots.
    mode_fallback: bool = False
    #: Times another writer of the flow's partitions (an older deployment still alive, a stray task) fenced the
    #: exactly-once job's writers; and the newer generation that superseded this job (it stopped for good).
    fenced_writers: int = 0
    superseded_by: int | None = None


@dataclass(frozen=True)
class JobStatus:
    jobs: Mapping[str, JobInfo] = field(default_factory=dict)
    #: False when the runner could not be asked (the planner then plans no job changes and warns).
    known: bool = True
    #: The runner runs on a machine that goes away after this run (a CI runner): local jobs would not outlive it.
    ephemeral_host: bool = False
