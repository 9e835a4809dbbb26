"""Read a saved plan (`kmirror apply PLANFILE`) with errors that name the file, the line and the field.

A plan file is the reviewed artefact of a pipeline: it may be truncated by a failed upload, edited by hand, or
written by another kmirror. Each case is a located error that says what to do, never a validation dump.
Within `format_version` 1, fields this kmirror does not know are ignored (docs/plan-format.md: fields may be
added within a version); a higher `format_version` is refused, naming the version.

Must not: apply, fix or guess anything; a plan it cannot read completely is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError

from reconciler.errors import InputFileError
from reconciler.plan.definition import FORMAT_VERSION, Plan

_REMAKE = "make it again with `kmirror plan --out PLANFILE`"


def read_plan(path: Path) -> Plan:
    """The plan saved in `path`; `InputFileError` located in the file when it cannot be used as it is."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputFileError(file, f"cannot read the plan file: {exc.strerror or type(exc).__name__}") from None
    except UnicodeDecodeError:
        raise InputFileError(file, "the plan file is not UTF-8 JSON text", _REMAKE) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip())
        message = "the plan file ends early (truncated?)" if truncated else f"not valid JSON: {exc.msg}"
        raise InputFileError(file, message, _REMAKE, line=exc.lineno, column=exc.colno) from None
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
    try:
        return Plan.model_validate(known_fields(Plan, data))
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = _field(first["loc"])
        more = len(exc.errors()) - 1
        message = f"{_describe(first)}" + (f" (and {more} more problem{'s' if more != 1 else ''})" if more else "")
        raise InputFileError(
            file, message, "the plan file was edited or damaged; " + _REMAKE, line=_line_of(text, first["loc"]),
            column=1 if _line_of(text, first["loc"]) else None, field=field,
        ) from None  # fmt: skip


def known_fields(model: type[BaseModel], data: Any) -> Any:
    """`data` without the keys `model` (and its nested models) does not declare; free-form dicts are kept."""
    if not isinstance(data, dict):
        return data
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if name not in data:
            continue
        value, nested = data[name], _nested_model(info.annotation)
        if nested is not None:
            if isinstance(value, list):
                value = [known_fields(nested, v) for v in value]
            elif isinstance(value, dict):
                value = known_fields(nested, value)
        out[name] = value
    return out


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) is tuple or get_origin(annotation) is list:
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        if len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            return args[0]
    return None


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
