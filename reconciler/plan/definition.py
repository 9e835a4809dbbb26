"""The Plan value: what `kmirror plan` prints and saves, and what `kmirror apply` executes exactly.

A `ResourceChange` carries an `action`, the resource's `before` (as read live at plan time, for the stale
check) and `after` (the whole resulting form, so the executor derives its calls from before -> after), and a
`reason`. The reason is for people reading the plan; the executor never looks at it.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

FORMAT_VERSION = 1


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    REPLACE = "replace"
    DELETE = "delete"
    NOOP = "noop"


class Kind(StrEnum):
    TOPIC = "topic"
    INTERNAL_TOPIC = "internal_topic"
    ACL = "acl"
    JOB = "job"
    GROUP_OFFSETS = "group_offsets"


#: The order changes are listed and applied in: topics before ACLs, topics before the job, the job before offsets.
KIND_ORDER = (Kind.INTERNAL_TOPIC, Kind.TOPIC, Kind.ACL, Kind.JOB, Kind.GROUP_OFFSETS)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ResourceChange(_Frozen):
    address: str
    kind: Kind
    action: Action
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    reason: str = ""


class StateRef(_Frozen):
    """The recorded state a plan was made against; apply refuses the plan when it moved."""

    lineage: str | None = None
    serial: int = 0


class Summary(_Frozen):
    create: int = 0
    update: int = 0
    replace: int = 0
    delete: int = 0

    @property
    def total(self) -> int:
        return self.create + self.update + self.replace + self.delete


class Plan(_Frozen):
    format_version: int = FORMAT_VERSION
    plan_id: str
    created_at: str
    spec_digest: str
    state: StateRef = Field(default_factory=StateRef)
    changes: tuple[ResourceChange, ...] = ()
    warnings: tuple[str, ...] = ()
    summary: Summary = Field(default_factory=Summary)
    #: `sha256:` of what apply executes (plan id, spec digest, state, changes): a saved plan whose `after` values,
    #: digests or changes were edited no longer matches it and is refused. Warnings and reasons are not in it.
    digest: str = ""

    def content_digest(self) -> str:
        body = {
            "format_version": self.format_version,
            "plan_id": self.plan_id,
            "spec_digest": self.spec_digest,
            "state": self.state.model_dump(mode="json"),
            "changes": [c.model_dump(mode="json", exclude={"reason"}) for c in self.changes],
        }
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()

    def sealed(self) -> Plan:
        """This plan with its `digest` set."""
        return self.model_copy(update={"digest": self.content_digest()})

    @property
    def has_changes(self) -> bool:
        return self.summary.total > 0

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Plan:
        return cls.model_validate_json(text)


def summarize(changes: tuple[ResourceChange, ...]) -> Summary:
    counts = {a: 0 for a in Action}
    for c in changes:
        counts[c.action] += 1
    return Summary(
        create=counts[Action.CREATE],
        update=counts[Action.UPDATE],
        replace=counts[Action.REPLACE],
        delete=counts[Action.DELETE],
    )


def config_ops(change: ResourceChange) -> tuple[dict[str, str], list[str]]:
    """A topic change's incremental config calls: (configs to SET, names to DELETE), from before -> after."""
    before = (change.before or {}).get("configs", {})
    after = (change.after or {}).get("configs", {})
    return {k: v for k, v in after.items() if before.get(k) != v}, sorted(k for k in before if k not in after)


def topic_address(cluster: str, name: str) -> str:
    return f"topic/{cluster}/{name}"


def internal_topic_address(cluster: str, name: str) -> str:
    return f"internal_topic/{cluster}/{name}"


def acl_address(cluster: str, principal: str, operation: str, topic: str) -> str:
    return f"acl/{cluster}/{principal}/{operation}/{topic}"


def job_address(flow: str) -> str:
    return f"job/{flow}"


def group_offsets_address(cluster: str, group: str) -> str:
    return f"group_offsets/{cluster}/{group}"
