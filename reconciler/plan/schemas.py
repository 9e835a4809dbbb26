"""Planning of the schema subjects a flow with `sync.schemas` registers on its target's registry.

Subjects follow Confluent's TopicNameStrategy: a replicated topic's `<topic>-key` and `<topic>-value` subjects on
the source registry become `<remote topic>-key` / `<remote topic>-value` on the target, the remote topic named by
the flow's naming policy (so `orders-value` is `source.orders-value` under prefix naming). Subjects named some other
way (RecordNameStrategy, TopicRecordNameStrategy) are not planned; the job still translates the ids of their records
(it registers the schema under the record's TopicNameStrategy subject when it first meets its id).

Each synced subject is one resource, `schema/<target cluster>/<target subject>`, of the form
`{"cluster", "subject", "flow", "source_cluster", "source_subject", "versions": {"<version>": {"source_id",
"schema_type", "schema"}}, "compatibility", "ids": {"<source id>": <target id>}}`: the source's versions by number
(so a plan shows a new version as `+ versions.2...`), its own compatibility level (None: the registry's default),
and the source id -> target id mapping as far as the target already holds the versions (apply fills in the ids of
those it registers, and records the whole map). A row's `before` is the same form as the target holds it.
A subject is created (absent on the target), updated (a source version is missing there, its compatibility level
differs, or kmirror does not record it yet), or deleted (its source subject, or the flow's sync.schemas, is gone:
only subjects kmirror recorded, and only with `prune.schemas: true`; else a warning). A target subject holding
versions that are not on the source is drift, shown as a warning: kmirror never deletes a version.

Versions with schema references are not planned (a warning names them): the referenced subjects would have to be
synced first, under names that kmirror does not choose.

Pure: values in, values out. Must not: read a change's reason, or plan a row from a registry that was not read.
"""

from __future__ import annotations

from reconciler.errors import Diagnostic
from reconciler.live.model import LiveState
from reconciler.live.schema_subjects import flow_subjects, schema_flows
from reconciler.live.schemas import RegistryState
from reconciler.plan.definition import Action, SchemaChange
from reconciler.plan.schema_forms import SchemaForm, SchemaVersionForm
from reconciler.plan.topics import TopicPlan
from reconciler.resources.addresses import Kind, schema_address
from reconciler.resources.recorded import RecordedState
from reconciler.spec.models import DesiredState, FlowSpec


def plan_schemas(desired: DesiredState, live: LiveState, recorded: RecordedState) -> TopicPlan:
    out = TopicPlan()
    want: dict[str, SchemaForm] = {}
    read_flows: set[str] = set()
    for flow in schema_flows(desired):
        source, target = live.schemas.get(flow.source), live.schemas.get(flow.target)
        if source is None or target is None or flow.source not in live.clusters:
            continue  # the adapter's warning says why; nothing is planned from a registry that was not read
        read_flows.add(flow.name)
        remote_of = flow.remote_topics(live.clusters[flow.source].topics)
        for source_subject, target_subject in sorted(flow_subjects(flow, remote_of, source.subjects).items()):
            address = schema_address(flow.target, target_subject)
            if address in want:
                out.errors.append(
                    Diagnostic.error(address, f"flows {want[address].flow} and {flow.name} would both register it")
                )
                continue
            form, skipped = _form(flow, source_subject, target_subject, source, target)
            if skipped:
                out.warnings.append(
                    Diagnostic.warning(
                        address,
                        f"versions {', '.join(map(str, skipped))} of {flow.source}'s subject {source_subject} use "
                        "schema references, which kmirror does not sync; register them on the target by hand",
                    )
                )
            want[address] = form

    disabled = {f.name for f in desired.flows if not f.enabled}
    owned = {
        r.address: r for r in recorded.of_kind(Kind.SCHEMA) if r.attributes.get("flow") not in disabled
    }  # a disabled flow's subjects stay as they are
    for address in sorted(want.keys() | owned.keys()):
        wanted, mine = want.get(address), owned.get(address)
        if wanted is None:
            assert mine is not None
            flow_name = str(mine.attributes.get("flow"))
            flow_exists = any(f.name == flow_name for f in desired.flows)
            if flow_exists and flow_name not in read_flows and _syncs(desired, flow_name):
                continue  # its registries were not read: nothing is known about it
            if not desired.prune.schemas:
                out.warnings.append(
                    Diagnostic.warning(
                        address,
                        f"its source subject {mine.attributes.get('source_subject')} is no longer synced; "
                        "kmirror leaves the target subject (prune.schemas: true deletes it)",
                    )
                )
                continue
            out.changes.append(
                SchemaChange(
                    address=address,
                    action=Action.DELETE,
                    before=SchemaForm.model_validate(dict(mine.attributes)),
                    after=None,
                    reason="its source subject is no longer synced (prune.schemas)",
                )
            )
            continue
        target = live.schemas[wanted.cluster]
        current = target.subjects.get(wanted.subject, ())
        missing = [n for n, v in wanted.versions.items() if str(v.source_id) not in wanted.ids]
        extra = [v.version for v in current if v.id not in set(wanted.ids.values())]
        if extra:
            out.warnings.append(
                Diagnostic.warning(
                    address,
                    f"the target subject holds version(s) {', '.join(map(str, extra))} that are not on the source "
                    "(registered there directly); kmirror leaves them",
                )
            )
        level_now = target.compatibility.get(wanted.subject)
        level_differs = wanted.compatibility is not None and wanted.compatibility != level_now
        before = _live_form(wanted, level_now) if current else None
        if not current:
            action, reason = Action.CREATE, f"register {len(missing)} version(s) of {wanted.source_subject}"
        elif missing:
            action, reason = Action.UPDATE, f"register source version(s) {', '.join(map(str, missing))}"
        elif level_differs:
            action, reason = Action.UPDATE, f"compatibility {level_now or 'default'} -> {wanted.compatibility}"
        elif mine is None or mine.pending or dict(mine.attributes) != wanted.model_dump(mode="json"):
            action, reason = Action.UPDATE, "the target already holds every version: kmirror records the id mapping"
        else:
            continue
        out.changes.append(
            SchemaChange(
                address=address,
                action=action,
                before=before,
                after=wanted,
                reason=reason,
            )
        )
    return out


def _syncs(desired: DesiredState, flow_name: str) -> bool:
    return any(f.name == flow_name and f.sync.schemas and f.enabled for f in desired.flows)


def _form(
    flow: FlowSpec, source_subject: str, target_subject: str, source: RegistryState, target: RegistryState
) -> tuple[SchemaForm, list[int]]:
    versions: dict[str, SchemaVersionForm] = {}
    skipped: list[int] = []
    ids: dict[str, int] = {}
    current = target.subjects.get(target_subject, ())
    for v in source.subjects.get(source_subject, ()):
        if v.references:
            skipped.append(v.version)
            continue
        versions[str(v.version)] = SchemaVersionForm(source_id=v.id, schema_type=v.schema_type, schema_text=v.schema)
        match = next((t for t in current if t.same_schema(v)), None)
        if match is not None:
            ids[str(v.id)] = match.id
    form = SchemaForm(
        cluster=flow.target,
        subject=target_subject,
        flow=flow.name,
        source_cluster=flow.source,
        source_subject=source_subject,
        versions=versions,
        compatibility=source.compatibility.get(source_subject),
        ids=ids,
    )
    return form, skipped


def _live_form(wanted: SchemaForm, level: str | None) -> SchemaForm:
    """What the target subject holds, in the form's terms: the source versions it already has (and their ids), its
    own compatibility level (the plan's before; a row's diff then shows only what apply changes)."""
    held = {n: v for n, v in wanted.versions.items() if str(v.source_id) in wanted.ids}
    return wanted.model_copy(update={"versions": held, "compatibility": level})
