"""`flows[].replication.throttle`: the forms a user writes, and a located error saying what to write otherwise."""

from __future__ import annotations

import pytest

from reconciler.spec import SpecError, load_text
from reconciler.spec.byte_rates import format_byte_rate, parse_byte_rate

pytestmark = pytest.mark.unit

HEAD = """version: 1
clusters:
  a: {bootstrap_servers: "a:9092"}
  b: {bootstrap_servers: "b:9092"}
state: {cluster: b}
flows:
  - name: a-to-b
    source: a
    target: b
"""


def _throttle(value: str) -> int | None:
    return load_text(HEAD + f"    replication: {{throttle: {value}}}\n").state.flows[0].replication.throttle


@pytest.mark.parametrize(
    ("written", "bytes_per_second"),
    [
        ("10MB", 10_000_000),  # 1000-based, as a network rate is read
        ("'10 MB/s'", 10_000_000),
        ("512KB", 512_000),
        ("1.5GB", 1_500_000_000),
        ("20MiB", 20 * 1024 * 1024),  # 1024-based when asked for
        ("64KiB", 65_536),
        ("1000000", 1_000_000),  # a number alone is bytes
        ("'2500B'", 2500),
    ],
)
def test_throttle_forms(written: str, bytes_per_second: int) -> None:
    assert _throttle(written) == bytes_per_second


def test_no_throttle_by_default() -> None:
    assert load_text(HEAD).state.flows[0].replication.throttle is None


def test_a_throttle_dumps_back_to_what_parses_to_it() -> None:
    for value in (10_000_000, 20 * 1024 * 1024, 1500, 1, 3_000_000_000):
        assert parse_byte_rate(format_byte_rate(value)) == value
    assert format_byte_rate(10_000_000) == "10MB"


@pytest.mark.parametrize(
    ("written", "fragment"),
    [
        ("10mb", "'10mb' is not a byte rate"),  # megabits? refused, not guessed
        ("ten", "'ten' is not a byte rate"),
        ("0", "above zero"),
        ("-5MB", "is not a byte rate"),
        ("1.5B", "not a whole number of bytes per second"),
        ("true", "is not a byte rate"),
        ("5000GB", "at most 1000GB per second"),
    ],
)
def test_a_bad_throttle_is_a_located_error_saying_what_to_write(written: str, fragment: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_text(HEAD + f"    replication: {{throttle: {written}}}\n", file="kmirror.yaml")
    [issue] = [i for i in caught.value.errors if fragment in str(i)]
    assert str(issue).startswith("kmirror.yaml:10:")
    assert "throttle" in str(issue)
    if "at most" not in fragment:
        assert "e.g. '10MB'" in str(issue)
