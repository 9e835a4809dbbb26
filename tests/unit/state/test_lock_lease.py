"""An apply checks its lease before every cluster change: a failed or overdue renewal stops it, saying so."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from reconciler.state.lock import LeaseLostError, StateLock, alive, holder
from reconciler.state.records import LEASE, LOCK, LockClaim, Who, fold

pytestmark = pytest.mark.unit


def raw(doc: object) -> bytes:
    """A record's value as every kmirror version writes it (sorted, compact JSON)."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _lock(lease: float) -> StateLock:
    store: Any = object()  # never touched by check()
    return StateLock(store, "apply", lease=lease)


def test_a_fresh_lease_lets_the_apply_go_on() -> None:
    _lock(60).check()


def test_a_failed_renewal_stops_the_apply_naming_why() -> None:
    lock = _lock(60)
    lock.lost = "KafkaError: all brokers down"
    with pytest.raises(LeaseLostError, match=r"all brokers down.*stopped before its next cluster change"):
        lock.check()


def test_a_renewal_overdue_for_two_thirds_of_the_lease_stops_the_apply() -> None:
    lock = _lock(3)
    lock._renewed_at = time.monotonic() - 2.5
    with pytest.raises(LeaseLostError, match="not renewed for"):
        lock.check()


def _claim(renewed_at: float | None, lease_until: float) -> LockClaim:
    return LockClaim("c1", 5, Who(host="elsewhere", pid=1), "apply", 0.0, lease_until, renewed_at, 60.0)


def test_a_lease_is_judged_by_the_brokers_clock_when_the_log_has_append_times() -> None:
    # The holder's clock ran an hour behind: by the asker's wall clock its lease_until is long past, but the broker
    # appended its renewal 10 s before the asker's own fresh record: alive.
    behind = _claim(renewed_at=1000.0, lease_until=time.time() - 3600)
    assert alive(behind, now=time.time(), log_time=1010.0)
    # And the other way round: a holder whose clock runs ahead renews "until" next year, but its last renewal is
    # 61 s older than the log's newest record: expired.
    ahead = _claim(renewed_at=1000.0, lease_until=time.time() + 365 * 86400)
    assert not alive(ahead, now=time.time(), log_time=1061.0)


def test_without_append_times_the_lease_falls_back_to_lease_until() -> None:
    assert alive(_claim(None, time.time() + 30), now=time.time(), log_time=1061.0)
    assert not alive(_claim(None, time.time() - 1), now=time.time(), log_time=1061.0)


def test_fold_keeps_the_broker_time_of_each_claims_latest_lease() -> None:
    records = [
        (LOCK + "c1", raw({"id": "c1", "holder": {}, "operation": "apply", "claimed_at": 1, "lease_until": 2}), 0),
        (LEASE + "c1", raw({"id": "c1", "lease_until": 2, "lease_seconds": 60}), 1),
        (LEASE + "c1", raw({"id": "c1", "lease_until": 3, "lease_seconds": 60}), 2),
    ]
    snap = fold(records, {0: 100.0, 1: 100.0, 2: 120.0}, log_time=130.0)
    claim = snap.claims["c1"]
    assert (claim.renewed_at, claim.lease_seconds, snap.log_time) == (120.0, 60.0, 130.0)
    assert holder(snap, by_log=True) == claim
    assert holder(fold(records, {0: 100.0, 1: 100.0, 2: 120.0}, log_time=181.0), by_log=True) is None
