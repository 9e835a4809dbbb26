"""A format-neutral view of a plan: what each change shows, computed only from the plan's public JSON form.

`plan_view` reads `Plan.model_dump(mode="json")` (the document `kmirror plan --format json` writes) and turns
every change into a `ChangeView`: its symbol, verb and reason, and the attribute `Line`s to show (configs key
by key, ACL entries added and removed, a job's digest, a table of group offsets). The text and Markdown
renderers only lay this view out, so a new output format never touches diff logic, and anything a renderer
shows can be checked against the JSON plan.

What a view never contains: a sensitive-looking value that is not a `${env:...}`/`${file:...}` reference (shown
as `(sensitive value)`: the spec's credential keys such as `ssl.key.pem`, and any key that looks like one), or a
raw control character (escaped, so that a topic config or a principal cannot inject terminal escapes or bidi
tricks into a review). A job's spec is shown only in the full view (`kmirror show`, which shows everything
apply would execute); a plan shows its short digest. Whether the plan is sealed (`seal`) is part of the view,
so every format can say when it is not.

Pure: no I/O, no Kafka or Spark client.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from reconciler.plan.definition import SEAL_ALGORITHM, Plan
from reconciler.spec.secrets import is_sensitive_key

Op = Literal["+", "-", "~", " "]

#: Actions a plan counts, in the order every renderer lists them. `noop` changes are not shown.
ACTIONS = ("create", "update", "replace", "delete")
SYMBOLS = {"create": "+", "update": "~", "replace": "-/+", "delete": "-"}
VERBS = {"create": "created", "update": "updated in-place", "replace": "replaced", "delete": "destroyed"}
LEGEND = {
    "create": "create",
    "update": "update in-place",
    "replace": "replace (a job: graceful stop, then redeploy from where it stopped)",
    "delete": "destroy (a job: graceful stop)",
}
KIND_TITLES = {
    "internal_topic": "Internal topics",
    "topic": "Topics",
    "acl": "ACLs",
    "quota": "Client quotas (throttles)",
    "schema": "Schema registry subjects",
    "job": "Replication jobs",
    "group_offsets": "Consumer group offsets",
}

SENSITIVE_VALUE = "(sensitive value)"
_SENSITIVE_KEY = re.compile(r"password|secret|token|credential|jaas|private", re.IGNORECASE)
_REFERENCE = re.compile(r"^\$\{(env|file):[^}]*\}$")
_DIGEST_HEX = 12


@dataclass(frozen=True)
class Line:
    """One attribute line: `op name = value`, a bare `op name` (value None), or a block `op name { children }`."""

    op: Op
    name: str
    old: str | None = None
    new: str | None = None
    children: tuple[Line, ...] | None = None

    @property
    def value(self) -> str | None:
        if self.op == "~":
            return f"{self.old} -> {self.new}"
        if self.op == "-":
            return self.old
        return self.new if self.new is not None else self.old


@dataclass(frozen=True)
class Table:
    """A small table (group offsets): a header and rows, each row marked with the op it stands for."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Op, tuple[str, ...]], ...]
    right_aligned: tuple[bool, ...]


@dataclass(frozen=True)
class ChangeView:
    address: str
    kind: str
    action: str
    reason: str
    lines: tuple[Line, ...] = ()
    table: Table | None = None

    @property
    def symbol(self) -> str:
        return SYMBOLS.get(self.action, "?")

    @property
    def verb(self) -> str:
        return VERBS.get(self.action, self.action)

    @property
    def comment(self) -> str:
        """`address will be created (reason)`: the line a reviewer reads first."""
        text = f"{self.address} will be {self.verb}"
        return f"{text} ({self.reason})" if self.reason else text


@dataclass(frozen=True)
class PlanView:
    format_version: int
    plan_id: str
    created_at: str
    spec_digest: str
    lineage: str | None
    serial: int
    changes: tuple[ChangeView, ...]
    warnings: tuple[str, ...]
    summary: Mapping[str, int]
    sealed: bool = False

    @property
    def unsealed_notice(self) -> str:
        """What a reviewer must know about a plan no key sealed; empty for a sealed one."""
        if self.sealed:
            return ""
        return (
            "This plan is not sealed: KMIRROR_PLAN_KEY was not set when it was made, so a saved copy could be "
            "edited and re-hashed unnoticed. Apply still plans again and refuses a saved plan that differs."
        )

    @property
    def total(self) -> int:
        return sum(self.summary.get(a, 0) for a in ACTIONS)

    def summary_line(self) -> str:
        if self.total == 0:
            return "No changes. The clusters match the desired state."
        counts = ", ".join(f"{self.summary.get(a, 0)} to {a}" for a in ACTIONS)
        return f"Plan: {counts}."

    def kinds(self) -> list[str]:
        """Kinds with at least one shown change, in plan order (the planner orders changes by kind)."""
        return list(dict.fromkeys(c.kind for c in self.changes))

    def counts(self, kind: str) -> dict[str, int]:
        counts = dict.fromkeys(ACTIONS, 0)
        for c in self.changes:
            if c.kind == kind and c.action in counts:
                counts[c.action] += 1
        return counts


def plan_view(plan: Plan, *, full: bool = False) -> PlanView:
    """The view of `plan`, built from its JSON form only; `full` adds each job's whole spec (for `kmirror show`)."""
    return view_of(plan.model_dump(mode="json"), full=full)


def view_of(data: Mapping[str, Any], *, full: bool = False) -> PlanView:
    """The view of a plan document (`Plan.model_dump(mode="json")`, or a parsed plan file)."""
    state = data.get("state") or {}
    digest = str(data.get("digest") or "")
    return PlanView(
        format_version=int(data.get("format_version", 0)),
        plan_id=clean(str(data.get("plan_id", ""))),
        created_at=clean(str(data.get("created_at", ""))),
        spec_digest=clean(str(data.get("spec_digest", ""))),
        lineage=None if state.get("lineage") is None else clean(str(state["lineage"])),
        serial=int(state.get("serial", 0)),
        changes=tuple(change_view(c, full=full) for c in data.get("changes", ()) if c.get("action") != "noop"),
        warnings=tuple(clean(str(w), multiline=True) for w in data.get("warnings", ())),
        summary={a: int((data.get("summary") or {}).get(a, 0)) for a in ACTIONS},
        sealed=digest.startswith(f"{SEAL_ALGORITHM}:"),
    )


def change_view(change: Mapping[str, Any], *, full: bool = False) -> ChangeView:
    kind, action = str(change.get("kind", "")), str(change.get("action", ""))
    before, after = _mapping(change.get("before")), _mapping(change.get("after"))
    lines: tuple[Line, ...] = ()
    table: Table | None = None
    if kind in ("topic", "internal_topic"):
        lines = _topic_lines(action, before, after)
    elif kind == "acl":
        lines = _acl_lines(action, before, after)
    elif kind == "job":
        lines = _job_lines(action, before, after)
        if full:
            lines = (*lines, *_job_spec_lines(action, after))
    elif kind == "group_offsets" and _offset_rows(after or before) is not None:
        table = _offsets_table(action, after or before or {})
        lines = (
            *_generic_lines(_without(before, _OFFSET_KEYS), _without(after, _OFFSET_KEYS)),
            *_translation_lines(after or before or {}),
        )
    else:
        lines = _generic_lines(before, after)
    return ChangeView(
        address=clean(str(change.get("address", ""))),
        kind=kind,
        action=action,
        reason=clean(str(change.get("reason") or "")),
        lines=lines,
        table=table,
    )


# -- formatting helpers -------------------------------------------------------------------------------------


def clean(text: str, *, multiline: bool = False) -> str:
    """`text` with control and format characters (ANSI escapes, bidi overrides) escaped as `\\uXXXX`."""
    if text.isprintable():
        return text
    return "".join(
        f"\\u{ord(ch):04x}" if unicodedata.category(ch) in ("Cc", "Cf") and not (multiline and ch == "\n") else ch
        for ch in text
    )


def fmt(value: Any) -> str:
    """A value as a reviewer reads it: strings quoted, numbers and booleans bare, containers as compact JSON."""
    if isinstance(value, str):
        return clean(json.dumps(value, ensure_ascii=False))
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return clean(json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": ")))


def sensitive(key: str) -> bool:
    """Does `key` (a property name, or a dotted path ending in one) look like it holds a credential?"""
    return bool(_SENSITIVE_KEY.search(key)) or is_sensitive_key(key)


def fmt_keyed(key: str, value: Any) -> str:
    """`fmt(value)`, unless the key looks sensitive and the value is not a reference: then `(sensitive value)`."""
    if sensitive(key) and not (isinstance(value, str) and _REFERENCE.match(value)):
        return SENSITIVE_VALUE
    return fmt(value)


def masked(value: Any, key: str = "") -> Any:
    """`value` (a plan document or part of one) with every sensitive-looking value that is not a reference masked."""
    if isinstance(value, Mapping):
        return {k: masked(v, f"{key}.{k}" if key else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v, key) for v in value]
    if key and sensitive(key) and not (isinstance(value, str) and _REFERENCE.match(value)):
        return SENSITIVE_VALUE
    return value


def short_digest(digest: Any) -> str:
    """`sha256:0123456789ab` for `sha256:<64 hex>`; enough to tell digests apart in a review."""
    if not isinstance(digest, str) or not digest:
        return "(none)"
    algorithm, sep, hexdigest = digest.rpartition(":")
    return clean(f"{algorithm}{sep}{hexdigest[:_DIGEST_HEX]}")


def _replication_factor(value: Any) -> str:
    return "-1 (broker default)" if value == -1 else fmt(value)


def _mapping(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


def _without(value: Mapping[str, Any] | None, keys: Iterable[str]) -> dict[str, Any] | None:
    if value is None:
        return None
    drop = set(keys)
    return {k: v for k, v in value.items() if k not in drop}


def _attr(op: Op, name: str, value: str) -> Line:
    """An attribute shown whole: created (`+`), destroyed (`-`) or unchanged context (` `)."""
    return Line(op, clean(name), old=value if op == "-" else None, new=None if op == "-" else value)


def _diff_line(name: str, old: Any, new: Any, render: Callable[[Any], str] = fmt, *, absent: Any = None) -> Line:
    """`+`, `-` or `~` for one attribute; `absent` is what a missing side holds."""
    if old is absent:
        return Line("+", clean(name), new=render(new))
    if new is absent:
        return Line("-", clean(name), old=render(old))
    if old == new:
        return Line(" ", clean(name), new=render(new))
    return Line("~", clean(name), old=render(old), new=render(new))


_MISSING = object()


def _keyed_block(name: str, before: Mapping[str, Any], after: Mapping[str, Any], *, block_op: Op) -> Line | None:
    """`name { + added, ~ changed old -> new, - removed }` key by key; None when nothing changed."""
    children: list[Line] = []
    unchanged = 0
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key, _MISSING), after.get(key, _MISSING)
        if old == new:
            unchanged += 1
            continue
        children.append(_diff_line(key, old, new, partial(fmt_keyed, key), absent=_MISSING))
    if not children:
        return None
    if unchanged and block_op == "~":
        noun = name.removesuffix("s") if unchanged == 1 else name
        children.append(Line(" ", f"# ({unchanged} unchanged {noun} hidden)"))
    return Line(block_op, clean(name), children=tuple(children))


def _flatten(value: Mapping[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, item in (value or {}).items():
        path = f"{prefix}{key}"
        if isinstance(item, Mapping) and item:
            flat.update(_flatten(item, f"{path}."))
        else:
            flat[path] = item
    return flat


def _generic_lines(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> tuple[Line, ...]:
    """Any payload, flattened to dotted keys and diffed key by key (a kind no renderer knows yet)."""
    old, new = _flatten(before), _flatten(after)
    lines = []
    for key in sorted(old.keys() | new.keys()):
        o, n = old.get(key, _MISSING), new.get(key, _MISSING)
        if o == n and before is not None and after is not None:
            continue  # an update shows what changes; a create or delete shows everything
        lines.append(_diff_line(key, o, n, partial(fmt_keyed, key), absent=_MISSING))
    return tuple(lines)


# -- topics and internal topics -----------------------------------------------------------------------------

_TOPIC_KEYS = ("cluster", "name", "partitions", "replication_factor", "configs", "source")


def _source(source: Any) -> str:
    if not isinstance(source, Mapping):
        return fmt(source)
    return clean(f"{source.get('cluster')}:{source.get('topic')} (flow {source.get('flow')})")


def _topic_lines(action: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> tuple[Line, ...]:
    b, a = before or {}, after or {}
    lines: list[Line] = []
    if action in ("create", "delete"):
        op: Op = "+" if action == "create" else "-"
        form = a if op == "+" else b
        if not form:
            return ()  # a delete of a topic that is already gone: nothing left to show
        if "source" in form:
            lines.append(_attr(op, "source", _source(form["source"])))
        lines.append(_attr(op, "partitions", fmt(form.get("partitions"))))
        lines.append(_attr(op, "replication_factor", _replication_factor(form.get("replication_factor"))))
        configs = form.get("configs") or {}
        block = _keyed_block("configs", {} if op == "+" else configs, configs if op == "+" else {}, block_op=op)
        lines.append(block if block is not None else _attr(op, "configs", "{} (broker defaults)"))
    else:
        if "source" in a or "source" in b:
            lines.append(Line(" ", "source", new=_source(a.get("source", b.get("source")))))
        for key, render in (("partitions", fmt), ("replication_factor", _replication_factor)):
            if b.get(key) != a.get(key):
                lines.append(_diff_line(key, b.get(key, _MISSING), a.get(key, _MISSING), render, absent=_MISSING))
        block = _keyed_block("configs", b.get("configs") or {}, a.get("configs") or {}, block_op="~")
        if block is not None:
            lines.append(block)
    lines.extend(_extras(action, before, after, _TOPIC_KEYS))
    return tuple(lines)


def _extras(
    action: str, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, known: Iterable[str]
) -> tuple[Line, ...]:
    """Fields a kind's renderer does not know yet, shown generically rather than hidden."""
    b, a = _without(before, known), _without(after, known)
    if not b and not a:
        return ()
    return _generic_lines(b if before is not None else None, a if after is not None else None)


# -- ACLs ---------------------------------------------------------------------------------------------------

_ACL_KEYS = ("cluster", "principal", "operation", "topic", "pattern_type", "entries", "managed")
_ACL_IDENTITY = ("principal", "operation", "topic", "pattern_type")


def _entries(form: Mapping[str, Any] | None, key: str = "entries") -> set[tuple[str, str]]:
    return {
        (str(e.get("host")), str(e.get("permission"))) for e in (form or {}).get(key) or () if isinstance(e, Mapping)
    }


def _acl_lines(action: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> tuple[Line, ...]:
    b, a = before or {}, after or {}
    lines: list[Line] = []
    if action == "create":
        lines += [Line("+", key, new=_acl_value(key, a.get(key))) for key in _ACL_IDENTITY if key in a]
    elif action != "delete":
        lines += [
            _diff_line(key, b.get(key), a.get(key), partial(_acl_value, key))
            for key in _ACL_IDENTITY
            if b.get(key) != a.get(key) and key in a and key in b
        ]
    old, new = _entries(before), _entries(after)
    managed = _entries(after, "managed") if "managed" in a else None
    children = []
    for host, permission in sorted(old | new, key=lambda e: (e[1], e[0])):
        text = clean(f"{permission} from host {fmt(host)}")
        if (host, permission) not in old:
            op: Op = "+"
        elif (host, permission) not in new:
            op = "-"
        else:
            op = " "
        if op != "-" and managed is not None and (host, permission) not in managed:
            text += "  # not created by kmirror; kept"
        children.append(Line(op, text))
    block_op: Op = "+" if action == "create" else "-" if action == "delete" else "~"
    lines.append(Line(block_op, "entries", children=tuple(children)))
    lines.extend(_extras(action, before, after, _ACL_KEYS))
    return tuple(lines)


def _acl_value(key: str, value: Any) -> str:
    return clean(str(value)) if key in ("operation", "pattern_type") else fmt(value)


# -- jobs ---------------------------------------------------------------------------------------------------


def _job_lines(action: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> tuple[Line, ...]:
    """Operation, runner, running, short digest. Never the spec: it is long, and the reason names what changed."""
    b, a = before or {}, after or {}
    operation = a.get("operation") or ("stop" if action == "delete" else None)
    lines: list[Line] = []
    if operation:
        lines.append(Line(" ", "operation", new=clean(str(operation))))
    if action == "delete":
        if "running" in b:
            lines.append(Line("-", "running", old=fmt(b["running"])))
        if b.get("spec_digest"):
            lines.append(Line("-", "spec_digest", old=short_digest(b["spec_digest"])))
        return tuple(lines)
    if "runner" in a:
        lines.append(Line("+" if action == "create" else " ", "runner", new=fmt(a["runner"])))
    if before is None or "running" not in b:
        lines.append(Line("+", "running", new="true"))
    elif b["running"] is True:
        lines.append(Line(" ", "running", new="true"))
    else:
        lines.append(Line("~", "running", old=fmt(b["running"]), new="true"))
    old_digest, new_digest = b.get("spec_digest"), a.get("spec_digest")
    if new_digest is not None:
        if not old_digest:
            lines.append(Line("+", "spec_digest", new=short_digest(new_digest)))
        elif old_digest != new_digest:
            lines.append(Line("~", "spec_digest", old=short_digest(old_digest), new=short_digest(new_digest)))
        else:
            lines.append(Line(" ", "spec_digest", new=short_digest(new_digest)))
    return tuple(lines)


def _job_spec_lines(action: str, after: dict[str, Any] | None) -> tuple[Line, ...]:
    """The whole spec the job is deployed with, key by key (clusters, client settings, flow, Spark), masked."""
    spec = (after or {}).get("spec")
    if action == "delete" or not isinstance(spec, Mapping):
        return ()
    flat = _flatten(spec)
    op: Op = "+" if action == "create" else " "
    children = tuple(_attr(op, key, fmt_keyed(key, flat[key])) for key in sorted(flat))
    return (Line(op, "spec", children=children),)


# -- group offsets ------------------------------------------------------------------------------------------

_OFFSET_KEYS = ("cluster", "group", "partitions", "translation")
_OFFSET_COLUMNS = ("topic", "partition", "source offset", "target offset", "current offset")
_TRANSLATION_COLUMN = "translation"


def _offset_rows(form: Mapping[str, Any] | None) -> list[Mapping[str, Any]] | None:
    rows = (form or {}).get("partitions")
    if not isinstance(rows, list) or not all(isinstance(r, Mapping) for r in rows):
        return None
    return rows


def _offsets_table(action: str, form: Mapping[str, Any]) -> Table:
    """One row per partition: the committed source offset, its translation, and what the target group has now."""
    rows: list[tuple[Op, tuple[str, ...]]] = []
    verdicts = any("translation" in r for r in _offset_rows(form) or ())
    for r in sorted(_offset_rows(form) or (), key=lambda r: (str(r.get("topic")), _int_key(r.get("partition")))):
        current, target = r.get("current_offset"), r.get("target_offset")
        op: Op
        if action == "delete":
            op = "-"
        elif current is None:
            op = "+"
        elif current == target:
            op = " "
        else:
            op = "~"
        cells: tuple[Any, ...] = (r.get("topic"), r.get("partition"), r.get("source_offset"), target, current)
        if verdicts:
            cells = (*cells, r.get("translation"))
        rows.append((op, tuple("-" if c is None else clean(str(c)) for c in cells)))
    if verdicts:  # a plan made before the exact translation has no verdicts
        columns = (*_OFFSET_COLUMNS, _TRANSLATION_COLUMN)
        return Table(columns=columns, rows=tuple(rows), right_aligned=(False, True, True, True, True, False))
    return Table(columns=_OFFSET_COLUMNS, rows=tuple(rows), right_aligned=(False, True, True, True, True))


def _translation_lines(form: Mapping[str, Any]) -> tuple[Line, ...]:
    """The group's translation (exact, conservative, mixed, unknown), then why, for each partition not exact."""
    verdict = form.get("translation")
    if verdict is None:
        return ()
    notes = []
    for r in sorted(_offset_rows(form) or (), key=lambda r: (str(r.get("topic")), _int_key(r.get("partition")))):
        how = r.get("translation")
        if how in (None, "exact"):
            continue
        why = r.get("why") or "no reason given"
        text = f"exactness unknown ({why})" if how == "unknown" else f"{how}: {why}"
        notes.append(Line(" ", clean(f"{r.get('topic')}/{r.get('partition')}: {text}")))
    head = Line(" ", "translation", new=clean(str(verdict)))
    return (head, *notes)


def _int_key(value: Any) -> int:
    return value if isinstance(value, int) else -1


# -- layout shared by the renderers ------------------------------------------------------------------------


def layout(lines: Iterable[Line], depth: int = 0) -> list[tuple[Op, int, str]]:
    """(op, depth, text) rows: `name = value` aligned on `=` among siblings, blocks opened and closed."""
    lines = list(lines)
    width = max((len(x.name) for x in lines if x.children is None and x.value is not None), default=0)
    rows: list[tuple[Op, int, str]] = []
    for x in lines:
        if x.children is not None:
            if not x.children:
                rows.append((x.op, depth, f"{x.name} {{}}"))
                continue
            rows.append((x.op, depth, f"{x.name} {{"))
            rows.extend(layout(x.children, depth + 1))
            rows.append((" ", depth, "}"))
        elif x.value is None:
            rows.append((x.op, depth, x.name))
        else:
            rows.append((x.op, depth, f"{x.name.ljust(width)} = {x.value}"))
    return rows


def table_rows(table: Table) -> list[tuple[Op, str]]:
    """The table as aligned text rows, its header first (op ` `)."""
    cells = [table.columns, *(r for _, r in table.rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(table.columns))]

    def line(row: tuple[str, ...]) -> str:
        parts = [
            c.rjust(w) if right else c.ljust(w) for c, w, right in zip(row, widths, table.right_aligned, strict=True)
        ]
        return "  ".join(parts).rstrip()

    return [(" ", line(table.columns)), *((op, line(row)) for op, row in table.rows)]
