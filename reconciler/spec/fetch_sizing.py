"""How a throttled flow's job sizes its fetches, so that the source's fetch quota paces it instead of stalling it.

A flow's `replication.throttle` is a Kafka client quota (`consumer_byte_rate`) on the job's source client id. A
broker measures a client id's rate over `quota.window.num` (11) samples of `quota.window.size.seconds` (1 s) and
counts at least 10 s of window (`Rate.windowSize`), so an idle client may take 10 s of quota at once. It checks each
fetch against the rate *with* that response's bytes; a fetch that would go over is answered empty with
`throttle_time_ms` and its bytes are taken back (`KafkaApis.handleFetchRequest`, `unrecordQuotaSensor`); the client
then waits that long (KIP-219) and asks again. A response is never cut to fit: the whole of it passes or none.

The job's default fetches are large (8 MB per partition, up to 64 MB per request): at 10 MB/s one response is
3-6 s of quota. The broker then lets through a burst of a whole window's quota (100 MB) in a second or two,
answers every fetch empty until the burst's samples leave the window (11 s after their last event, and each
refused fetch is an event), and lets the next burst through: 100 MB every 12-13 s, 7-8.5 MB/s at a 10 MB/s
throttle (benchmarks/README.md; `benchmarks/quota_model.py`, a model of the broker's arithmetic, gives the same
cycle). With responses of a small part of a second of quota, refused fetches are retried as the window frees,
bursts spread over more samples and leave it a sample at a time, and the reads come near the quota.

So a throttled flow's consumers fetch at most `FETCH_QUOTA_SECONDS` of quota per request together
(`fetch.max.bytes` = rate x that / consumers, at least `MIN_FETCH_BYTES`; `max.partition.fetch.bytes` no more),
never more than the job would fetch unthrottled. The rate comes from the job's effective spec, outside its digest
(`spec.digest`): a changed rate reaches the fetch sizes at the job's next start, never restarts it. A flow's own
`replication.consumer` settings still win.

Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The share of a second of quota all of a throttled flow's consumers fetch in one request each.
FETCH_QUOTA_SECONDS = 0.1
#: The smallest request a throttled consumer makes (a record batch larger than it still comes, whole).
MIN_FETCH_BYTES = 64 * 1024

FETCH_MAX_BYTES = "fetch.max.bytes"
PARTITION_FETCH_BYTES = "max.partition.fetch.bytes"


def throttled_fetch_sizes(rate: int, consumers: int, unthrottled: Mapping[str, str]) -> dict[str, str]:
    """`fetch.max.bytes` and `max.partition.fetch.bytes` for `consumers` consumers sharing a fetch quota of `rate`
    bytes per second, each no larger than in `unthrottled` (the sizes the job would use without a throttle)."""
    request = max(MIN_FETCH_BYTES, int(rate * FETCH_QUOTA_SECONDS) // max(1, consumers))
    if FETCH_MAX_BYTES in unthrottled:
        request = min(request, int(unthrottled[FETCH_MAX_BYTES]))
    partition = request
    if PARTITION_FETCH_BYTES in unthrottled:
        partition = min(partition, int(unthrottled[PARTITION_FETCH_BYTES]))
    return {FETCH_MAX_BYTES: str(request), PARTITION_FETCH_BYTES: str(partition)}
