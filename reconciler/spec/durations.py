"""Durations in the desired state: `"500ms"`, `"10s"`, `"1m30s"`, `"2h"`, or a bare number of seconds.

Parsed into `datetime.timedelta`, dumped back in the shortest exact unit form, so a file round-trips. A duration
longer than `MAX_DURATION`, or not finite (`1e999`, `.nan`), is a located error, never an OverflowError.
Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
DURATION_PATTERN = r"^(\d+(\.\d+)?(ms|s|m|h|d))+$"
MAX_DURATION = timedelta(days=3650)
"""Ten years: longer is a typo (and past what `timedelta` and the job's Java longs hold)."""


def parse_duration(value: Any) -> timedelta:
    """`"1m30s"` -> 90 s. Raises ValueError with a user-facing message."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{value!r} is not a duration")
        if value < 0:
            raise ValueError(f"a duration cannot be negative (got {value})")
        return _bounded(value * 1000 if value < 1e300 else math.inf, value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration")
    text = value.strip().replace(" ", "")
    if not text or not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError(f"{value!r} is not a duration")
    total_ms = 0.0
    for number, unit in _PART.findall(text):
        total_ms += float(number) * _UNITS_MS[unit]
    return _bounded(total_ms, value)


def _bounded(total_ms: float, written: object) -> timedelta:
    if not math.isfinite(total_ms) or total_ms > MAX_DURATION.total_seconds() * 1000:
        shown = repr(written) if len(repr(written)) <= 40 else repr(written)[:37] + "..."
        raise ValueError(f"{shown} is longer than any duration kmirror takes (at most {MAX_DURATION.days}d)")
    return timedelta(milliseconds=total_ms)


def format_duration(value: timedelta) -> str:
    """90 s -> `"90s"`, 0.5 s -> `"500ms"`: the largest unit that divides exactly, so parsing gives it back."""
    total_ms = round(value.total_seconds() * 1000)
    for unit in ("d", "h", "m", "s"):
        size = _UNITS_MS[unit]
        if total_ms and total_ms % size == 0:
            return f"{total_ms // size}{unit}"
    return f"{total_ms}ms"


Duration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": DURATION_PATTERN},
                {"type": "number", "minimum": 0},
            ],
            "description": "A duration: '500ms', '10s', '1m30s', '2h', or a number of seconds.",
        }
    ),
]
