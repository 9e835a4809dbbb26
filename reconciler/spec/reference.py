"""The `kmirror.yaml` reference page (docs/reference.md), generated from the JSON Schema.

The schema is generated from the models, and this page from the schema, so field names, types, defaults and
descriptions cannot drift from what `kmirror validate` accepts. `kmirror schema --markdown -o docs/reference.md`
writes the page; `--check` fails when the committed one is stale.
Pure: builds text from a schema dict, never reads or writes files.
"""

from __future__ import annotations

import json
import re
from typing import Any

from reconciler.spec.schema import SCHEMA_PATH, json_schema

REFERENCE_PATH = "docs/reference.md"

_ISO_DURATION = re.compile(r"^P(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)$")
_DURATION_HINT = "duration"


def reference_markdown(schema: dict[str, Any] | None = None) -> str:
    """The whole page."""
    schema = schema if schema is not None else json_schema()
    defs: dict[str, Any] = schema.get("$defs", {})
    sections: list[tuple[str, dict[str, Any]]] = []
    placed: dict[str, str] = {}  # def name -> path of its section
    _walk("", schema, defs, sections, placed)

    out = [
        "# `kmirror.yaml` reference",
        "",
        f"<!-- Generated from {SCHEMA_PATH} by `kmirror schema --markdown -o {REFERENCE_PATH}`. "
        "Do not edit by hand. -->",
        "",
        "Every field of the desired-state file, version 1. Types, defaults and constraints come from the JSON",
        f"Schema (`{SCHEMA_PATH}`), which editors use to complete and check the file: make its first line",
        "`# yaml-language-server: $schema=<path or URL of kmirror.schema.json>`. Unknown fields are errors.",
        "",
        "Strings in `client`, `producer`, `consumer` and `conf` maps may reference secrets: `${env:NAME}` (an",
        "environment variable) or `${file:PATH}` (a file's content, relative to the desired-state file); `$${`",
        "writes a literal `${`. Values that differ per environment may use the same references: `bootstrap_servers`,",
        "`state.topic`, `spark.master`, `spark.rest_url` and `spark.checkpoint_root` are resolved when the file is",
        "loaded, so one file serves staging and production (see docs/environments.md).",
        "Durations are written `500ms`, `10s`, `1m30s`, `2h`, `1d`, or a number of seconds.",
        "Regexes (topic, group and config filters) must match the **whole** name, as in MirrorMaker 2.",
        "",
        "Sections:",
        "",
    ]
    for path, _ in sections:
        out.append(f"- [`{path or 'kmirror.yaml'}`](#{_anchor(path)})")
    out.append("")
    for path, node in sections:
        out.extend(_section(path, node, defs, placed))
    return "\n".join(out).rstrip("\n") + "\n"


def _walk(
    path: str, node: dict[str, Any], defs: dict[str, Any], sections: list[tuple[str, dict[str, Any]]],
    placed: dict[str, str],
) -> None:  # fmt: skip
    sections.append((path, node))
    for name, prop in node.get("properties", {}).items():
        child = f"{path}.{name}" if path else name
        target = _object_ref(prop)
        if target is None:
            continue
        ref, suffix = target
        if ref in placed:
            continue
        placed[ref] = child + suffix
        _walk(child + suffix, defs[ref], defs, sections, placed)


def _object_ref(prop: dict[str, Any]) -> tuple[str, str] | None:
    """(def name, path suffix) when a property holds an object described in $defs."""
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[1], ""
    if prop.get("type") == "array" and "$ref" in prop.get("items", {}):
        return prop["items"]["$ref"].rsplit("/", 1)[1], "[]"
    for value in prop.get("patternProperties", {}).values():
        if "$ref" in value:
            return value["$ref"].rsplit("/", 1)[1], ".<alias>"
    for option in prop.get("anyOf", []):  # an optional object (`X | None`)
        if "$ref" in option:
            return option["$ref"].rsplit("/", 1)[1], ""
    return None


def _section(path: str, node: dict[str, Any], defs: dict[str, Any], placed: dict[str, str]) -> list[str]:
    title = f"`{path}`" if path else "Top level"
    lines = [f"## {title}", ""]
    if node.get("description"):
        lines += [_text(node["description"]), ""]
    props: dict[str, Any] = node.get("properties", {})
    required = set(node.get("required", []))
    lines += ["| field | type | default | description |", "| --- | --- | --- | --- |"]
    for name in _ordered(props, required):
        prop = props[name]
        field = f"`{name}`" + (" **(required)**" if name in required else "")
        lines.append(f"| {field} | {_type(prop, placed)} | {_default(prop, name in required)} | {_description(prop)} |")
    lines.append("")
    return lines


def _ordered(props: dict[str, Any], required: set[str]) -> list[str]:
    # required first, then the file's usual order is unknown to a schema: alphabetical keeps diffs stable
    return sorted(props, key=lambda n: (n not in required, n))


def _type(prop: dict[str, Any], placed: dict[str, str]) -> str:
    target = _object_ref(prop)
    if target is not None:
        ref, suffix = target
        where = placed.get(ref, ref)
        link = f"[`{ref_label(where)}`](#{_anchor(where)})"
        if suffix == "[]":
            return f"list of {link}"
        if suffix == ".<alias>":
            key = next(iter(prop["patternProperties"]))
            return f"map: alias (`{key}`) → {link}"
        return link
    if _is_duration(prop):
        return _DURATION_HINT
    if _is_byte_rate(prop):
        return "byte rate (per second)"
    if prop.get("format") == "date-time":
        return "ISO 8601 timestamp with a timezone"
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "anyOf" in prop:
        kinds = [_type(p, placed) for p in prop["anyOf"] if p.get("type") != "null"]
        optional = any(p.get("type") == "null" for p in prop["anyOf"])
        return " or ".join(kinds) + (" or null" if optional else "")
    kind = prop.get("type")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}), placed)}" + ("s" if prop.get("items", {}).get("type") else "")
    if kind == "object":
        value = prop.get("additionalProperties")
        if isinstance(value, dict):
            return "map: name → " + _type(value, placed)
        return "object"
    if isinstance(kind, list):
        names = [str(k) for k in kind if not (k == "integer" and "number" in kind)]
        return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
    text = str(kind) if kind else "any"
    if "pattern" in prop:
        text += f" matching `{_cell(prop['pattern'])}`"
    return text


def ref_label(path: str) -> str:
    return path or "kmirror.yaml"


def _default(prop: dict[str, Any], required: bool) -> str:
    if required:
        return ""
    if "default" not in prop:
        if _object_ref(prop) is not None:
            return "see its section"
        return "empty" if prop.get("type") in ("object", "array") else "none"
    value = prop["default"]
    if _is_duration(prop) and isinstance(value, str):
        value = _duration_text(value)
        return f"`{value}`"
    if value is None:
        return "none"
    if value == [] or value == {}:
        return "empty"
    return f"`{_cell(json.dumps(value, ensure_ascii=False))}`"


def _description(prop: dict[str, Any]) -> str:
    parts = []
    if prop.get("description") and not _is_duration_hint(prop["description"]):
        parts.append(_text(prop["description"]))
    constraints = []
    if "minimum" in prop and "maximum" in prop:
        constraints.append(f"{prop['minimum']} to {prop['maximum']}")
    elif "minimum" in prop:
        constraints.append(f"at least {prop['minimum']}")
    if "minLength" in prop and prop["minLength"] > 0:
        constraints.append("not empty")
    if "maxLength" in prop:
        constraints.append(f"at most {prop['maxLength']} characters")
    if "pattern" in prop and prop.get("type") == "string" and "enum" not in prop:
        pass  # shown with the type
    if "minProperties" in prop:
        constraints.append(f"at least {prop['minProperties']} entry")
    if constraints:
        parts.append("(" + ", ".join(constraints) + ")")
    return " ".join(parts) or "&nbsp;"


def _is_duration(prop: dict[str, Any]) -> bool:
    options = prop.get("anyOf", [prop])
    if any("enum" in o or "format" in o for o in options):  # a duration among other forms (start_from): each named
        return False
    return any(o.get("type") == "string" and "ms|s|m|h|d" in o.get("pattern", "") for o in options)


def _is_byte_rate(prop: dict[str, Any]) -> bool:
    """`spec.byte_rates.ByteRate`: a string with a byte unit, or a whole number of bytes."""
    return any(o.get("type") == "string" and "KiB|MiB" in o.get("pattern", "") for o in prop.get("anyOf", []))


def _is_duration_hint(text: str) -> bool:
    return text.startswith("A duration:")


def _duration_text(iso: str) -> str:
    match = _ISO_DURATION.match(iso)
    if not match:
        return iso
    hours, minutes, seconds = match.groups()
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    if seconds:
        text += f"{float(seconds):g}s"
    return text or "0s"


def _text(text: str) -> str:
    """Prose for a table cell: `<...>` outside code spans would be read as HTML by GitHub, so it is escaped."""
    parts = " ".join(text.split()).split("`")
    for i in range(0, len(parts), 2):  # even parts are outside code spans
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return _cell("`".join(parts))


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _anchor(path: str) -> str:
    """GitHub's heading anchor for `## \\`path\\``: lower case, punctuation dropped, spaces to '-'."""
    heading = path or "top level"
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")
