"""The executor's handling of `schema/` rows: register a subject's missing versions on the target registry (with the
source's ids where the registry takes them: Confluent's IMPORT mode), set its compatibility level, or delete a
pruned subject; and the attributes apply records (the form with the whole source id -> target id map).

Must not: read a change's reason, or decide anything the plan did not (which versions, which subject).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.adapters.schema_registry import RegistryClient, RegistryError
from reconciler.kafka_clients.admin import Outcome
from reconciler.live.schemas import SchemaVersion
from reconciler.plan.definition import Action, ResourceChange


def to_register(change: ResourceChange) -> list[SchemaVersion]:
    """The versions an apply registers for `change` (those whose target id the plan does not know), oldest first."""
    after = change.after or {}
    known = after.get("ids", {})
    return [
        SchemaVersion(int(n), int(v["source_id"]), str(v["schema"]), str(v["schema_type"]))
        for n, v in sorted(after.get("versions", {}).items(), key=lambda item: int(item[0]))
        if str(v["source_id"]) not in known
    ]


def apply_schema_change(
    change: ResourceChange, registries: Mapping[str, RegistryClient]
) -> tuple[Outcome, dict[str, Any] | None]:
    """Execute one `schema/` row: register its missing versions in order (with the source's ids when the target
    registry takes them), set its compatibility level, or delete the subject; the outcome and the attributes to
    record (the form with every source id -> target id)."""
    form = change.after or change.before or {}
    cluster, subject = str(form.get("cluster")), str(form.get("subject"))
    client = registries.get(cluster)
    if client is None:
        return Outcome(change.address, False, f"cluster '{cluster}' has no schema_registry to write to"), None
    try:
        if change.action == Action.DELETE:
            client.delete_subject(subject)
            return Outcome(change.address, True, "subject deleted"), None
        after = dict(change.after or {})
        ids = dict(after.get("ids", {}))
        pending = to_register(change)
        keep_ids = bool(pending) and not client.versions(subject) and client.supports_import()
        for version in pending:
            register = client.import_version if keep_ids else client.register
            ids[str(version.id)] = register(subject, version)
        if after.get("compatibility"):
            client.set_compatibility(subject, str(after["compatibility"]))
    except RegistryError as e:
        return Outcome(change.address, False, str(e)), None
    how = "with the source's ids" if keep_ids else "under new ids"
    message = f"{len(pending)} version(s) registered {how}" if pending else "recorded"
    return Outcome(change.address, True, message), {**after, "ids": ids}
