"""The state lock: at most one apply (or other state-changing command) at a time per state topic.

Built on what Kafka guarantees for one partition: a total order. A contender appends a claim
(`lock/<id>`) and reads the partition back; the holder is the earliest claim still alive (not released,
lease not expired, and not held by a process of this host that is gone). Lease expiry is judged on the
broker's clock: the state topic keeps LogAppendTime, so a lease's age is the append time of the contender's own
fresh record minus that of the holder's latest renewal; no two hosts' clocks are compared. Everyone reads the
same order, so everyone agrees. The holder renews its lease (`lease/<id>`) from a background thread. Fencing: the holder
then creates the state topic's transactional producer, which fences any older writer, so an apply that lost
its lease cannot write state, and the executor asks `StateLock.check` before each cluster change, so an apply
whose lease lapsed stops before its next one. `force_unlock` releases a claim and fences its writer at once.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from reconciler.errors import KmirrorError
from reconciler.runners.processes import alive as process_alive
from reconciler.state.records import LEASE, LOCK, LeaseRecord, LockClaim, LockRecord, StateSnapshot
from reconciler.state.store import StateStore, whoami

DEFAULT_LEASE = float(os.environ.get("KMIRROR_LOCK_LEASE_SECONDS", "60"))


class LockHeldError(KmirrorError):
    """Someone else holds the state lock."""


class LeaseLostError(KmirrorError):
    """This apply's lease on the state lock lapsed; it stopped before its next cluster change."""


def describe(claim: LockClaim) -> str:
    h = claim.holder
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(claim.claimed_at))
    who = f"{h.user}@{h.host} (pid {h.pid})"
    return f"lock {claim.id} held by {who} for {claim.operation} since {started}"


def alive(claim: LockClaim, now: float, log_time: float | None = None) -> bool:
    """Whether a claim still holds: its lease not expired, and (on this host) its process not gone.

    With `log_time` (the broker's append time of a record the asker just wrote, or of a later one) and the broker's
    append time of the claim's latest lease, expiry is judged on the broker's clock alone: no two hosts' clocks are
    compared. Otherwise (a state topic without append times) by `now` against the holder's `lease_until`.
    """
    if log_time is not None and claim.renewed_at is not None and claim.lease_seconds is not None:
        if log_time - claim.renewed_at > claim.lease_seconds:
            return False
    elif claim.lease_until <= now:
        return False
    h = claim.holder
    if h.host == socket.gethostname() and h.pid is not None and h.pid != os.getpid():
        return process_alive(h.pid)  # a holder on this machine that died needs no lease expiry
    return True


def holder(snapshot: StateSnapshot, now: float | None = None, by_log: bool = False) -> LockClaim | None:
    """The earliest live claim. `by_log`: the snapshot was read right after this process appended to the topic,
    so its newest record's broker time is "now" on the broker's clock (or a moment before: never too late)."""
    now = time.time() if now is None else now
    log_time = snapshot.log_time if by_log else None
    live = sorted((c for c in snapshot.claims.values() if alive(c, now, log_time)), key=lambda c: c.offset)
    return live[0] if live else None


class StateLock:
    def __init__(self, store: StateStore, operation: str, lease: float = DEFAULT_LEASE) -> None:
        self.store = store
        self.operation = operation
        self.lease = lease
        self.id = uuid.uuid4().hex[:12]
        self.snapshot: StateSnapshot | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.lost: str | None = None
        self._renewed_at = time.monotonic()

    @contextmanager
    def held(self, wait: float = 0.0) -> Iterator[StateSnapshot]:
        """Hold the lock for the block; yields the state snapshot read right after winning it."""
        self.store.ensure_topic()
        deadline = time.monotonic() + wait
        while True:
            now = time.time()
            claim = LockRecord(
                id=self.id, holder=whoami(), operation=self.operation, claimed_at=now, lease_until=now + self.lease
            )
            self.store.append([(LOCK + self.id, claim), (LEASE + self.id, self._lease_doc())])
            snapshot = self.store.read()
            first = holder(snapshot, by_log=True)  # we just appended our claim: the log's time is now
            if first is not None and first.id == self.id:
                break
            self._release()
            if first is None:
                continue  # our claim was not visible yet; claim again
            if time.monotonic() >= deadline:
                raise LockHeldError(
                    f"the state is locked: {describe(first)}. Wait for it to finish, or if it is gone, "
                    f"run `kmirror force-unlock {first.id}`."
                )
            time.sleep(min(2.0, max(0.2, deadline - time.monotonic())))
        self.snapshot = snapshot
        self._renewed_at = time.monotonic()
        self._renewer = threading.Thread(target=self._renew, name=f"kmirror-lease-{self.id}", daemon=True)
        self._renewer.start()
        try:
            yield snapshot
        finally:
            self._stop.set()
            self._renewer.join(timeout=5)
            self._release()

    def check(self) -> None:
        """Raise `LeaseLostError` when this holder can no longer be sure it holds the lock.

        Called before every cluster change: a renewal failed, or none succeeded for two thirds of the lease (by
        this process's monotonic clock, so no wall clock is involved), after which another kmirror may see the
        lease as expired and take the lock.
        """
        overdue = time.monotonic() - self._renewed_at > self.lease * 2 / 3
        if self.lost is None and not overdue:
            return
        why = self.lost or f"the lease was not renewed for {time.monotonic() - self._renewed_at:.0f}s"
        raise LeaseLostError(
            f"lost the state lock {self.id} ({why}); this apply stopped before its next cluster change. What it "
            "did is recorded; run `kmirror plan` to see what is left, then apply again."
        )

    def _renew(self) -> None:
        while not self._stop.wait(self.lease / 3):
            try:
                self.store.append([(LEASE + self.id, self._lease_doc())])
            except Exception as exc:  # the apply stops before its next change (`check`)
                self.lost = str(exc)
            else:
                self._renewed_at = time.monotonic()

    def _lease_doc(self) -> LeaseRecord:
        # lease_until: for readers of a topic without append times; lease_seconds: with the broker's append time
        return LeaseRecord(id=self.id, lease_until=time.time() + self.lease, lease_seconds=self.lease)

    def _release(self) -> None:
        self.store.append([(LOCK + self.id, None), (LEASE + self.id, None)])


def force_unlock(store: StateStore, lock_id: str) -> LockClaim:
    """Release `lock_id` on purpose and fence its writer; raises if there is no such live claim."""
    snapshot = store.read()
    claim = snapshot.claims.get(lock_id)
    if claim is None:
        ids = ", ".join(sorted(snapshot.claims)) or "none"
        raise KmirrorError(f"no lock claim {lock_id!r} on state topic {store.topic} (current claims: {ids})")
    store.append([(LOCK + lock_id, None), (LEASE + lock_id, None)])
    producer: Any = store.fencing_producer()  # fences the old holder's transactional writer
    producer.flush(5)
    return claim
