"""Consumer-group offsets for plan and apply: reading what the planner needs, writing what a change says.

`with_group_offsets` adds to a LiveState, for the flows that sync group offsets (or the ones asked for), the
source groups passing their group filters, the same groups on the target, and each flow's offset-syncs read to
the end. Source and target groups are read once per cluster, for all flows at once, in parallel.
`with_exact_offsets` adds, per flow, whether each committed offset translates exactly (the records after its
offset-sync read on both clusters and matched, `reconciler.adapters.record_ranges`, the decision
`reconciler.core.offsets.exact`) or conservatively, and why; `kmirror plan` and `kmirror cutover` both call it, so
they answer the same for the same records. It never fails: a read that cannot be made answers "exactness
unknown" with the reason. `write_group_offsets` writes one `group_offsets` change's `after` (the executor's
action). A target group that
an incomplete listing (a broker did not answer) left out is never taken as absent: it is left out of the plan,
with a warning naming it.

Must not: decide which offsets to write (the planner does) or write to a group the change does not name.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Protocol

from reconciler.adapters.record_ranges import translate_exactly
from reconciler.adapters.replication_lag import replication_lag
from reconciler.core.offsets.exact import ExactTranslation, exact_requests, unknown
from reconciler.core.offsets.history import SyncHistory
from reconciler.errors import Diagnostic
from reconciler.kafka_clients.admin import KafkaAdmin, Outcome
from reconciler.kafka_clients.offset_syncs import read_offset_syncs
from reconciler.live.model import GroupInfo, LiveState
from reconciler.live.selection import flow_source_groups
from reconciler.resources.addresses import group_offsets_address
from reconciler.spec.models import DesiredState, FlowSpec

EXACT_BUDGET = 10.0
"""Seconds `kmirror plan` spends reading records for the exact translation, all flows together."""


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
        cluster, topic = flow.syncs_location()
        return read_offset_syncs(desired.client_config(cluster), topic, timeout=timeout)

    with ThreadPoolExecutor(max_workers=4) as pool:
        sources = dict(zip(by_source, pool.map(source_groups, by_source), strict=True))
        stores = dict(zip((f.name for f in chosen), pool.map(syncs, chosen), strict=True))
        ids: dict[str, set[str]] = {}
        for f in chosen:
            ids.setdefault(f.target, set()).update(g for g in sources[f.source] if f.group_matches(g))
        listed = dict(zip(ids, pool.map(lambda c: admins[c].read_groups(ids[c].__contains__), ids), strict=True))

    targets = {c: listing for c, (listing, _) in listed.items()}
    warnings: list[Diagnostic] = []
    unknown: set[str] = set()  # groups whose target state is not known: nothing is planned for them
    for c, (listing, incomplete) in sorted(listed.items()):
        if incomplete is None:
            continue
        for g in sorted(ids[c] - set(listing)):
            unknown.add(g)
            warnings.append(
                Diagnostic.warning(
                    group_offsets_address(c, g),
                    f"the consumer groups of '{c}' could not all be listed ({incomplete}); "
                    "this group is not known to be absent there, so no offsets are written to it in this plan. "
                    "Plan again when every broker answers.",
                )
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


def with_exact_offsets(
    desired: DesiredState,
    live: LiveState,
    admins: Mapping[str, KafkaAdmin],
    flows: Iterable[FlowSpec] | None = None,
    timeout: float = 30.0,
    budget: float | None = EXACT_BUDGET,
) -> LiveState:
    """`live` with `exact_offsets`: per flow (that syncs group offsets, or the ones asked for), the exact or
    conservative translation of every committed offset of its source groups, and why.

    A partition the flow has not copied to its end stays conservative without being read ("the flow is still
    copying"); the others are read, within `budget` seconds for all flows (None: no budget, each read bounded
    by `timeout`; 0: nothing is read); what could not be read says "exactness unknown" and why. Needs
    `with_group_offsets` first.
    """
    if budget is not None and budget <= 0:
        return live  # not read: the planner's rows say so
    chosen = [f for f in desired.enabled_flows if f.sync.group_offsets] if flows is None else list(flows)
    deadline = None if budget is None else time.monotonic() + budget
    found: dict[str, tuple[ExactTranslation, ...]] = {}
    for flow in chosen:
        syncs = live.offset_syncs.get(flow.name)
        if not isinstance(syncs, SyncHistory):
            continue  # no offset-syncs: nothing translates, the planner warns
        heartbeats = flow.policy().heartbeats_topic()
        committed = {
            (t, p, g)
            for info in flow_source_groups(flow, live).values()
            for (t, p), g in info.offsets.items()
            if t != heartbeats and flow.topic_matches(t)
        }
        if not committed:
            continue
        left = None if deadline is None else deadline - time.monotonic()
        try:
            if left is not None and left <= 0:
                raise TimeoutError(f"not read: the time budget of {budget:g}s for reading records was spent")
            lag = replication_lag(
                desired,
                flow,
                admins[flow.source],
                syncs,
                timeout=min(timeout, 10.0) if left is None else max(0.1, min(timeout, 10.0, left)),
                partitions={(t, p) for t, p, _ in committed},
            )
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            translations = translate_exactly(
                committed,
                syncs,
                remote_topic=flow.remote_topic,
                source_config=desired.client_config(flow.source),
                target_config=desired.client_config(flow.target),
                offset_lag_max=flow.offsets.offset_lag_max,
                timeout=timeout,
                lag=lag,
                budget=left,
            )
        except Exception as exc:  # the plan never fails for it: the rows say why
            why = str(exc) if isinstance(exc, TimeoutError) else f"could not read the records: {exc}"
            translations = [unknown(r, why) for r in exact_requests(committed, syncs)]
        found[flow.name] = tuple(translations)
    return replace(live, exact_offsets={**live.exact_offsets, **found})


class OffsetWriter(Protocol):
    """The part of an admin that writes a group's offsets (`KafkaAdmin`, or a test's fake)."""

    cluster: str

    def alter_group_offsets(
        self,
        group: str,
        offsets: Mapping[tuple[str, int], int],
        metadata: Mapping[tuple[str, int], str] | None = None,
    ) -> Outcome: ...


def write_group_offsets(
    admin: OffsetWriter,
    group: str,
    offsets: Mapping[tuple[str, int], int],
    metadata: Mapping[tuple[str, int], str] | None = None,
) -> Outcome:
    """Commit a change's translated offsets (with their source metadata, per partition) for its group.

    The broker refuses a group that has members.
    """
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
