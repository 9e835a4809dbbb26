"""`--max-records-per-second` (`reconciler.verify.kafka_reads.RateLimiter`): the reads' average rate stays bounded."""

from __future__ import annotations

import time

import pytest

from reconciler.verify.kafka_reads import CHUNK, RateLimiter

pytestmark = pytest.mark.unit


def test_no_bound_never_waits_and_reads_whole_chunks() -> None:
    limiter = RateLimiter(None)
    began = time.monotonic()
    for _ in range(100):
        limiter.acquire(CHUNK)
    assert time.monotonic() - began < 0.05
    assert limiter.chunk(CHUNK) == CHUNK


def test_a_bound_holds_the_average_rate_and_shrinks_the_chunks() -> None:
    limiter = RateLimiter(2000)
    assert limiter.chunk(CHUNK) == 2000  # one chunk at most a second's worth
    assert RateLimiter(1).chunk(CHUNK) == 1
    began = time.monotonic()
    for _ in range(5):
        limiter.acquire(100)  # 500 records at 2000/s: at least 0.25 s
    elapsed = time.monotonic() - began
    assert 0.24 <= elapsed < 1.0
