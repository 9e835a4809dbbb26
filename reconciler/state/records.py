"""The records of the state topic: their keys, their JSON values, and how a log of them folds into state.

Keys (UTF-8), one partition, compacted, so the latest value per key is the truth:
  meta                      {"lineage", "serial", "updated_at"}
  resource/<address>        {"address", "kind", "attributes", "serial", "plan_id", "applied_at"}  (tombstone: gone)
  history/<serial:010d>     one apply: plan id, spec digest, who/where/when, status, counts per outcome
  history/<serial>/<part>   its outcome per change, HISTORY_PART_SIZE a record (messages stay small)
  lock/<claim id>           a lock claim: {"id", "holder", "operation", "claimed_at"}  (tombstone: released)
  lease/<claim id>          {"id", "lease_until"}: renewed while the holder works (tombstone: released)

Pure: folding a list of (key, value, offset) into a `StateSnapshot` is done here, reading them is the store's job.
Secrets never reach these records: resources hold plan forms, which carry secret *references* only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reconciler.plan.forms import Form
from reconciler.resources.recorded import RecordedResource, RecordedState

META = "meta"
RESOURCE = "resource/"
HISTORY = "history/"
LOCK = "lock/"
LEASE = "lease/"


#: Outcomes per history part: a part stays far below Kafka's default 1 MB message limit at any plan size.
HISTORY_PART_SIZE = 500


def history_key(serial: int) -> str:
    return f"{HISTORY}{serial:010d}"


def history_part_key(serial: int, part: int) -> str:
    """`history/<serial>/<part>`: the outcome per change of one apply, HISTORY_PART_SIZE changes a record."""
    return f"{history_key(serial)}/{part:05d}"


#: What an apply records of one change: address, kind, the resource's form as applied (None: gone, or nothing to
#: record), action, outcome, message.
RecordEntry = tuple[str, str, Form | None, str, str, str]


class Record(BaseModel):
    """A state topic value. Its JSON holds the fields it was built or read with (`exclude_unset`), so a record
    reads and writes as the same bytes in every version; fields other versions wrote and this one does not know
    are ignored on read (frozen: a changed record is a `model_copy`)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    def to_json(self) -> dict[str, Any]:
        """The JSON object of the record, as written (the state topic's and `kmirror state`'s JSON edge)."""
        return self.model_dump(mode="json", exclude_unset=True)


class Who(Record):
    """Who runs a kmirror that writes: user, host, pid, the checkout's commit, and whether it runs in CI."""

    user: str | None = None
    host: str | None = None
    pid: int | None = None
    git_commit: str | None = None
    ci: bool = False


class MetaRecord(Record):
    """`meta`: the state's lineage and serial (one more per apply)."""

    lineage: str
    serial: int
    updated_at: str | None = None


class ResourceRecord(Record):
    """`resource/<address>`: a managed resource as last applied (its plan form, `attributes`), by which apply."""

    address: str = ""
    kind: str
    #: The resource's form (`reconciler.plan.forms`, by `kind`), as JSON: the planner validates it by kind.
    attributes: dict[str, Any] = Field(default_factory=dict)
    serial: int | None = None
    plan_id: str | None = None
    applied_at: str | None = None
    #: Recorded before the call that creates it (written only when true).
    pending: bool = False


class ChangeRecord(Record):
    """One change's outcome in an apply's history (a history part holds HISTORY_PART_SIZE of them)."""

    address: str
    action: str = ""
    outcome: str = ""
    message: str = ""


class HistoryPart(Record):
    """`history/<serial>/<part>`."""

    changes: tuple[ChangeRecord, ...] = ()


class HistoryEntry(Record):
    """`history/<serial>`: one apply (or cutover, or state edit): what, who, when, how it ended, counts per outcome.
    Read back, `changes` holds the outcomes of its parts, in order."""

    serial: int
    lineage: str | None = None
    plan_id: str = ""
    spec_digest: str | None = None
    lock_id: str | None = None
    operation: str = "apply"
    #: A cutover's flow; a state edit's addresses.
    flow: str | None = None
    addresses: tuple[str, ...] | None = None
    who: Who = Field(default_factory=Who)
    started_at: str = ""
    finished_at: str | None = None
    status: str = ""
    counts: dict[str, int] = Field(default_factory=dict)
    parts: int = 0
    changes: tuple[ChangeRecord, ...] = ()

    def counted(self) -> HistoryEntry:
        """This entry with `counts` taken from its `changes`."""
        counts: dict[str, int] = {}
        for c in self.changes:
            counts[c.outcome] = counts.get(c.outcome, 0) + 1
        return self.model_copy(update={"counts": counts})


class LockRecord(Record):
    """`lock/<claim id>`: a claim on the state lock."""

    id: str = ""
    holder: Who = Field(default_factory=Who)
    operation: str = ""
    claimed_at: float = 0.0
    lease_until: float = 0.0


class LeaseRecord(Record):
    """`lease/<claim id>`: renewed while the holder works. `lease_until` for readers of a topic without append
    times; `lease_seconds` with the broker's append time."""

    id: str = ""
    lease_until: float
    lease_seconds: float | None = None


def encode(value: Record | None) -> bytes | None:
    return None if value is None else json.dumps(value.to_json(), sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class LockClaim:
    id: str
    offset: int
    holder: Who
    operation: str
    claimed_at: float
    lease_until: float
    #: The broker's append time (LogAppendTime, seconds) of the claim's latest lease record, and the lease's length:
    #: liveness by the log's own clock (see `reconciler.state.lock.alive`); None when the topic has no such times.
    renewed_at: float | None = None
    lease_seconds: float | None = None


@dataclass
class StateSnapshot:
    """Everything the state topic says, folded: the recorded state, apply history, and live lock claims."""

    lineage: str | None = None
    serial: int = 0
    resources: dict[str, ResourceRecord] = field(default_factory=dict)
    history: dict[str, HistoryEntry] = field(default_factory=dict)
    claims: dict[str, LockClaim] = field(default_factory=dict)
    end_offset: int = 0
    #: The broker's append time (seconds) of the newest record read; None when the topic does not keep append times.
    log_time: float | None = None
    #: The Kafka cluster id of the cluster holding the state topic (what job folders are keyed by), when read.
    cluster_id: str | None = None

    def recorded(self) -> RecordedState:
        return RecordedState(
            lineage=self.lineage,
            serial=self.serial,
            cluster_id=self.cluster_id,
            resources={
                a: RecordedResource(address=a, kind=r.kind, attributes=r.attributes, pending=r.pending)
                for a, r in self.resources.items()
            },
        )

    def applies(self) -> list[HistoryEntry]:
        return [self.history[k] for k in sorted(self.history)]


def fold(
    records: list[tuple[str, bytes | None, int]],
    append_times: Mapping[int, float] | None = None,
    log_time: float | None = None,
) -> StateSnapshot:
    """Fold (key, value, offset) records, in log order, into a snapshot. The latest value of a key wins.

    `append_times`: the broker's append time (seconds) per offset of the lock and lease records, when the topic
    keeps them (LogAppendTime); `log_time`: that of the newest record.
    """
    times = append_times or {}
    snap = StateSnapshot(log_time=log_time)
    leases: dict[str, float] = {}
    renewed: dict[str, tuple[float, float]] = {}  # claim -> (broker time of its latest lease, lease seconds)
    raw_claims: dict[str, tuple[int, LockRecord]] = {}
    parts: dict[str, dict[int, Sequence[ChangeRecord]]] = {}
    # A resource's value is parsed only once its latest record is known: every apply writes each resource at least
    # twice (pending, then applied), and compaction leaves the active segment alone, so most are superseded.
    resources: dict[str, bytes] = {}
    for key, value, offset in records:
        snap.end_offset = offset + 1
        if key.startswith(RESOURCE):
            address = key[len(RESOURCE) :]
            if value is None:
                resources.pop(address, None)
            else:
                resources[address] = value
            continue
        if key == META and value is not None:
            meta = MetaRecord.model_validate_json(value)
            snap.lineage, snap.serial = meta.lineage, meta.serial
        elif key.startswith(HISTORY) and value is not None:
            serial, _, part = key[len(HISTORY) :].partition("/")
            if part:
                parts.setdefault(HISTORY + serial, {})[int(part)] = HistoryPart.model_validate_json(value).changes
            else:
                snap.history[key] = HistoryEntry.model_validate_json(value)
        elif key.startswith(LOCK):
            claim_id = key[len(LOCK) :]
            if value is None:
                raw_claims.pop(claim_id, None)
            elif claim_id not in raw_claims:  # the first claim's offset decides the order
                raw_claims[claim_id] = (offset, LockRecord.model_validate_json(value))
        elif key.startswith(LEASE):
            claim_id = key[len(LEASE) :]
            if value is None:
                leases.pop(claim_id, None)
                renewed.pop(claim_id, None)
            else:
                lease = LeaseRecord.model_validate_json(value)
                leases[claim_id] = lease.lease_until
                if offset in times and lease.lease_seconds is not None:
                    renewed[claim_id] = (times[offset], lease.lease_seconds)
    snap.resources = {address: ResourceRecord.model_validate_json(value) for address, value in resources.items()}
    for key, entry in snap.history.items():
        joined = tuple(c for _, chunk in sorted(parts.get(key, {}).items()) for c in chunk)
        snap.history[key] = entry.model_copy(update={"changes": joined})
    for claim_id, (offset, doc) in raw_claims.items():
        snap.claims[claim_id] = LockClaim(
            id=claim_id,
            offset=offset,
            holder=doc.holder,
            operation=doc.operation,
            claimed_at=doc.claimed_at,
            lease_until=leases.get(claim_id, doc.lease_until),
            renewed_at=renewed[claim_id][0] if claim_id in renewed else None,
            lease_seconds=renewed[claim_id][1] if claim_id in renewed else None,
        )
    return snap
