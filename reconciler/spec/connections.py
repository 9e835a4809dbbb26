"""What a change to the desired-state file does to where kmirror connects: for the pull-request plan workflow.

A branch that edits a cluster's `bootstrap_servers` or `client` settings, or moves the state to another cluster,
could point kmirror (and the credentials the workflow holds) at a broker of its author's choosing. The plan
workflow runs `kmirror connections BASE_FILE HEAD_FILE` (`cli/connections.py`) and puts what it prints (a Markdown
warning, or nothing) at the top of the pull-request comment.

Pure. Must not: resolve a secret reference or return a value (only the names of the fields that changed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reconciler.spec.yaml_source import YamlSyntaxError, parse_yaml


def connection_changes(base_text: str, head_text: str) -> list[str]:
    """The fields that decide where and as whom kmirror connects and that differ between the two texts.

    An unreadable text counts as empty; a file that did not exist before (empty `base_text`) changes nothing
    worth flagging: the whole file is new and reviewed as such.
    """
    base, head = _read(base_text), _read(head_text)
    if not base:
        return []
    changed: list[str] = []
    base_clusters, head_clusters = _mapping(base.get("clusters")), _mapping(head.get("clusters"))
    for name in sorted(set(base_clusters) | set(head_clusters), key=str):
        before, after = _mapping(base_clusters.get(name)), _mapping(head_clusters.get(name))
        for field in ("bootstrap_servers", "client"):
            if before.get(field) != after.get(field):
                changed.append(f"clusters.{name}.{field}")
    if _mapping(base.get("state")).get("cluster") != _mapping(head.get("state")).get("cluster"):
        changed.append("state.cluster")
    return changed


def warning_markdown(changed: Sequence[str]) -> str:
    """The comment's warning block for `changed` (empty when nothing changed)."""
    if not changed:
        return ""
    fields = ", ".join(f"`{c}`" for c in changed)
    return (
        "> [!WARNING]\n"
        f"> **This pull request changes where kmirror connects or how it authenticates:** {fields}.\n"
        "> A branch can point kmirror, with the credentials this workflow holds, at a broker of its choosing.\n"
        "> Check these lines before approving (docs/security.md).\n\n"
    )


def _read(text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        data = parse_yaml(text, "kmirror.yaml")[0]
    except YamlSyntaxError:
        return {}
    return data if isinstance(data, dict) else {}


def _mapping(value: object) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}
