"""`python -m benchmarks.quota_model`: Kafka's fetch quota arithmetic against a client that fetches R bytes a request.

A model of what a Kafka 3.9 broker does with a client id's fetches under `consumer_byte_rate` Q (read from
apache/kafka: `Rate.windowSize` and `SampledStat` in clients/.../metrics/stats, `QuotaUtils.throttleTime`,
`ClientQuotaManager.recordAndGetThrottleTimeMs` and `KafkaApis.handleFetchRequest`):

- the rate is the bytes of the samples in the window over the window's length, which counts at least
  `quota.window.num - 1` (10) samples of `quota.window.size.seconds` (1 s); a sample is dropped 11 s after its last
  event, and a new one starts when the current one is a second old;
- every fetch records its response's size first; if the rate then exceeds Q, the response is empty, the size is
  recorded back negatively (an event in the current sample all the same), and the client is told to wait
  (rate - Q) / Q x window, which it does before its next fetch (KIP-219).

The clients (`--consumers`, sharing the id) fetch again `--rtt-ms` after each answer, as fast as they are let. The
report is every sliding minute's rate over Q, from `--from-s` on: the first minutes, what a 100 s backfill sees.
It shows why large fetches read 20-36 % under Q at 64 MB a request (a window's worth passes at once, then every fetch
is refused until its samples leave the window) and small ones come near Q (within 9 % in the first minutes, an
idealised client that bursts whenever let; they settle at Q later); see benchmarks/README.md.

Must not: be imported by kmirror (a benchmark's model, not production code).
"""

from __future__ import annotations

import argparse
import bisect
import heapq
from dataclasses import dataclass, field


@dataclass
class _Sample:
    start: int
    last: int
    value: float = 0.0


@dataclass
class QuotaRate:
    """Kafka's `Rate` over a `SampledStat` with the quota's window (times in ms)."""

    samples_n: int = 11
    window_ms: int = 1000
    samples: list[_Sample] = field(default_factory=lambda: [_Sample(0, 0)])
    current: int = 0

    def record(self, value: float, now: int) -> None:
        sample = self.samples[self.current]
        if now - sample.start >= self.window_ms:
            self.current = (self.current + 1) % (self.samples_n + 1)
            if self.current >= len(self.samples):
                self.samples.append(_Sample(now, now))
            else:
                self.samples[self.current] = _Sample(now, now)
            sample = self.samples[self.current]
        sample.value += value
        sample.last = now

    def _purge(self, now: int) -> None:
        for i, sample in enumerate(self.samples):
            if now - sample.last >= self.samples_n * self.window_ms:
                self.samples[i] = _Sample(now, now)

    def window(self, now: int) -> int:
        self._purge(now)
        elapsed = now - min(s.start for s in self.samples)
        full = elapsed // self.window_ms
        if full < self.samples_n - 1:
            elapsed += (self.samples_n - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def rate(self, now: int) -> float:
        """Bytes per second."""
        self._purge(now)
        return sum(s.value for s in self.samples) / (self.window(now) / 1000)


def minute_ratios(
    quota: float, fetch: float, *, consumers: int = 2, rtt_ms: int = 10, seconds: int = 300, from_s: int = 5
) -> list[float]:
    """Every sliding minute's fetched bytes per second over `quota`, one a second from `from_s` on."""
    broker = QuotaRate()
    due = [(c, c) for c in range(consumers)]  # (time, consumer)
    passed: list[int] = []
    while due:
        now, who = heapq.heappop(due)
        if now > seconds * 1000:
            break
        broker.record(fetch, now)
        rate = broker.rate(now)
        if rate > quota:
            throttle = round((rate - quota) / quota * broker.window(now))
            broker.record(-fetch, now)
            heapq.heappush(due, (now + max(throttle, 0) + rtt_ms, who))
        else:
            passed.append(now)
            heapq.heappush(due, (now + rtt_ms, who))
    ratios = []
    for start in range(from_s * 1000, (seconds - 60) * 1000, 1000):
        count = bisect.bisect_left(passed, start + 60_000) - bisect.bisect_left(passed, start)
        ratios.append(count * fetch / 60 / quota)
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quota", type=float, default=10e6, help="consumer_byte_rate, bytes per second")
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--rtt-ms", type=int, default=10)
    parser.add_argument("--from-s", type=int, default=5)
    parser.add_argument("--minutes", type=int, default=1, help="how many first sliding minutes to report on")
    args = parser.parse_args(argv)
    print("fetch per request (all consumers) | slowest / median / fastest sliding minute, over the quota")
    for total in (64e6, 32e6, 8e6, 2.5e6, 1e6, 0.5e6):
        each = total / args.consumers
        ratios = minute_ratios(args.quota, each, consumers=args.consumers, rtt_ms=args.rtt_ms, from_s=args.from_s)
        first = sorted(ratios[: args.minutes * 60])
        print(f"{total / 1e6:6.1f} MB | {first[0]:.3f} / {first[len(first) // 2]:.3f} / {first[-1]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
