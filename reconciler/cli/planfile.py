"""Read a saved plan (`kmirror apply PLANFILE`) with errors that name the file, the line and the field.

A plan file is the reviewed artefact of a pipeline: it may be truncated by a failed upload, edited by hand, or
written by another kmirror. Each case is a located error that says what to do, never a validation dump.
Within a `format_version`, fields this kmirror does not know are ignored (docs/plan-format.md: fields may be
added within a version); a higher `format_version` is refused, naming the version, and so is an older one (plan again).

A plan file may also be hostile (`/dev/zero`, JSON nested 100,000 deep, a 100,000-digit number): each is a
located error in well under a second, with at most `MAX_PLAN_BYTES` read. The plan's seal key comes from the
environment here (`plan_key`), never from a file or the command line.

Must not: apply, fix or guess anything; a plan it cannot read completely is refused. Must not: print the key.
"""

from __future__ import annotations

import json
import os
import re
import types
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from reconciler.errors import ConfigError, InputFileError
from reconciler.plan.definition import FORMAT_VERSION, Plan
from reconciler.resources.addresses import Kind

_REMAKE = "make it again with `kmirror plan --out PLANFILE`"

MAX_PLAN_BYTES = 64 * 1024 * 1024
"""A plan of 10,000 topics with their configs is a few megabytes; a larger file is not a plan kmirror wrote."""

MAX_PLAN_DEPTH = 64
"""How deeply a plan's JSON may nest; kmirror's own plans stay under 15 levels."""

PLAN_KEY_ENV = "KMIRROR_PLAN_KEY"
MIN_PLAN_KEY_CHARS = 16


def plan_key() -> bytes | None:
    """The key that seals saved plans (`KMIRROR_PLAN_KEY`), or None when it is not set (plans are then unsealed)."""
    value = os.environ.get(PLAN_KEY_ENV, "")
    if not value:
        return None
    if len(value) < MIN_PLAN_KEY_CHARS:
        raise ConfigError(
            f"{PLAN_KEY_ENV} is too short ({len(value)} characters; at least {MIN_PLAN_KEY_CHARS}): a short key can "
            "be guessed, and a guessed key lets anyone re-seal an edited plan. Use a random one, e.g. "
            "`openssl rand -hex 32`, kept as a CI secret"
        )
    return value.encode("utf-8")


def read_plan(path: Path) -> Plan:
    """The plan saved in `path`; `InputFileError` located in the file when it cannot be used as it is."""
    file = str(path)
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_PLAN_BYTES + 1)
    except OSError as exc:
        raise InputFileError(file, f"cannot read the plan file: {exc.strerror or type(exc).__name__}") from None
    if len(raw) > MAX_PLAN_BYTES:
        raise InputFileError(
            file,
            f"the plan file is larger than {MAX_PLAN_BYTES // (1024 * 1024)} MiB, which no plan kmirror writes is",
            "give the file `kmirror plan --out` wrote; " + _REMAKE,
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputFileError(file, "the plan file is not UTF-8 JSON text", _REMAKE) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip())
        message = "the plan file ends early (truncated?)" if truncated else f"not valid JSON: {exc.msg}"
        raise InputFileError(file, message, _REMAKE, line=exc.lineno, column=exc.colno) from None
    except RecursionError:
        line, column = _too_deep_at(text)
        raise InputFileError(
            file, f"the JSON nests more than {MAX_PLAN_DEPTH} levels deep", _REMAKE, line=line, column=column
        ) from None
    except ValueError as exc:  # a number too long to convert (Python refuses more than 4,300 digits)
        line, column = _position(text, re.search(r"\d{4000,}", text))
        raise InputFileError(
            file, f"not a plan kmirror wrote: {_first_sentence(exc)}", _REMAKE, line=line, column=column
        ) from None
    if _depth(data) > MAX_PLAN_DEPTH:
        line, column = _too_deep_at(text)
        raise InputFileError(
            file, f"the JSON nests more than {MAX_PLAN_DEPTH} levels deep", _REMAKE, line=line, column=column
        )
    if not isinstance(data, dict):
        raise InputFileError(file, f"a plan is a JSON object, this file holds {_kind(data)}", _REMAKE, line=1, column=1)
    version = data.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputFileError(
            file, f"format_version must be a whole number, got {json.dumps(version)}", _REMAKE, field="format_version"
        )
    if version > FORMAT_VERSION:
        raise InputFileError(
            file,
            f"plan format_version {version} was written by a newer kmirror; this one reads format_version "
            f"{FORMAT_VERSION}",
            "apply it with the kmirror version that made it, or plan again with this one",
            field="format_version",
        )
    if version < 1:
        raise InputFileError(file, f"unsupported plan format_version {version}", _REMAKE, field="format_version")
    if version < FORMAT_VERSION:
        raise InputFileError(
            file,
            f"plan format_version {version} was written by an older kmirror (this one writes and reads "
            f"format_version {FORMAT_VERSION}: each change now carries a typed form of its kind)",
            "plan again with this kmirror (`kmirror plan --out PLANFILE`), review it and apply that plan",
            field="format_version",
        )
    try:
        return Plan.model_validate(known_fields(Plan, data))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        loc = _untagged(tuple(first["loc"]))
        field = _field(loc)
        more = len(exc.errors()) - 1
        message = f"{_describe(first)}" + (f" (and {more} more problem{'s' if more != 1 else ''})" if more else "")
        raise InputFileError(
            file, message, "the plan file was edited or damaged; " + _REMAKE, line=_line_of(text, loc),
            column=1 if _line_of(text, loc) else None, field=field,
        ) from None  # fmt: skip


def _depth(data: Any) -> int:
    """How deeply `data` nests (iteratively: a deep value must not exhaust the stack here either)."""
    deepest = 0
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, depth)
            if deepest > MAX_PLAN_DEPTH:
                return deepest
            stack.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
    return deepest


_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _too_deep_at(text: str) -> tuple[int | None, int | None]:
    """The line and column where `text` first nests deeper than `MAX_PLAN_DEPTH` (strings skipped)."""
    depth = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_PLAN_DEPTH:
                return _position(text, match)
        elif token in "]}":
            depth -= 1
    return None, None


def _position(text: str, match: re.Match[str] | None) -> tuple[int | None, int | None]:
    if match is None:
        return None, None
    start = match.start()
    return text.count("\n", 0, start) + 1, start - (text.rfind("\n", 0, start) + 1) + 1


def _first_sentence(exc: Exception) -> str:
    return str(exc).split(";")[0][:120]


def known_fields(model: type[BaseModel], data: Any) -> Any:
    """`data` without the keys `model` (and its nested models) does not declare; free-form dicts are kept. A field
    that holds one of several models (a change of any kind) is filtered by the model its `kind` names."""
    if not isinstance(data, dict):
        return data
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if name not in data:
            continue
        value, nested = data[name], _nested_models(info.annotation)
        if nested:
            if isinstance(value, list):
                value = [_known(nested, v) for v in value]
            elif isinstance(value, dict):
                value = _known(nested, value)
        out[name] = value
    return out


def _known(models: list[type[BaseModel]], data: Any) -> Any:
    if len(models) == 1 or not isinstance(data, dict):
        return known_fields(models[0], data)
    for model in models:
        kind = model.model_fields.get("kind")
        if kind is not None and kind.default == data.get("kind"):
            return known_fields(model, data)
    return data  # an unknown kind: validation names it


def _nested_models(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's value may be (through Optional, unions, Annotated, tuple[...] and list[...])."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin, args = get_origin(annotation), [a for a in get_args(annotation) if a is not Ellipsis]
    if origin is Annotated:
        return _nested_models(args[0])
    if origin in (tuple, list):
        return _nested_models(args[0]) if len(args) == 1 else []
    if origin in (Union, types.UnionType):
        return [m for a in args for m in _nested_models(a)]
    return []


def _untagged(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """`loc` without the union tags pydantic adds after a change's index (`changes[2].topic.action`)."""
    kinds = {k.value for k in Kind}
    return tuple(p for i, p in enumerate(loc) if not (p in kinds and i > 0 and isinstance(loc[i - 1], int)))


def _field(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _describe(error: Any) -> str:
    got = json.dumps(error.get("input"), default=str)
    got = got if len(got) <= 60 else got[:57] + "..."
    if error["type"] == "missing":
        return "missing required field"
    if error["type"] == "enum":
        return f"{got} is not one of {error.get('ctx', {}).get('expected', '')}"
    return f"{error['msg'].lower()}, got {got}"


def _line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """The line of the last key of `loc` in the file, when it appears (plans are written one key a line)."""
    keys = [p for p in loc if isinstance(p, str)]
    if not keys:
        return None
    needle = json.dumps(keys[-1]) + ":"
    index = [p for p in loc if isinstance(p, int)]
    start = 0
    if index and "changes" in loc:  # the n-th change: skip to its n-th "address"
        for _ in range(index[0] + 1):
            found = text.find('"address":', start)
            if found < 0:
                break
            start = found + 1
        start = max(0, text.rfind("{", 0, start))
    found = text.find(needle, start)
    return None if found < 0 else text.count("\n", 0, found) + 1


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"
