"""Planning of `group_offsets/<target>/<group>` changes: translated consumer offsets to write into the target.

For every flow that syncs group offsets (`sync.group_offsets`, or the flows `cutover` names), each source group
passing the flow's group filter with committed offsets on replicated topics is translated with the flow's
offset-syncs (MM2's conservative rule, `reconciler.core.offsets`). A change lists, per partition, the source offset,
the translated target offset and the target group's current one, for the partitions that would move forward
or that the target group has no offset for yet (with the metadata string the source group committed, when it
is not empty: MM2 carries it in its checkpoints and writes it with the offset); a partition where the target
group is already at or past the translation is left alone (a target group never moves backwards). Only groups
EMPTY on the target (or absent there) are written; a group with members on the target whose offsets would
change is a plan error naming it.

Exact or conservative: the live state carries, per flow, each committed offset's exact translation where the
records prove it (`LiveState.exact_offsets`, decided by `reconciler.core.offsets.exact` on the records the adapter
read). A partition translated exactly is written at its exact offset; the others at MM2's. Each partition says
`translation` (`exact`, `conservative`, or `unknown` when the records could not be read, MM2's offset then),
`conservative_offset` (MM2's answer) and, when not exact, `why`; each change says the same for the group
(`exact`, `conservative`, `mixed` or `unknown`). `kmirror cutover` plans with this same function, so the plan and
the cutover give the same answer for the same records.

Pure: values in, values out; the live reader supplies the groups, the offset-syncs and the exact translations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reconciler.core.offsets.checkpoints import WRITABLE_STATES, Translator, translate_group
from reconciler.core.offsets.exact import ExactTranslation, ExactTranslator
from reconciler.errors import Diagnostic
from reconciler.live.model import LiveState
from reconciler.live.selection import flow_source_groups
from reconciler.plan.definition import Action, GroupOffsetsChange
from reconciler.plan.forms import GroupOffsetsForm, OffsetRow
from reconciler.plan.topics import TopicPlan
from reconciler.resources.addresses import group_offsets_address, job_address
from reconciler.spec.models import DesiredState, FlowSpec


def group_offset_flows(desired: DesiredState) -> list[FlowSpec]:
    """The enabled flows whose group offsets `kmirror plan` manages."""
    return [f for f in desired.enabled_flows if f.sync.group_offsets]


def plan_group_offsets(desired: DesiredState, live: LiveState, *, flows: Iterable[FlowSpec] | None = None) -> TopicPlan:
    out = TopicPlan()
    for flow in group_offset_flows(desired) if flows is None else flows:
        _plan_flow(flow, live, out)
    return out


def _plan_flow(flow: FlowSpec, live: LiveState, out: TopicPlan) -> None:
    groups = flow_source_groups(flow, live)
    if not groups:
        return
    store = live.offset_syncs.get(flow.name)
    if store is None:
        out.warnings.append(
            Diagnostic.warning(
                job_address(flow.name),
                f"no offset-syncs to read yet, so the offsets of {len(groups)} consumer group(s) "
                "cannot be translated; they are planned once the replication job has copied records",
            )
        )
        return
    target = live.clusters[flow.target].groups
    verdicts = live.exact_offsets.get(flow.name)
    exact = ExactTranslator(store, verdicts) if verdicts is not None else None
    translator: Translator = exact if exact is not None else store
    for group, info in groups.items():
        rows = translate_group(info.offsets, translator, remote_topic=flow.remote_topic, replicated=flow.topic_matches)
        current = target.get(group)
        have: Mapping[tuple[str, int], int] = current.offsets if current is not None else {}
        moving: list[OffsetRow] = []
        untranslated = 0
        for r in rows:
            if r.target_offset is None:
                untranslated += 1
                continue
            now = have.get((r.target_topic, r.partition))
            if now is not None and now >= r.target_offset:
                continue
            row: dict[str, str | int | None] = {
                "topic": r.target_topic,
                "partition": r.partition,
                "source_topic": r.source_topic,
                "source_offset": r.source_offset,
                "target_offset": r.target_offset,
                "current_offset": now,
            }
            meta = info.metadata.get((r.source_topic, r.partition))
            if meta:
                row["metadata"] = meta  # the source commit's metadata string, written with the offset
            found = exact.get(r.source_topic, r.partition, r.source_offset) if exact is not None else None
            row.update(translation_of(found, r.target_offset, read=verdicts is not None))
            moving.append(OffsetRow.model_validate(row))
        address = group_offsets_address(flow.target, group)
        if untranslated:
            out.warnings.append(
                Diagnostic.warning(
                    address,
                    f"{untranslated} partition(s) have no offset-sync at or below the committed offset yet "
                    "and are not written (replication has not reached them)",
                )
            )
        if not moving:
            continue
        if current is not None and current.state not in WRITABLE_STATES:
            out.errors.append(
                Diagnostic.error(
                    address,
                    f"consumer group '{group}' is active on cluster '{flow.target}' (state {current.state}) "
                    f"and {len(moving)} of its partition offsets would move; kmirror only writes offsets of groups "
                    f"that are EMPTY on the target. Stop its consumers on '{flow.target}' (or leave the group out "
                    f"with the flow's groups.exclude), then plan again.",
                )
            )
            continue
        verdict, summary = group_translation(moving)
        before = None
        if have:
            moved = {(m.topic, m.partition) for m in moving}
            before = GroupOffsetsForm(
                cluster=flow.target,
                group=group,
                flow=flow.name,
                source_cluster=flow.source,
                partitions=tuple(
                    OffsetRow(topic=t, partition=p, current_offset=o)
                    for (t, p), o in sorted(have.items())
                    if (t, p) in moved
                ),
            )
        forward = sum(1 for m in moving if m.current_offset is not None)
        reason = (
            f"translated from {flow.source}: {len(moving) - forward} partition(s) new, {forward} moving forward"
            if have
            else f"translated from {flow.source}; the group has no offsets on {flow.target} yet"
        ) + f"; {summary}"
        out.changes.append(
            GroupOffsetsChange(
                address=address,
                action=Action.UPDATE if have else Action.CREATE,
                before=before,
                after=GroupOffsetsForm(
                    cluster=flow.target,
                    group=group,
                    flow=flow.name,
                    source_cluster=flow.source,
                    translation=verdict,
                    partitions=tuple(moving),
                ),
                reason=reason,
            )
        )


def translation_of(found: ExactTranslation | None, target_offset: int, *, read: bool) -> dict[str, str | int]:
    """A partition row's `translation`, `conservative_offset` and `why`, from its exact translation (if any).

    `read` False: the records were not read for this flow (the live state has no exact translations for it).
    """
    if found is None:
        why = "the records were not read" if not read else "no exact translation was attempted for this offset"
        return {"translation": "unknown", "why": why}
    # The translator answers `found.exact` where there is one, so an exact row's target offset is it.
    verdict = found.verdict if found.exact in (None, target_offset) else "conservative"
    out: dict[str, str | int] = {"translation": verdict}
    if found.conservative is not None:
        out["conservative_offset"] = found.conservative  # MM2's answer, for comparison
    if verdict != "exact":
        out["why"] = found.reason
    return out


def group_translation(rows: Iterable[OffsetRow]) -> tuple[str, str]:
    """A group's translation over its partition rows (`exact`, `conservative`, `mixed`, `unknown`), and a summary.

    `exact`: every partition exact; `unknown`: none exact and at least one unknown, the rest conservative
    (nothing says any would be exact); `conservative`: none exact, the records say why; `mixed`: some exact.
    """
    counts = dict.fromkeys(("exact", "conservative", "unknown"), 0)
    for r in rows:
        counts[r.translation or "unknown"] += 1
    n = sum(counts.values())
    if counts["exact"] == n:
        return "exact", "translation exact (every partition matched record for record)"
    verdict = "mixed" if counts["exact"] else "unknown" if counts["unknown"] else "conservative"
    parts = [f"{k} {v}" for k, v in counts.items() if v]
    return verdict, f"translation {verdict} ({', '.join(parts)} of {n} partition(s))"
