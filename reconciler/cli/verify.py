"""`kmirror verify`: prove, record by record, that a flow's target holds what its source holds.

Parses the options, runs `reconciler.verify.run.verify` and renders its report; decides nothing itself.
Exit codes: 0 every checked record matches; 1 a mismatch, or an error; 2 with --detailed-exitcode when nothing is
wrong but some records could not be verified (in flight, before the oldest offset-sync, compacted).

Must not: read or compare records itself, or print a record's content (the report carries offsets and digests).
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from pathlib import Path

import click

from reconciler.cli.options import file_option
from reconciler.spec import load
from reconciler.spec.durations import parse_duration
from reconciler.verify.run import Selection, VerifyError
from reconciler.verify.run import verify as run_verify


def _since(text: str) -> tuple[int, str]:
    """`--since`: an ISO 8601 time (`2026-11-27T08:00:00Z`) or a duration back from now (`2h`, `7d`)."""
    try:
        return int((time.time() - parse_duration(text).total_seconds()) * 1000), f"the last {text}"
    except ValueError:
        pass
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise VerifyError(
            f"--since {text!r} is neither an ISO 8601 time (e.g. 2026-11-27T08:00:00Z) nor a duration (e.g. 2h, 7d)"
        ) from None
    if at.tzinfo is None:
        raise VerifyError(f"--since {text!r} has no time zone; add one (e.g. {text}Z for UTC)")
    return int(at.timestamp() * 1000), f"since {text}"


@click.command("verify")
@file_option
@click.option("--flow", "flow_name", required=True, help="The flow whose copy to verify.")
@click.option("--topics", default=None, help="Only source topics this regex matches (whole names).")
@click.option("--since", default=None, help="Only records since a time (ISO 8601) or for a duration back (2h, 7d).")
@click.option("--last", type=click.IntRange(min=1), default=None, help="Only the last N offsets of each partition.")
@click.option(
    "--sample",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=1.0,
    show_default=True,
    help="Check this fraction of the segments between offset-syncs (chosen by hash: the same on every run).",
)
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "json"]), default="text", show_default=True)
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the report to this file.")
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 2 when nothing mismatches but some records could not be verified (0 only when complete).",
)
@click.option(
    "--max-records-per-second",
    type=click.IntRange(min=1),
    default=None,
    help="Read at most this many records a second from each cluster (safe against production).",
)
@click.option("--timeout", default=30.0, show_default=True, help="Seconds a single read or admin request may take.")
@click.option(
    "--engine",
    type=click.Choice(["python", "spark"]),
    default="python",
    show_default=True,
    help="python: scan the partitions one after the other in this process; spark: one Spark task per partition, "
    "on the flow's Spark settings (spark.master, spark.conf), in parallel.",
)
def verify(
    path: str,
    flow_name: str,
    topics: str | None,
    since: str | None,
    last: int | None,
    sample: float,
    fmt: str,
    out: Path | None,
    detailed_exitcode: bool,
    max_records_per_second: int | None,
    timeout: float,
    engine: str,
) -> None:
    """Compare every replicated record of a flow on both clusters: key, value, headers, timestamp, in order.

    Each source partition's range (everything still on the source, --since a time, or the --last N offsets) is
    placed on the target through the flow's offset-syncs and read on both sides (read_committed, no consumer
    group, up to the target's committed end). Records are reported missing, duplicated, reordered, different
    (the field and a digest of each side, never the content), unexpected, or unverifiable (in flight, before the
    oldest offset-sync, compacted).

    \b
    Examples:
      kmirror verify -f kmirror.yaml --flow onprem-to-cloud                       # everything
      kmirror verify -f kmirror.yaml --flow onprem-to-cloud --since 24h --sample 0.1
      kmirror verify -f kmirror.yaml --flow onprem-to-cloud --format markdown -o verify.md --detailed-exitcode
    """
    if since is not None and last is not None:
        raise VerifyError("--since and --last choose the range two ways; pass one of them")
    selection = Selection()
    if since is not None:
        at, label = _since(since)
        selection = Selection(since_ms=at, label=label)
    elif last is not None:
        selection = Selection(last=last, label=f"the last {last} offsets of each partition")
    desired = load(path).state
    report = run_verify(
        desired,
        flow_name,
        topics=topics,
        selection=selection,
        sample=sample,
        max_records_per_second=max_records_per_second,
        timeout=timeout,
        engine="spark" if engine == "spark" else "python",
    )
    if fmt == "json":
        text = json.dumps(report.to_json(), indent=2, sort_keys=True)
    elif fmt == "markdown":
        text = report.to_markdown()
    else:
        text = report.to_text()
    if out is not None:
        out.write_text(text + "\n")
        click.echo(f"{report.verdict()} (report written to {out})")
    else:
        click.echo(text)
    sys.exit(report.exit_code(detailed_exitcode))
