"""What a job change does to the other flows of its Spark application (`spark.application`), in words for the plan.

Flows of one application run as queries of one driver: a change to one flow's spec restarts only its query, a
change to the application's own settings (the Spark section: master, memory, conf, version) redeploys the driver and
restarts every flow's query. Display only: the executor never reads it (the runner works out the same from the
digests it is given). Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from reconciler.spec.models import DesiredState, FlowSpec


def members(desired: DesiredState, application: str) -> list[str]:
    """The enabled flows that run in `application`, by name."""
    return sorted(f.name for f in desired.enabled_flows if desired.application_of(f) == application)


def _names(flows: list[str]) -> str:
    if len(flows) == 1:
        return f"flow {flows[0]}"
    return "flows " + ", ".join(flows[:-1]) + f" and {flows[-1]}"


def _settings(spec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    spark = (spec or {}).get("spark")
    if not isinstance(spark, Mapping):
        return None
    return {k: v for k, v in spark.items() if k != "application"}


def application_effect(
    desired: DesiredState,
    flow: FlowSpec,
    operation: str,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any],
    down: Collection[str] = (),
) -> str:
    """`; in application X: flow b restarts, flows a and c keep running` (or the application redeploys); "" for a
    flow in an application of its own. `down`: the flows whose jobs the runner reports not running (a restart after
    the application's driver died restarts them all, and none of them keeps running)."""
    application = desired.application_of(flow)
    if application is None:
        return ""
    everyone = members(desired, application)
    others = [name for name in everyone if name != flow.name and name not in down]
    keep = f", {_names(others)} keep{'s' if len(others) == 1 else ''} running" if others else ""
    if operation == "restart" and flow.name in down:
        stopped = [name for name in everyone if name == flow.name or name in down]
        if len(stopped) == len(everyone) and len(everyone) > 1:
            restart = f"{_names(everyone)} restart, each on its checkpoint"
            return f"; application {application} runs none of its flows: {restart}"
        verb = "restarts" if len(stopped) == 1 else "restart"
        return f"; in application {application}: {_names(stopped)} {verb}{keep}"
    if operation == "deploy":
        return f"; starts as a query of application {application}{keep}"
    previous = (before or {}).get("spark")
    moved_in = isinstance(previous, Mapping) and previous.get("application") != application
    if operation == "redeploy" and not moved_in and _settings(before) != _settings(after):
        return f"; application {application} redeploys (its Spark settings changed): {_names(everyone)} restart"
    if moved_in:
        return f"; moves into application {application} on its checkpoint{keep}"
    return f"; in application {application}: flow {flow.name} restarts{keep}"


def stop_effect(desired: DesiredState, flow: str, last_spec: Mapping[str, Any] | None) -> str:
    """`; only its query in application X stops, flows a and c keep running` for a stopped flow that ran in an
    application (as the state recorded it); "" otherwise."""
    spark = (last_spec or {}).get("spark")
    application = spark.get("application") if isinstance(spark, Mapping) else None
    if not isinstance(application, str):
        return ""
    others = [name for name in members(desired, application) if name != flow]
    keep = f", {_names(others)} keep{'s' if len(others) == 1 else ''} running" if others else ""
    return f"; only its query in application {application} stops{keep}"
