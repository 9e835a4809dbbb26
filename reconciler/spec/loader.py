"""Load `kmirror.yaml` into a `DesiredState`, reporting every problem at once with file:line:column.

Four passes, each adding located issues: YAML (syntax, duplicate keys, tags), per-environment references,
the models (pydantic errors mapped back to the node they came from and rewritten for people), and semantic
validation across flows (`validate.py`). Any error raises one `SpecError` carrying all issues; warnings come
back with the state.

Per-environment values (`ENVIRONMENT_FIELDS`: bootstrap servers, the state topic, where Spark runs and keeps its
checkpoints) may be written `${env:NAME}` or `${file:PATH}`, so one file serves staging and production. They are
not secrets: they are resolved here, at load, and the desired state holds the values. So the spec digest is the
digest of what will really be talked to: a plan saved in staging is stale in production, and a job is
redeployed when its bootstrap servers change. A reference that cannot be resolved is a located error.

Must not: read anything but the one file it is given, the environment and the `${file:..}` files of those
fields; secrets (client/producer/consumer/conf maps) stay references, resolved later, at use.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from reconciler.spec.files import FileTooLarge, read_capped
from reconciler.spec.hidden import ResolvedField, hide_values
from reconciler.spec.issues import (
    FieldPath,
    SecretResolutionError,
    SpecError,
    SpecIssue,
    format_field_path,
    raise_if_errors,
)
from reconciler.spec.models import DesiredState
from reconciler.spec.redaction import MIN_ANYWHERE, remember_as
from reconciler.spec.redaction import learn as learn_secrets
from reconciler.spec.secrets import SecretRef
from reconciler.spec.validate import validate_state
from reconciler.spec.yaml_source import MAX_DOCUMENT_BYTES, Locations, YamlSyntaxError, parse_yaml


@dataclass(frozen=True)
class LoadedSpec:
    """A valid desired state, the warnings found on the way, and where everything sits in the file."""

    state: DesiredState
    file: str
    warnings: tuple[SpecIssue, ...] = ()
    locations: Locations = field(default_factory=Locations)


def load_desired_state(path: str | Path) -> DesiredState:
    """Load and validate `path`; raise SpecError listing every error. Warnings are dropped (see `load`)."""
    return load(path).state


def load(path: str | Path, *, environ: Mapping[str, str] | None = None) -> LoadedSpec:
    """Load and validate `path`; raise SpecError listing every error. `environ` defaults to `os.environ`."""
    file = str(path)
    try:
        raw = read_capped(path, MAX_DOCUMENT_BYTES)
    except FileTooLarge as exc:
        limit = MAX_DOCUMENT_BYTES // 1024 // 1024
        raise SpecError(
            [
                SpecIssue(
                    file, exc.head.count(b"\n") + 1, 1, (), f"the file is over {limit} MiB; kmirror reads at most "
                    f"{limit} MiB (the limit is passed on this line)",
                    "a desired state is a few kilobytes: list topics with regexes, not one by one",
                )
            ]
        ) from None  # fmt: skip
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SpecError([SpecIssue(file, 0, 0, (), f"cannot read the file: {reason}", "check the path")]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            [SpecIssue(file, 1, 1, (), f"the file is not UTF-8 text ({exc.reason})", "save it as UTF-8")]
        ) from None
    loaded = load_text(text, file=file, base_dir=Path(path).resolve().parent, environ=environ)
    state = loaded.state.with_source_path(Path(path).resolve())
    learn_secrets(state)  # the scrubber now knows every secret value this state can resolve to
    return LoadedSpec(state, loaded.file, loaded.warnings, loaded.locations)


def load_text(
    text: str,
    *,
    file: str = "kmirror.yaml",
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> LoadedSpec:
    """Like `load`, from text already in memory (`file` is only used in messages; relative `${file:..}` paths of
    per-environment fields resolve against `base_dir`, else the working directory)."""
    try:
        data, locations, issues = parse_yaml(text, file)
    except YamlSyntaxError as exc:
        raise SpecError(exc.issues) from None
    resolved: dict[FieldPath, str] = {}
    fields: dict[FieldPath, ResolvedField] = {}
    if isinstance(data, dict):
        issues.extend(resolve_environment(data, locations, file, base_dir, environ, resolved, fields))
    if not isinstance(data, dict):
        mark = locations.value(())
        raise SpecError(
            [
                *issues,
                SpecIssue(
                    file,
                    mark.line,
                    mark.column,
                    (),
                    f"the file must be a mapping of settings, found {_kind(data)}",
                    "start from one of the files in examples/",
                ),
            ]
        )
    try:
        state = DesiredState.model_validate(data)
    except ValidationError as exc:
        model_issues = [
            _mention_reference(hide_values(i, fields), resolved)
            for i in pydantic_issues(exc, data, locations, file)
            if not _under_unresolved(i.path, resolved)
        ]
        issues.extend(model_issues)
        issues.extend(_semantic_issues_despite(exc, data, locations, file))
        raise SpecError(_unique([hide_values(i, fields) for i in issues])) from None
    issues.extend(validate_state(state, locations=locations, file=file))
    issues = [hide_values(i, fields) for i in issues]
    raise_if_errors(issues)
    return LoadedSpec(state, file, tuple(i for i in issues if i.severity == "warning"), locations)


# -- per-environment references ------------------------------------------------------------------------------

#: Fields whose value usually differs between environments and may be `${env:..}`/`${file:..}`, resolved at load.
#: `*` is any key of a mapping (a cluster alias). Aliases, flow names and filters stay literal: they are what a
#: plan's addresses are made of, and must not change between environments.
#: Marks, in `resolve_environment`'s `resolved`, a field whose reference failed (already reported).
UNRESOLVED = ""

_PIECE_SEPARATORS = re.compile(r"[\s,]+")

ENVIRONMENT_FIELDS: tuple[tuple[str, ...], ...] = (
    ("clusters", "*", "bootstrap_servers"),
    ("state", "topic"),
    ("spark", "master"),
    ("spark", "rest_url"),
    ("spark", "checkpoint_root"),
)


def resolve_environment(
    data: dict[str, Any],
    locations: Locations,
    file: str,
    base_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
    resolved: dict[FieldPath, str] | None = None,
    fields: dict[FieldPath, ResolvedField] | None = None,
) -> list[SpecIssue]:
    """Replace, in `data`, every reference in an `ENVIRONMENT_FIELDS` value by its value. Returns the located
    issues; `resolved` receives each replaced path with the text the user wrote, `fields` the text and the value.
    The scrubber learns to show each value (and each comma-separated entry of it) as the text the user wrote."""
    env = os.environ if environ is None else environ
    issues: list[SpecIssue] = []
    for pattern in ENVIRONMENT_FIELDS:
        for path, parent, key in _field_slots(data, pattern):
            value = parent[key]
            items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
            for index, item in items:
                if not isinstance(item, str) or "${" not in item:
                    continue
                where = path if index is None else (*path, index)
                mark = locations.value(where)
                try:
                    text = SecretRef(item).resolve(base_dir, env, secret=False)  # not a secret: keep it visible
                except (ValueError, SecretResolutionError) as exc:
                    message, hint = str(exc), "write ${env:NAME} or ${file:PATH}"
                    if isinstance(exc, SecretResolutionError) and message.endswith(")") and " (" in message:
                        message, _, hint = message[:-1].rpartition(" (")  # "X is not set (export X ...)"
                    issues.append(SpecIssue(file, mark.line, mark.column, where, message, hint))
                    if resolved is not None:
                        resolved[path] = UNRESOLVED
                    continue
                remember_as(text, item)
                for entry in _PIECE_SEPARATORS.split(text):  # a broker of the list, a line of the file
                    if len(entry) >= MIN_ANYWHERE:
                        remember_as(entry, item)
                if resolved is not None:
                    resolved[where] = item
                if fields is not None:
                    fields[where] = ResolvedField(item, text)
                if index is None:
                    parent[key] = text
                else:
                    value[index] = text
    return issues


def _field_slots(data: Any, pattern: tuple[str, ...]) -> list[tuple[FieldPath, dict[str, Any], str]]:
    """(path, parent mapping, key) of every value `pattern` names in `data`."""
    found: list[tuple[FieldPath, Any]] = [((), data)]
    for part in pattern[:-1]:
        step: list[tuple[FieldPath, Any]] = []
        for path, node in found:
            if not isinstance(node, dict):
                continue
            keys = [k for k in node if isinstance(k, str)] if part == "*" else [part]
            step.extend(((*path, k), node[k]) for k in keys if k in node)
        found = step
    last = pattern[-1]
    return [((*path, last), node, last) for path, node in found if isinstance(node, dict) and last in node]


def _under_unresolved(path: FieldPath, resolved: Mapping[FieldPath, str]) -> bool:
    return any(text == UNRESOLVED and path[: len(p)] == p for p, text in resolved.items())


def _mention_reference(issue: SpecIssue, resolved: Mapping[FieldPath, str]) -> SpecIssue:
    written = next((text for path, text in resolved.items() if issue.path[: len(path)] == path), None)
    if not written or written in issue.message:
        return issue
    return SpecIssue(
        issue.file, issue.line, issue.column, issue.path, f"{issue.message} (the value of {written})", issue.hint,
        issue.severity,
    )  # fmt: skip


# -- semantic checks on a file that also has model errors -----------------------------------------------------

_PLACEHOLDER_CLUSTER = "<invalid>"
_REPAIR_ROUNDS = 6


def _semantic_issues_despite(
    exc: ValidationError, data: dict[str, Any], locations: Locations, file: str
) -> list[SpecIssue]:
    """Report semantic issues too, so one run shows everything: repair the data where the model refused it
    (drop bad optional fields, fill required ones with placeholders), validate the repaired state, and keep the
    semantic issues that do not sit under an already reported path or mention a placeholder."""
    broken: list[FieldPath] = []
    repaired = copy.deepcopy(data)
    error: ValidationError | None = exc
    for _ in range(_REPAIR_ROUNDS):
        assert error is not None
        for item in error.errors(include_url=False):
            path, at_key, _ = _data_path(tuple(item["loc"]), repaired)
            if path == ("version",):
                repaired["version"] = 1
                broken.append(path)
                continue
            if not path or (len(path) == 1 and path[0] in ("clusters", "state")):
                return []  # the skeleton itself is broken: semantic checks would only add noise
            broken.append(path)
            if not _repair(repaired, path, item["type"], at_key):
                return []
        try:
            state = DesiredState.model_validate(repaired)
        except ValidationError as again:
            error = again
            continue
        return [
            issue
            for issue in validate_state(state, locations=locations, file=file)
            if not any(issue.path[: len(b)] == b for b in broken)
            and _PLACEHOLDER_CLUSTER not in issue.message
            and "invalid-flow-" not in issue.message
        ]
    return []


def _repair(data: Any, path: FieldPath, kind: str, at_key: bool) -> bool:
    parent: Any = data
    for part in path[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return False
    last = path[-1]
    if isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        parent[last] = "(?!)" if isinstance(parent[last], str | int | float | bool) or parent[last] is None else {}
        return not (len(path) == 2 and path[0] == "flows")
    if not isinstance(parent, dict):
        return False
    placeholders: dict[str, Any] = {
        "name": f"invalid-flow-{path[1] if len(path) > 1 else 0}",
        "source": _PLACEHOLDER_CLUSTER,
        "target": _PLACEHOLDER_CLUSTER,
        "cluster": _PLACEHOLDER_CLUSTER,
        "bootstrap_servers": "placeholder:9092",
    }
    if at_key:
        return False
    if kind == "missing" or last in placeholders:
        if last not in placeholders:
            return False
        parent[last] = placeholders[str(last)]
        return True
    parent.pop(last, None)
    return True


def _unique(issues: list[SpecIssue]) -> list[SpecIssue]:
    return sorted(set(issues))


# -- pydantic errors, rewritten for people -----------------------------------------------------------------


def pydantic_issues(exc: ValidationError, data: Any, locations: Locations, file: str) -> list[SpecIssue]:
    issues = []
    for error in exc.errors(include_url=False):
        issues.append(_issue_from_error(error, data, locations, file))
    return sorted(set(issues))


def _data_path(loc: tuple[Any, ...], data: Any) -> tuple[FieldPath, bool, Any]:
    """The part of a pydantic `loc` that exists in the data, whether it reached a dict key, and the value there."""
    path: list[str | int] = []
    node = data
    for part in loc:
        if part == "[key]":
            return tuple(path), True, node
        if _has_child(node, part):
            node = node[part]
        else:
            if isinstance(node, dict) and isinstance(part, str):
                path.append(part)  # a missing or extra key: still name it
                return tuple(path), False, None
            return tuple(path), False, node
        path.append(part)
    return tuple(path), False, node


def _has_child(node: Any, part: Any) -> bool:
    if isinstance(node, dict):
        return isinstance(part, str) and part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _issue_from_error(error: Any, data: Any, locations: Locations, file: str) -> SpecIssue:
    kind: str = error["type"]
    loc: tuple[Any, ...] = tuple(error["loc"])
    path, at_key, value = _data_path(loc, data)
    mark = locations.key(path) if (at_key or kind in ("extra_forbidden",)) else locations.value(path)
    message, hint = _describe(kind, error, path, value)
    return SpecIssue(file, mark.line, mark.column, path, message, hint)


def _describe(kind: str, error: Any, path: FieldPath, value: Any) -> tuple[str, str]:
    ctx = error.get("ctx") or {}
    name = path[-1] if path else ""
    got = error.get("input")
    if kind == "missing":
        return f"missing required field '{name}'", _missing_hint(path)
    if kind == "extra_forbidden":
        allowed = _allowed_fields(path[:-1])
        close = difflib.get_close_matches(str(name), allowed, n=1)
        if close:
            return f"unknown field '{name}'", f"did you mean '{close[0]}'?"
        return f"unknown field '{name}'", "allowed here: " + ", ".join(allowed) if allowed else "remove it"
    if kind == "literal_error":
        expected = str(ctx.get("expected", "")).replace(" or ", ", ")
        if path == ("version",):
            return f"unsupported version {got!r}", "this kmirror reads version: 1"
        close = difflib.get_close_matches(str(got), [e.strip(" '") for e in expected.split(",")], n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"use one of {expected}"
        return f"must be one of {expected}, got {got!r}", hint
    if kind == "string_pattern_mismatch":
        return _pattern_message(path, got, str(ctx.get("pattern", "")))
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"expected a whole number, got {_show(got)}", "write a number without quotes, e.g. 3"
    if kind in ("bool_parsing", "bool_type"):
        return f"expected true or false, got {_show(got)}", "write true or false"
    if kind in ("float_parsing", "float_type"):
        return f"expected a number, got {_show(got)}", "write a number, e.g. 1.5"
    if kind in ("string_type",):
        return f"expected a string, got {_show(got)}", "quote the value"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"expected a mapping (key: value pairs), got {_show(got)}", "indent the fields under this key"
    if kind in ("tuple_type", "list_type"):
        return f"expected a list, got {_show(got)}", "write a list, e.g. [\".*\"] or one '- item' per line"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bound = {"greater_than_equal": "at least", "greater_than": "more than"}.get(kind, "at most")
        limit = ctx.get("ge", ctx.get("gt", ctx.get("le", ctx.get("lt"))))
        return f"must be {bound} {limit}, got {got!r}", "change the number"
    if kind in ("too_short",):
        return "must not be empty", "add at least one entry"
    if kind in ("string_too_short",):
        return "must not be empty", "write a value"
    if kind in ("string_too_long",):
        return f"is too long (at most {ctx.get('max_length')} characters)", "shorten it"
    if kind == "value_error":
        message = str(error.get("msg", "")).removeprefix("Value error, ")
        return message, _value_error_hint(path, message)
    return str(error.get("msg", "invalid value")), "fix the value"


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    return repr(value)


def _missing_hint(path: FieldPath) -> str:
    hints = {
        "version": "add 'version: 1' at the top",
        "clusters": "declare the clusters, e.g. clusters: {onprem: {bootstrap_servers: 'host:9092'}}",
        "state": "say where kmirror keeps its state, e.g. state: {cluster: <alias>}",
        "bootstrap_servers": "add bootstrap_servers: 'host:9092'",
        "name": "give the flow a unique name",
        "source": "add source: <cluster alias>",
        "target": "add target: <cluster alias>",
        "cluster": "add cluster: <cluster alias>",
    }
    return hints.get(str(path[-1]) if path else "", "add it")


def _value_error_hint(path: FieldPath, message: str) -> str:
    if "${" in message:
        return "write ${env:NAME} or ${file:PATH}"
    if "duration" in message:
        return "write it like 500ms, 10s, 1m30s or 2h"
    if "host:port" in message:
        return "list brokers as host:port, comma-separated, e.g. 'broker1:9092,broker2:9092'"
    if "template" in message:
        return "a template names {topic} once and may name {source}, e.g. '{source}.{topic}'"
    if "master" in message:
        return "match spark.master to spark.deploy"
    return "fix the value"


def _pattern_message(path: FieldPath, got: Any, pattern: str) -> tuple[str, str]:
    if len(path) == 2 and path[0] == "clusters":
        return (
            f"cluster alias {got!r} has characters kmirror cannot put in a topic name",
            "use letters, digits, '-' and '_' only (it prefixes remote topic names and internal topic names)",
        )
    if path and path[-1] == "name":
        return (
            f"flow name {got!r} is not allowed",
            "use letters, digits, '.', '-' and '_', starting with a letter or digit",
        )
    if path and path[-1] == "separator":
        return f"separator {got!r} is not allowed", "use '.', '_' or '-' (1 to 5 of them); MM2's default is '.'"
    if path and path[-1] == "topic":
        return (
            f"{got!r} is not a valid topic name",
            "topic names use A-Z a-z 0-9 . _ - and are at most 249 characters",
        )
    return f"{got!r} does not match the expected format {pattern}", "fix the value"


def _allowed_fields(path: FieldPath) -> list[str]:
    annotation: Any = DesiredState
    for part in path:
        annotation = _step(annotation, part)
        if annotation is None:
            return []
    model = _unwrap(annotation)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    while True:
        origin = get_origin(annotation)
        if origin is typing.Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            annotation = members[0] if len(members) == 1 else annotation
            if len(members) != 1:
                return annotation
        else:
            return annotation


def _step(annotation: Any, part: str | int) -> Any:
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        info = annotation.model_fields.get(str(part))
        return None if info is None else info.annotation
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is dict and len(args) == 2:
        return args[1]
    if origin in (tuple, list) and args:
        return args[0]
    return None


def _kind(value: Any) -> str:
    return _show(value) if not isinstance(value, str | int | float | bool) else f"a single value ({value!r})"


__all__ = ["LoadedSpec", "SpecError", "format_field_path", "load", "load_desired_state", "load_text"]
