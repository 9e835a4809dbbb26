"""Spark interval texts as kmirror's settings take them (`250ms`, `2s`, `10 seconds`). Pure."""

from __future__ import annotations

import re

_SHORT_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*$")


def trigger_interval(text: str) -> str:
    """Spark's interval text, also from the short forms `250ms` and `2s`; anything else is passed on as is."""
    m = _SHORT_INTERVAL.match(text)
    if m is None:
        return text
    return f"{m.group(1)} {'milliseconds' if m.group(2) == 'ms' else 'seconds'}"


def interval_seconds(text: str) -> float | None:
    """Seconds of Spark's interval text `N milliseconds|seconds|minutes`; None for any other text."""
    parts = text.split()
    units = {"millisecond": 0.001, "second": 1.0, "minute": 60.0, "hour": 3600.0}
    if len(parts) != 2 or parts[1].rstrip("s") not in units:
        return None
    try:
        return float(parts[0]) * units[parts[1].rstrip("s")]
    except ValueError:
        return None
