"""The Kafka side of `kmirror verify`: streams of committed records of one partition, read group-less and bounded.

`records()` yields the committed records of a partition in [start, end) in offset order, read in chunks with
`reconciler.adapters.record_ranges.RangeReader` (read_committed, assigned partitions, never a joined or committed
group) a chunk ahead on a thread, each chunk admitted by a `RateLimiter` (`--max-records-per-second`, per
cluster). `offsets_for_time` answers `--since` (the broker's offsets-for-times). This is the replaceable scan
engine: the comparison (`reconciler.verify.compare`) only sees iterators of records, so a Spark batch reader
could feed it instead.

Must not: write anything, commit an offset, or compare records (that is `reconciler.verify.compare`).
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Generator, Iterator, Sequence

from confluent_kafka import Consumer, KafkaException, TopicPartition

from reconciler.adapters.record_ranges import Range, RangeReader
from reconciler.core.offsets.exact import Record
from reconciler.errors import ClusterUnreachableError, KmirrorError
from reconciler.spec.client_config import ClientConfig

__all__ = ["CHUNK", "RateLimiter", "ReadError", "offsets_for_time", "reader", "records"]

CHUNK = 20_000
"""Records per read of one partition (one assign): large enough that re-assigning costs little."""

#: librdkafka's prefetch per partition, kept near one chunk (the default, 64 MB, would fetch far past a chunk's
#: end and throw it away at the next assign).
_PREFETCH: ClientConfig = {
    "queued.max.messages.kbytes": 16384,
    "queued.min.messages": CHUNK,
    "auto.offset.reset": "earliest",
}


class ReadError(KmirrorError):
    """A partition could not be read to the end of its range (a timeout, a broker error)."""


class RateLimiter:
    """At most `per_second` records a second on average (None: no bound); `acquire(n)` sleeps as needed."""

    def __init__(self, per_second: int | None) -> None:
        self.per_second = per_second
        self._start = time.monotonic()
        self._taken = 0

    def chunk(self, default: int) -> int:
        return default if self.per_second is None else max(1, min(default, self.per_second))

    def acquire(self, n: int) -> None:
        if self.per_second is None or n <= 0:
            return
        self._taken += n
        due = self._start + self._taken / self.per_second
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)


def reader(config: ClientConfig, *, timeout: float) -> RangeReader:
    """A group-less read_committed reader of `config`'s cluster, its prefetch sized for chunked scans."""
    return RangeReader({**_PREFETCH, **config}, timeout=timeout)


def _chunks(
    source: RangeReader, topic: str, partition: int, start: int, end: int, limiter: RateLimiter, most: int | None
) -> Iterator[list[Record]]:
    position = start
    size = limiter.chunk(CHUNK if most is None else max(1, min(CHUNK, most)))
    while position < end:
        limiter.acquire(size)
        (read,) = source.read([Range(topic, partition, position, size, end - 1)])
        if read.error:
            raise ReadError(f"reading {topic}/{partition} from offset {position}: {read.error}")
        chunk = [r for r in read.records if r.offset < end]
        if chunk:
            yield chunk
        if read.at_end or not read.records or len(chunk) < len(read.records):
            return
        position = read.records[-1].offset + 1


def records(
    source: RangeReader,
    topic: str,
    partition: int,
    start: int,
    end: int,
    limiter: RateLimiter,
    *,
    most: int | None = None,
) -> Generator[Record, None, None]:
    """The committed records of `topic`/`partition` with start <= offset < end, in order (read in chunks of at
    most `most` records when given: for a few records).

    Chunks are read a chunk ahead on a thread of their own (librdkafka and the network work while the caller
    compares); closing the iterator stops that thread before it returns, so the reader is free again.
    """
    chunks: queue.Queue[list[Record] | BaseException | None] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def put(item: list[Record] | BaseException | None) -> bool:
        while not stop.is_set():
            try:
                chunks.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for chunk in _chunks(source, topic, partition, start, end, limiter, most):
                if not put(chunk):
                    return
            put(None)
        except BaseException as exc:  # handed to the caller's thread, raised there
            put(exc)

    worker = threading.Thread(target=work, name=f"verify-read-{topic}-{partition}", daemon=True)
    worker.start()
    try:
        while True:
            item = chunks.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield from item
    finally:
        stop.set()
        worker.join()


def offsets_for_time(
    config: ClientConfig, partitions: Sequence[tuple[str, int]], timestamp_ms: int, *, timeout: float
) -> dict[tuple[str, int], int | None]:
    """Per partition, the first offset whose timestamp is at or after `timestamp_ms` (None: no such record)."""
    if not partitions:
        return {}
    consumer = Consumer(
        {
            **config,
            "group.id": f"kmirror-verify-{uuid.uuid4().hex[:8]}",  # never joined, never committed
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "log_level": 0,
        }
    )
    try:
        found = consumer.offsets_for_times([TopicPartition(t, p, timestamp_ms) for t, p in partitions], timeout=timeout)
    except KafkaException as exc:
        raise ClusterUnreachableError(f"offsets for time {timestamp_ms}: {exc}") from exc
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None) for tp in found}
