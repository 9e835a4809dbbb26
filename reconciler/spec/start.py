"""`flows[].replication.start_from`: where a new flow starts reading each source partition.

`earliest`, `latest`, an ISO 8601 timestamp with a timezone (`"2026-11-01T00:00:00Z"`: the first record at or after
it, Kafka's offsets-for-times) or a duration (`"7d"`: that far back from the job's first start). Validated and
written back in one canonical form (timestamps in UTC with `Z`, durations in their shortest unit), so the same
start written two ways has one flow digest. `start_time_ms` turns a value into the record timestamp to look up.

Pure: no I/O, no clock (the caller passes the job's first start). Must not: read Kafka, or resolve a duration
against anything but the time it is given.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

from reconciler.spec.durations import DURATION_PATTERN, format_duration, parse_duration

EARLIEST, LATEST = "earliest", "latest"
#: Any string shaped like a date: checked as a timestamp (so a missing timezone is named, not "not a duration").
_DATE_LIKE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_FORMS = (
    "write earliest, latest, an ISO 8601 timestamp with a timezone (e.g. '2026-11-01T00:00:00Z') or a time "
    "back from the job's first start (e.g. '7d', '12h', '30m')"
)


def parse_start_from(value: Any) -> str:
    """The canonical form of a `start_from` value. Raises ValueError with a user-facing message."""
    if isinstance(value, datetime):  # a loader that constructs YAML timestamps (kmirror's keeps them as text)
        value = value.isoformat()
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a place to start: {_FORMS}")
    text = value.strip()
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()
    if _DATE_LIKE.match(text):
        return format_start_time(_timestamp(text))
    if re.fullmatch(DURATION_PATTERN, text.replace(" ", "")):
        duration = parse_duration(text)
        if duration <= timedelta(0):
            raise ValueError(f"{value!r} is no time back; write latest to start at the end")
        return format_duration(duration)
    raise ValueError(f"{value!r} is not a place to start: {_FORMS}")


def _timestamp(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 timestamp; write e.g. '2026-11-01T00:00:00Z'") from None
    if when.tzinfo is None or when.utcoffset() is None:
        local = text if re.search(r"\d[T ]\d", text) else text + "T00:00:00"
        raise ValueError(
            f"{text!r} has no timezone, so it names a different instant on every machine; add one, "
            f"e.g. '{local}Z' (UTC) or '{local}+01:00'"
        )
    if when < datetime(1970, 1, 1, tzinfo=UTC):
        raise ValueError(f"{text!r} is before 1970, before any Kafka record timestamp; write earliest")
    return when.astimezone(UTC)


def format_start_time(when: datetime) -> str:
    """UTC with `Z`, milliseconds only when there are any: `2026-11-01T00:00:00Z`."""
    when = when.astimezone(UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    millis = when.microsecond // 1000
    return text + (f".{millis:03d}" if millis else "") + "Z"


def is_time(start_from: str) -> bool:
    """Whether `start_from` names a time (a timestamp or a duration), resolved by offsets-for-times."""
    return start_from not in (EARLIEST, LATEST)


def is_duration(start_from: str) -> bool:
    """Whether `start_from` is a duration back from the job's first start (not a fixed timestamp)."""
    return is_time(start_from) and not _DATE_LIKE.match(start_from)


def start_time_ms(start_from: str, first_start: datetime) -> int | None:
    """The record timestamp (ms since the epoch) to start at; None for `earliest` and `latest`."""
    if not is_time(start_from):
        return None
    if is_duration(start_from):
        when = first_start - parse_duration(start_from)
    else:
        when = datetime.fromisoformat(start_from.replace("Z", "+00:00"))
    return max(0, int(when.timestamp() * 1000))


def describe_start(start_from: str) -> str:
    """Where a new flow starts, for the plan: `starts at the earliest offset of each partition`."""
    if start_from == EARLIEST:
        return "starts at the earliest offset of each partition"
    if start_from == LATEST:
        return "starts at the end of each partition (only records written from its first start on)"
    if is_duration(start_from):
        return (
            f"starts {start_from} back from its first start: the first record at or after that time in each "
            "partition (a partition with none starts at its end)"
        )
    return (
        f"starts at {start_from}: the first record at or after it in each partition (a partition with none "
        "starts at its end)"
    )


StartFrom = Annotated[
    str,
    BeforeValidator(parse_start_from),
    WithJsonSchema(
        {
            "anyOf": [
                {"enum": [EARLIEST, LATEST]},
                {"type": "string", "format": "date-time"},
                {"type": "string", "pattern": DURATION_PATTERN},
            ],
            "description": "earliest | latest | an ISO 8601 timestamp with a timezone (e.g. '2026-11-01T00:00:00Z') "
            "| a duration back from the job's first start (e.g. '7d').",
        }
    ),
]
