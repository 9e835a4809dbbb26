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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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


def encode(value: dict[str, Any] | None) -> bytes | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class LockClaim:
    id: str
    offset: int
    holder: dict[str, Any]
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
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: dict[str, dict[str, Any]] = field(default_factory=dict)
    claims: dict[str, LockClaim] = field(default_factory=dict)
    end_offset: int = 0
    #: The broker's append time (seconds) of the newest record read; None when the topic does not keep append times.
    log_time: float | None = None

    def recorded(self) -> RecordedState:
        return RecordedState(
            lineage=self.lineage,
            serial=self.serial,
            resources={
                a: RecordedResource(
                    address=a, kind=r["kind"], attributes=r["attributes"], pending=bool(r.get("pending"))
                )
                for a, r in self.resources.items()
            },
        )

    def applies(self) -> list[dict[str, Any]]:
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
    raw_claims: dict[str, tuple[int, dict[str, Any]]] = {}
    parts: dict[str, dict[int, list[dict[str, Any]]]] = {}
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
        doc = None if value is None else json.loads(value)
        if key == META and doc is not None:
            snap.lineage, snap.serial = doc["lineage"], int(doc["serial"])
        elif key.startswith(HISTORY) and doc is not None:
            serial, _, part = key[len(HISTORY) :].partition("/")
            if part:
                parts.setdefault(HISTORY + serial, {})[int(part)] = doc.get("changes", [])
            else:
                snap.history[key] = doc
        elif key.startswith(LOCK):
            claim_id = key[len(LOCK) :]
            if doc is None:
                raw_claims.pop(claim_id, None)
            elif claim_id not in raw_claims:  # the first claim's offset decides the order
                raw_claims[claim_id] = (offset, doc)
        elif key.startswith(LEASE):
            claim_id = key[len(LEASE) :]
            if doc is None:
                leases.pop(claim_id, None)
                renewed.pop(claim_id, None)
            else:
                leases[claim_id] = float(doc["lease_until"])
                if offset in times and doc.get("lease_seconds") is not None:
                    renewed[claim_id] = (times[offset], float(doc["lease_seconds"]))
    snap.resources = {address: json.loads(value) for address, value in resources.items()}
    for key, doc in snap.history.items():
        doc["changes"] = [c for _, chunk in sorted(parts.get(key, {}).items()) for c in chunk]
    for claim_id, (offset, doc) in raw_claims.items():
        snap.claims[claim_id] = LockClaim(
            id=claim_id,
            offset=offset,
            holder=doc.get("holder", {}),
            operation=doc.get("operation", ""),
            claimed_at=float(doc.get("claimed_at", 0)),
            lease_until=leases.get(claim_id, float(doc.get("lease_until", 0))),
            renewed_at=renewed[claim_id][0] if claim_id in renewed else None,
            lease_seconds=renewed[claim_id][1] if claim_id in renewed else None,
        )
    return snap
