"""An apply checks its lease before every cluster change: a failed or overdue renewal stops it, saying so."""

from __future__ import annotations

import time
from typing import Any

import pytest

from reconciler.state.lock import LeaseLostError, StateLock

pytestmark = pytest.mark.unit


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
