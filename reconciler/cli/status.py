"""`kmirror status -f FILE [--flow NAME] [--format text|json] [--watch] [--timeout SECONDS]`.

Every cluster the chosen flows use is asked for its metadata first, all at once: a cluster that does not
answer within `--timeout` is an error naming it (exit 1), not a status of empty lags. With `--format json` a
failure prints the error document of `diagnostics.py`.

Must not: change a cluster or a job; exit 0 when a cluster did not answer.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import click

from reconciler.app.flow_status import FlowStatus, status_of
from reconciler.cli.diagnostics import json_errors, located_in
from reconciler.cli.options import file_option
from reconciler.errors import KmirrorError, ManyErrors
from reconciler.spec import load
from reconciler.spec.models import DesiredState


@click.command("status")
@file_option
@click.option("--flow", "flows", multiple=True, help="Only this flow (repeatable).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--watch", type=float, default=None, metavar="SECONDS", help="Refresh every SECONDS until Ctrl-C.")
@click.option(
    "--timeout", type=float, default=15.0, show_default=True, metavar="SECONDS", help="Seconds to wait per cluster."
)
@click.pass_context
@json_errors()
def status(
    ctx: click.Context, path: str, flows: tuple[str, ...], fmt: str, watch: float | None, timeout: float
) -> None:
    """Per flow: job state, throughput, lag per topic and partition, heartbeat age, cutover verdict.

    \b
    Examples:
      kmirror status -f kmirror.yaml
      kmirror status -f kmirror.yaml --flow onprem-to-cloud --format json
      kmirror status -f kmirror.yaml --watch 2          # watch lag go to zero
      kmirror status -f kmirror.yaml --timeout 5        # exit 1 if a cluster does not answer in 5 s
    """
    loaded = load(path)
    desired = loaded.state
    color = sys.stdout.isatty() and not (ctx.obj or {}).get("no_color")
    while True:
        with located_in(loaded):
            require_reachable(desired, _clusters_of(desired, flows), timeout)
        statuses = status_of(desired, list(flows), timeout=timeout)
        if fmt == "json":
            click.echo(json.dumps({"ok": True, "flows": [s.to_json() for s in statuses]}, indent=2))
        else:
            click.echo(render(statuses, color), nl=False)
        if watch is None:
            return
        time.sleep(watch)
        if fmt == "text":
            click.echo()


def _clusters_of(desired: DesiredState, flows: tuple[str, ...]) -> list[str]:
    names: set[str] = set()
    for flow in desired.enabled_flows:
        if not flows or flow.name in flows:
            names.update((flow.source, flow.target))
    return sorted(names)


def require_reachable(desired: DesiredState, clusters: list[str], timeout: float) -> None:
    """Ask every cluster for its metadata in parallel; raise naming each one that did not answer in `timeout`."""
    from reconciler.kafka_clients.admin import KafkaAdmin

    def probe(name: str) -> KmirrorError | None:
        try:
            KafkaAdmin(name, desired.client_config(name), timeout).topics()
        except KmirrorError as exc:
            return exc
        return None

    if not clusters:
        return
    with ThreadPoolExecutor(max_workers=len(clusters), thread_name_prefix="kmirror-status-probe") as pool:
        failed = [e for e in pool.map(probe, clusters) if e is not None]
    if len(failed) == 1:
        raise failed[0]
    if failed:
        raise ManyErrors(failed)


def render(statuses: list[FlowStatus], color: bool) -> str:
    out: list[str] = []
    for s in statuses:
        state = click.style(s.job_state, fg="green" if s.running else "red") if color else s.job_state
        where = f"{s.runner} {s.application}" if s.application else s.runner
        out.append(f"flow {s.flow}  {s.source} -> {s.target}  job: {state} ({where})")
        facts = []
        if s.records is not None:
            facts.append(f"{s.records:,} records copied")
        if s.records_per_s is not None:
            facts.append(f"{s.records_per_s:,.0f} records/s average")
        if s.seconds_since_last_batch is not None:
            facts.append(f"last batch {s.seconds_since_last_batch:.0f}s ago")
        if s.heartbeat_age_ms is not None:
            facts.append(f"newest heartbeat on target {s.heartbeat_age_ms / 1000:.1f}s old")
        if s.restarts:
            facts.append(f"{s.restarts} restart(s)" + (f", last error: {s.last_error}" if s.last_error else ""))
        if s.data_loss_records:
            facts.append(f"{s.data_loss_records:,} records deleted on the source before they were copied")
        if s.fenced_writers:
            facts.append(
                f"another writer of this flow (an older deployment or a stray task) fenced its exactly-once writers "
                f"{s.fenced_writers:,} time(s): stop it"
            )
        if s.superseded_by:
            facts.append(f"stopped for good: superseded by generation {s.superseded_by} of the flow")
        if facts:
            out.append("  " + ", ".join(facts))
        if s.mode:
            slots = f", {s.task_slots} task slots" if s.task_slots else ""
            mode = "real-time mode" if s.mode == "realtime" else "micro-batch mode"
            delivery = f", {s.delivery.replace('_', '-')} delivery" if s.delivery else ""
            why = f" ({s.mode_reason}{slots})" if s.mode_reason else slots
            out.append(f"  {mode}{why}{delivery}")
        if s.metrics_url:
            out.append(f"  metrics (Prometheus): {s.metrics_url}")
        if s.log and (not s.running or s.last_error):
            out.append(f"  log: {s.log}")
        if s.lag:
            lagging = {t: parts for t, parts in s.lag.items() if any(parts.values())}
            if lagging:
                width = max(len(t) for t in lagging)
                out.append(f"  {'topic':<{width}}  {'lag':>10}  lagging partitions")
                for topic, parts in lagging.items():
                    detail = " ".join(f"{p}:{n:,}" for p, n in parts.items() if n)
                    out.append(f"  {topic:<{width}}  {sum(parts.values()):>10,}  {_clip(detail, 80)}")
            caught_up = len(s.lag) - len(lagging)
            if caught_up:
                out.append(f"  {caught_up:,} topic{'s' if caught_up != 1 else ''} at lag 0")
        for group, f in sorted(s.failover.items()):
            if f.translatable:
                pieces = " ".join(f"{p.topic}/{p.partition}:{p.rereads:,}" for p in f.partitions if p.rereads)
                found = f" ({_clip(pieces, 80)})" if pieces else ""
                out.append(f"  failover: group {group} would re-read {f.rereads or 0:,} records on {s.target}{found}")
            else:
                stuck = " ".join(f"{p.topic}/{p.partition}" for p in f.partitions if p.rereads is None)
                out.append(f"  failover: group {group} cannot move yet: not translatable ({_clip(stuck, 80)})")
        if s.verdict:
            text = _clip(s.verdict, 160)
            verdict = click.style(text, fg="green" if s.ready else "yellow") if color else text
            out.append(f"  cutover: {verdict}")
        for p in s.problems:
            out.append(f"  ! {p}")
        out.append("")
    return "\n".join(out) + ("\n" if out else "No enabled flow.\n")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 5] + " ...)"
