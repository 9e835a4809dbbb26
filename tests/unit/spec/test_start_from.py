"""`replication.start_from`: earliest, latest, a timestamp with a timezone or a duration back from the job's first
start; anything else is one located error with what to write instead, and the same start written two ways is one
flow digest."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli.main import main
from reconciler.spec import SpecError, load_text
from reconciler.spec.start import describe_start, start_time_ms
from tests.unit.spec.test_bad_inputs import flow

pytestmark = pytest.mark.unit


def start_from(value: str) -> str:
    return load_text(flow(f"replication: {{start_from: {value}}}")).state.flows[0].replication.start_from


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("earliest", "earliest"),
        ("latest", "latest"),
        ("Latest", "latest"),
        ("'2026-11-01T00:00:00Z'", "2026-11-01T00:00:00Z"),
        ("2026-11-01T00:00:00Z", "2026-11-01T00:00:00Z"),  # unquoted: kmirror's YAML keeps timestamps as text
        ("'2026-11-01T02:00:00+02:00'", "2026-11-01T00:00:00Z"),
        ("'2026-11-01T00:00:00.250Z'", "2026-11-01T00:00:00.250Z"),
        ("7d", "7d"),
        ("168h", "7d"),
        ("90m", "90m"),
        ("1h30m", "90m"),
    ],
)
def test_a_start_is_kept_in_one_canonical_form(written: str, kept: str) -> None:
    assert start_from(written) == kept


def test_the_same_instant_written_two_ways_is_one_flow_digest() -> None:
    utc = load_text(flow("replication: {start_from: '2026-11-01T00:00:00Z'}")).state
    paris = load_text(flow("replication: {start_from: '2026-11-01T01:00:00+01:00'}")).state
    other = load_text(flow("replication: {start_from: '2026-11-01T00:00:01Z'}")).state
    assert utc.flow_digest("a-to-b") == paris.flow_digest("a-to-b") != other.flow_digest("a-to-b")


def test_earliest_keeps_the_digest_it_had() -> None:
    """An existing flow's digest must not move (a moved digest redeploys every running job on upgrade)."""
    plain = load_text(flow("topics: {include: [x]}")).state
    said = load_text(flow("topics: {include: [x]}", "replication: {start_from: earliest}")).state
    assert plain.flow_digest("a-to-b") == said.flow_digest("a-to-b")
    assert plain.flows[0].replication.model_dump()["start_from"] == "earliest"


@pytest.mark.parametrize(
    ("written", "fragments"),
    [
        ("beginning", ["'beginning' is not a place to start", "earliest, latest", "'2026-11-01T00:00:00Z'", "'7d'"]),
        ("'2026-11-01T00:00:00'", ["has no timezone", "'2026-11-01T00:00:00Z' (UTC)"]),
        ("2026-11-01", ["has no timezone", "'2026-11-01T00:00:00Z' (UTC)"]),
        ("'2026-13-01T00:00:00Z'", ["is not an ISO 8601 timestamp", "write e.g. '2026-11-01T00:00:00Z'"]),
        ("'1969-12-31T00:00:00Z'", ["before 1970", "write earliest"]),
        ("0s", ["is no time back", "write latest"]),
        ("12", ["12 is not a place to start", "'7d'"]),
        ("7 days", ["'7 days' is not a place to start"]),
        ("[7d]", ["is not a place to start"]),
    ],
)
def test_a_bad_start_is_a_located_error_that_says_what_to_write(written: str, fragments: list[str]) -> None:
    with pytest.raises(SpecError) as caught:
        load_text(flow(f"replication: {{start_from: {written}}}"))
    message = str(caught.value)
    assert ":10:" in message, message
    assert "flows[0].replication.start_from" in message
    for fragment in fragments:
        assert fragment in message, message


def test_the_cli_refuses_a_bad_start_with_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "kmirror.yaml"
    path.write_text(flow("replication: {start_from: '2026-11-01 00:00'}"))
    result = CliRunner().invoke(main, ["validate", "-f", str(path)])
    assert result.exit_code == 1
    assert "kmirror.yaml:10:" in result.output and "has no timezone" in result.output


def test_a_timestamp_is_its_own_time_and_a_duration_counts_back_from_the_first_start() -> None:
    first_start = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    assert start_time_ms("2026-11-01T00:00:00Z", first_start) == 1_793_491_200_000
    assert start_time_ms("2026-11-01T00:00:00.250Z", first_start) == 1_793_491_200_250
    assert start_time_ms("7d", first_start) == int(datetime(2026, 11, 20, 12, 0, tzinfo=UTC).timestamp() * 1000)
    assert start_time_ms("earliest", first_start) is None and start_time_ms("latest", first_start) is None


def test_the_plan_says_where_a_time_start_begins() -> None:
    assert describe_start("2026-11-01T00:00:00Z").startswith(
        "starts at 2026-11-01T00:00:00Z: the first record at or after it in each partition"
    )
    assert describe_start("7d").startswith("starts 7d back from its first start")
