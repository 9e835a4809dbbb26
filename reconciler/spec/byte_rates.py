"""Byte rates in the desired state: `"10MB"`, `"512KB"`, `"1.5GB"`, `"20MiB"`, or a bare number of bytes (per second).

A flow's `replication.throttle` is one: the most bytes per second its job may fetch from the source and produce to
the target, enforced as Kafka client quotas (`consumer_byte_rate`, `producer_byte_rate`, both bytes per second).
`B`, `KB`, `MB`, `GB` are 1000-based (SI, as a network rate is read: `10MB` is 10,000,000 bytes per second);
`KiB`, `MiB`, `GiB` are 1024-based for those who count that way. A trailing `/s` is accepted. Units are written as
listed (`mb` could be megabits: it is refused, not guessed). Parsed into a whole number of bytes per second, dumped
back in the largest unit that divides it exactly, so a file round-trips.

Pure: no I/O. Must not: accept a rate of zero or below (a quota of 0 stops the flow), or a fraction of a byte.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

UNITS = {"B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
BYTE_RATE_PATTERN = r"^\d+(\.\d+)?\s*(B|KB|MB|GB|KiB|MiB|GiB)?(/s)?$"
_PARTS = re.compile(r"(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>B|KB|MB|GB|KiB|MiB|GiB)?(?:/s)?")
#: 1 TB/s: more is a typo (and past what a broker's quota is meant for).
MAX_BYTE_RATE = 1000**4
HOW_TO_WRITE = (
    "write bytes per second as a whole number (10000000) or with a unit: B, KB, MB, GB (1000-based) or "
    "KiB, MiB, GiB (1024-based), e.g. '10MB'"
)


def parse_byte_rate(value: Any) -> int:
    """`"10MB"` -> 10_000_000. Raises ValueError with a user-facing message saying what to write."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{_shown(value)} is not a byte rate: {HOW_TO_WRITE}")
    if isinstance(value, int | float):
        number, unit = float(value), "B"
    else:
        match = _PARTS.fullmatch(value.strip())
        if match is None:
            raise ValueError(f"{_shown(value)} is not a byte rate: {HOW_TO_WRITE}")
        number, unit = float(match["number"]), match["unit"] or "B"
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{_shown(value)} is not a byte rate above zero: {HOW_TO_WRITE}")
    exact = number * UNITS[unit]
    if exact > MAX_BYTE_RATE:
        raise ValueError(f"{_shown(value)} is more than kmirror takes (at most 1000GB per second)")
    if exact != math.floor(exact):
        raise ValueError(f"{_shown(value)} is not a whole number of bytes per second: {HOW_TO_WRITE}")
    return int(exact)


def format_byte_rate(value: int) -> str:
    """10_000_000 -> `"10MB"`, 1_048_576 -> `"1MiB"`, 1500 -> `"1500B"`: exact, so parsing gives it back."""
    for unit in ("GB", "GiB", "MB", "MiB", "KB", "KiB"):
        if value % UNITS[unit] == 0:
            return f"{value // UNITS[unit]}{unit}"
    return f"{value}B"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


ByteRate = Annotated[
    int,
    BeforeValidator(parse_byte_rate),
    PlainSerializer(format_byte_rate, return_type=str),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": BYTE_RATE_PATTERN},
                {"type": "integer", "exclusiveMinimum": 0},
            ],
            "description": "Bytes per second: '10MB', '512KB', '1GB' (1000-based), '20MiB' (1024-based), or a "
            "whole number of bytes.",
        }
    ),
]
