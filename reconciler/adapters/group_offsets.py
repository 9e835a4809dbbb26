"""Consumer-group offsets for plan and apply: reading what the planner needs, writing what a change says.

`with_group_offsets` adds to a LiveState, for the flows that sync group offsets (or the ones asked for), the
source groups passing their group filters, the same groups on the target, and each flow's offset-syncs read to
the end. Source and target groups are read once per cluster, for all flows at once, in parallel.
`write_group_offsets` writes one `group_offsets` change's `after` (the executor's action). A target group that
an incomplete listing (a broker did not answer) left out is never taken as absent: it is left out of the plan,
with a warning naming it.

Must not: decide which offsets to write (the planner does) or write to a group the change does not name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Protocol

from reconciler.adapters.checkpointer import syncs_location
from reconciler.adapters.kafka_admin import KafkaAdmin, Outcome
from reconciler.adapters.offset_syncs import read_offset_syncs
from reconciler.live.model import GroupInfo, LiveState
from reconciler.offsets.history import SyncHistory
from reconciler.spec.models import DesiredState, FlowSpec


def with_group_offsets(
    desired: DesiredState,
    live: LiveState,
    admins: Mapping[str, KafkaAdmin],
    flows: Iterable[FlowSpec] | None = None,
    timeout: float = 30.0,
) -> LiveState:
    chosen = [f for f in desired.enabled_flows if f.sync.group_offsets] if flows is None else list(flows)
    if not chosen:
        return live
    by_source: dict[str, list[FlowSpec]] = {}
    for f in chosen:
        by_source.setdefault(f.source, []).append(f)

    def source_groups(cluster: str) -> dict[str, GroupInfo]:
        wanted = by_source[cluster]
        return admins[cluster].groups(lambda g: any(f.group_matches(g) for f in wanted))

    def syncs(flow: FlowSpec) -> SyncHistory | None:
        cluster, topic = syncs_location(flow)
        return read_offset_syncs(desired.client_config(cluster), topic, timeout=timeout)

    with ThreadPoolExecutor(max_workers=4) as pool:
        sources = dict(zip(by_source, pool.map(source_groups, by_source), strict=True))
        stores = dict(zip((f.name for f in chosen), pool.map(syncs, chosen), strict=True))
        ids: dict[str, set[str]] = {}
        for f in chosen:
            ids.setdefault(f.target, set()).update(g for g in sources[f.source] if f.group_matches(g))
        listed = dict(zip(ids, pool.map(lambda c: admins[c].read_groups(ids[c].__contains__), ids), strict=True))

    targets = {c: listing for c, (listing, _) in listed.items()}
    warnings: list[str] = []
    unknown: set[str] = set()  # groups whose target state is not known: nothing is planned for them
    for c, (listing, incomplete) in sorted(listed.items()):
        if incomplete is None:
            continue
        for g in sorted(ids[c] - set(listing)):
            unknown.add(g)
            warnings.append(
                f"group_offsets/{c}/{g}: the consumer groups of '{c}' could not all be listed ({incomplete}); "
                "this group is not known to be absent there, so no offsets are written to it in this plan. "
                "Plan again when every broker answers."
            )
    if unknown:
        sources = {c: {g: i for g, i in gs.items() if g not in unknown} for c, gs in sources.items()}

    clusters = dict(live.clusters)
    for name in set(sources) | set(targets):
        groups = {**sources.get(name, {}), **targets.get(name, {})}
        clusters[name] = replace(clusters[name], groups={**clusters[name].groups, **groups})
    found = {n: s for n, s in stores.items() if s is not None}
    return replace(
        live,
        clusters=clusters,
        offset_syncs={**live.offset_syncs, **found},
        warnings=(*live.warnings, *warnings),
    )


class OffsetWriter(Protocol):
    """The part of an admin that writes a group's offsets (`KafkaAdmin`, or a test's fake)."""

    cluster: str

    def alter_group_offsets(
        self,
        group: str,
        offsets: Mapping[tuple[str, int], int],
        metadata: Mapping[tuple[str, int], str] | None = None,
    ) -> Outcome: ...


def write_group_offsets(admin: OffsetWriter, form: Mapping[str, Any]) -> Outcome:
    """Commit a change's translated offsets (with their source metadata) for its group.

    The broker refuses a group that has members.
    """
    group = str(form["group"])
    rows = form.get("partitions", ())
    offsets = {(str(r["topic"]), int(r["partition"])): int(r["target_offset"]) for r in rows}
    metadata = {(str(r["topic"]), int(r["partition"])): str(r["metadata"]) for r in rows if r.get("metadata")}
    if not offsets:
        return Outcome(group, True, "nothing to write", already_done=True)
    outcome = admin.alter_group_offsets(group, offsets, metadata)
    if not outcome.ok and not outcome.transient and _is_active(outcome.message):
        return Outcome(
            outcome.key,
            False,
            f"consumer group '{group}' has members on cluster '{admin.cluster}'; offsets are only written to "
            f"EMPTY groups. Stop its consumers there and apply again ({outcome.message})",
        )
    return outcome


def _is_active(message: str) -> bool:
    return any(code in message for code in ("UNKNOWN_MEMBER_ID", "NON_EMPTY_GROUP", "GROUP_SUBSCRIBED"))
