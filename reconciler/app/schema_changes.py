"""The executor's handling of `schema/` rows: register a subject's missing versions on the target registry (with the
source's ids where the registry takes them: Confluent's IMPORT mode), set its compatibility level, or delete a
pruned subject; and the attributes apply records (the form with the whole source id -> target id map).

Must not: read a change's reason, or decide anything the plan did not (which versions, which subject).
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.adapters.schema_registry import RegistryClient, RegistryError
from reconciler.kafka_clients.admin import Outcome
from reconciler.live.schemas import SchemaVersion
from reconciler.plan.definition import Action, SchemaChange
from reconciler.plan.schema_forms import SchemaForm


def to_register(change: SchemaChange) -> list[SchemaVersion]:
    """The versions an apply registers for `change` (those whose target id the plan does not know), oldest first."""
    if change.after is None:
        return []
    known = change.after.ids
    return [
        SchemaVersion(int(n), v.source_id, v.schema_text, v.schema_type)
        for n, v in sorted(change.after.versions.items(), key=lambda item: int(item[0]))
        if str(v.source_id) not in known
    ]


def apply_schema_change(
    change: SchemaChange, registries: Mapping[str, RegistryClient]
) -> tuple[Outcome, SchemaForm | None]:
    """Execute one `schema/` row: register its missing versions in order (with the source's ids when the target
    registry takes them), set its compatibility level, or delete the subject; the outcome and the attributes to
    record (the form with every source id -> target id)."""
    form = change.after or change.before
    assert form is not None, "a schema change has a before or an after"  # the planner never makes one without
    client = registries.get(form.cluster)
    if client is None:
        return Outcome(change.address, False, f"cluster '{form.cluster}' has no schema_registry to write to"), None
    keep_ids, pending = False, to_register(change)
    try:
        if change.action == Action.DELETE or change.after is None:
            client.delete_subject(form.subject)
            return Outcome(change.address, True, "subject deleted"), None
        ids = dict(change.after.ids)
        keep_ids = bool(pending) and not client.versions(form.subject) and client.supports_import()
        for version in pending:
            register = client.import_version if keep_ids else client.register
            ids[str(version.id)] = register(form.subject, version)
        if change.after.compatibility:
            client.set_compatibility(form.subject, change.after.compatibility)
    except RegistryError as e:
        return Outcome(change.address, False, str(e)), None
    how = "with the source's ids" if keep_ids else "under new ids"
    message = f"{len(pending)} version(s) registered {how}" if pending else "recorded"
    return Outcome(change.address, True, message), change.after.model_copy(update={"ids": ids})
