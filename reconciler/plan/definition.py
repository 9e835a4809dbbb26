"""The Plan value: what `kmirror plan` prints and saves, and what `kmirror apply` executes exactly.

A `ResourceChange` carries an `action`, the resource's `before` (as read live at plan time, for the stale
check) and `after` (the whole resulting form, so the executor derives its calls from before -> after), and a
`reason`. The reason is for people reading the plan; the executor never looks at it.

The seal. A saved plan travels as a CI artefact, so anyone who can write that artefact could edit it. `digest`
is an HMAC-SHA256 (`hmac-sha256:<hex>`) of what apply executes, keyed with `KMIRROR_PLAN_KEY` when the key is
given, or else a plain SHA-256 (`sha256:<hex>`) that catches damage but that anyone can recompute: such a plan is
*unsealed* (`"seal": "none"` in its JSON) and says so wherever it is shown. Apply never trusts the seal alone: it
plans again and refuses a saved change that differs from the fresh one in anything it executes
(`change_differences`), naming each difference.

Pure: the key is handed in (the CLI reads the environment). Must not: read the environment, or print a key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, computed_field

from reconciler.plan.forms import (
    AclForm,
    GroupOffsetsForm,
    JobForm,
    JobObserved,
    QuotaForm,
    TopicForm,
)
from reconciler.plan.schema_forms import SchemaForm
from reconciler.resources.addresses import Kind, job_flow

#: 2: typed changes (one form per kind), warnings with their subject; 1: the first plan files (refused: plan again).
FORMAT_VERSION = 2


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    REPLACE = "replace"
    DELETE = "delete"
    NOOP = "noop"


#: The order changes are listed and applied in: topics before ACLs, topics before the job, a flow's quotas (its
#: throttle) before its job starts, a flow's schema subjects before its job, the job before offsets.
KIND_ORDER = (Kind.INTERNAL_TOPIC, Kind.TOPIC, Kind.ACL, Kind.QUOTA, Kind.SCHEMA, Kind.JOB, Kind.GROUP_OFFSETS)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Change(_Frozen):
    address: str


class TopicChange(_Change):
    kind: Literal[Kind.TOPIC] = Kind.TOPIC
    action: Action
    before: TopicForm | None = None
    after: TopicForm | None = None
    reason: str = ""


class InternalTopicChange(_Change):
    kind: Literal[Kind.INTERNAL_TOPIC] = Kind.INTERNAL_TOPIC
    action: Action
    before: TopicForm | None = None
    after: TopicForm | None = None
    reason: str = ""


class AclChange(_Change):
    kind: Literal[Kind.ACL] = Kind.ACL
    action: Action
    before: AclForm | None = None
    after: AclForm | None = None
    reason: str = ""


class QuotaChange(_Change):
    kind: Literal[Kind.QUOTA] = Kind.QUOTA
    action: Action
    before: QuotaForm | None = None
    after: QuotaForm | None = None
    reason: str = ""


class JobChange(_Change):
    kind: Literal[Kind.JOB] = Kind.JOB
    action: Action
    before: JobObserved | None = None
    after: JobForm | None = None
    reason: str = ""

    @property
    def flow(self) -> str:
        return job_flow(self.address)


class GroupOffsetsChange(_Change):
    kind: Literal[Kind.GROUP_OFFSETS] = Kind.GROUP_OFFSETS
    action: Action
    before: GroupOffsetsForm | None = None
    after: GroupOffsetsForm | None = None
    reason: str = ""


#: A change of any kind: the plan file's `changes[]` entries, told apart by `kind`.
class SchemaChange(_Change):
    kind: Literal[Kind.SCHEMA] = Kind.SCHEMA
    action: Action
    before: SchemaForm | None = None
    after: SchemaForm | None = None
    reason: str = ""


ResourceChange = Annotated[
    TopicChange | InternalTopicChange | AclChange | QuotaChange | SchemaChange | JobChange | GroupOffsetsChange,
    Field(discriminator="kind"),
]
AnyChange = TopicChange | InternalTopicChange | AclChange | QuotaChange | SchemaChange | JobChange | GroupOffsetsChange
_CHANGE: TypeAdapter[AnyChange] = TypeAdapter(ResourceChange)  # type: ignore[arg-type, unused-ignore]  # Annotated union


def change_of(**fields: Any) -> AnyChange:
    """The change of the kind `fields["kind"]` names, its forms validated from plain values (plan files, tests)."""
    return _CHANGE.validate_python(fields)


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
    #: The seal of what apply executes (plan id, spec digest, state, changes; not warnings or reasons):
    #: `hmac-sha256:<hex>` keyed with KMIRROR_PLAN_KEY, or `sha256:<hex>` (unsealed: anyone can recompute it).
    digest: str = ""

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented way to put a property in the JSON
    @property
    def seal(self) -> str:
        """`hmac-sha256` when a key sealed the plan, `none` when nothing stops an edited plan from re-hashing."""
        return SEAL_ALGORITHM if self.digest.startswith(f"{SEAL_ALGORITHM}:") else "none"

    def _canonical(self) -> bytes:
        body = {
            "format_version": self.format_version,
            "plan_id": self.plan_id,
            "spec_digest": self.spec_digest,
            "state": self.state.model_dump(mode="json"),
            "changes": [c.model_dump(mode="json", exclude={"reason"}) for c in self.changes],
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    def content_digest(self) -> str:
        """The unkeyed `sha256:` of what apply executes (catches damage, not a forger)."""
        return "sha256:" + hashlib.sha256(self._canonical()).hexdigest()

    def keyed_digest(self, key: bytes) -> str:
        """The `hmac-sha256:` of what apply executes, keyed with `key`."""
        return f"{SEAL_ALGORITHM}:" + hmac.new(key, self._canonical(), hashlib.sha256).hexdigest()

    def sealed(self, key: bytes | None = None) -> Plan:
        """This plan with its `digest` set: keyed with `key` (sealed), or the plain SHA-256 (unsealed)."""
        return self.model_copy(update={"digest": self.keyed_digest(key) if key else self.content_digest()})

    def seal_problem(self, key: bytes | None) -> str | None:
        """Why this plan's seal does not hold for `key` (None when it does, or when an unsealed plan's hash matches
        and no key is given). With a key, an unsealed plan is refused: a plan made where the key is set is sealed."""
        if not self.digest:
            return "it has no digest"
        if self.seal == "none":
            if self.digest != self.content_digest():
                return "its changes, digests or state no longer match its digest"
            if key:
                return "it is not sealed (made without KMIRROR_PLAN_KEY, or re-hashed by hand); KMIRROR_PLAN_KEY is set"
            return None
        if not key:
            return None  # sealed, but nothing to check it with here: the comparison with a fresh plan still runs
        if not hmac.compare_digest(self.digest, self.keyed_digest(key)):
            return (
                "its seal does not match KMIRROR_PLAN_KEY: it was edited after it was made, or sealed with another key"
            )
        return None

    @property
    def has_changes(self) -> bool:
        return self.summary.total > 0

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Plan:
        data = json.loads(text)
        if isinstance(data, dict):
            data.pop("seal", None)  # derived from `digest`, never read back
        return cls.model_validate(data)


SEAL_ALGORITHM = "hmac-sha256"

#: Fields of a change's `after` that only explain it (how exact a group offset is, and why): apply compares
#: everything else with a fresh plan, and these may differ from one read of the clusters to the next.
_EXPLANATIONS = frozenset({"translation", "why", "conservative_offset"})
_MASKED = "(sensitive value)"
_SENSITIVE = ("password", "secret", "token", "credential", "jaas", "private", ".key", "key.pem", "user.info", "sas.")


def change_differences(saved: AnyChange, fresh: AnyChange | None, *, limit: int = 5) -> list[str]:
    """What `saved` (from a plan file) executes differently from `fresh` (planned now), one line per difference:
    `after.configs.retention.ms: the plan file has "1", a fresh plan has "604800000"`. Sensitive-looking values
    are masked and long ones cut; at most `limit` lines (then a count)."""
    if fresh is None:
        return ["a fresh plan has no such change"]
    found: list[str] = []
    if saved.kind != fresh.kind:
        found.append(
            f"kind: the plan file has {_shown('kind', saved.kind)}, a fresh plan has {_shown('kind', fresh.kind)}"
        )
    if saved.action != fresh.action:
        found.append(f"action: the plan file has {saved.action.value}, a fresh plan has {fresh.action.value}")
    for side in ("before", "after"):
        skip = _EXPLANATIONS if saved.kind == Kind.GROUP_OFFSETS else frozenset()
        mine, theirs = _flat(_dumped(saved, side), side, skip), _flat(_dumped(fresh, side), side, skip)
        for path in sorted(mine.keys() | theirs.keys()):
            a, b = mine.get(path, _ABSENT), theirs.get(path, _ABSENT)
            if a != b:
                found.append(f"{path}: the plan file has {_shown(path, a)}, a fresh plan has {_shown(path, b)}")
    if len(found) > limit:
        found = [*found[:limit], f"and {len(found) - limit} more"]
    return found


_ABSENT = object()


def _dumped(change: AnyChange, side: str) -> Any:
    form = change.before if side == "before" else change.after
    return None if form is None else form.model_dump(mode="json")


def _flat(value: Any, prefix: str, skip: frozenset[str]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key not in skip:
                flat.update(_flat(item, f"{prefix}.{key}", skip))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            flat.update(_flat(item, f"{prefix}[{i}]", skip))
    else:
        flat[prefix] = value
    return flat


def _shown(path: str, value: Any) -> str:
    if value is _ABSENT:
        return "nothing"
    lowered = path.lower()
    if any(word in lowered for word in _SENSITIVE) and not (isinstance(value, str) and value.startswith("${")):
        return _MASKED
    text = json.dumps(value, ensure_ascii=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def summarize(changes: tuple[AnyChange, ...]) -> Summary:
    counts = {a: 0 for a in Action}
    for c in changes:
        counts[c.action] += 1
    return Summary(
        create=counts[Action.CREATE],
        update=counts[Action.UPDATE],
        replace=counts[Action.REPLACE],
        delete=counts[Action.DELETE],
    )


def config_ops(change: TopicChange | InternalTopicChange) -> tuple[dict[str, str], list[str]]:
    """A topic change's incremental config calls: (configs to SET, names to DELETE), from before -> after."""
    before = change.before.configs if change.before else {}
    after = change.after.configs if change.after else {}
    return {k: v for k, v in after.items() if before.get(k) != v}, sorted(k for k in before if k not in after)
