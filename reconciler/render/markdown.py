"""The plan as a pull-request comment: warnings on top, a summary table, details in collapsible sections.

The first line is the marker `<!-- kmirror-plan -->`, so a workflow can find the comment it posted before and
update it instead of adding one per push. Each kind's changes sit in a `<details>` section holding a ```diff
block (`+` create, `-` delete, `~` change, `-/+` replace), open when it holds a delete or a replace, so that
nothing destructive hides behind a click. GitHub refuses comments over 65,536 characters: past `max_chars`
the remaining changes are counted, not shown, and the comment says so.

Laid out from `reconciler.render.view` (computed from the JSON plan); nothing here compares before and after.
Pure: returns a string; no I/O, no Kafka or Spark client.
"""

from __future__ import annotations

import html
import re

from reconciler.plan.definition import Plan
from reconciler.render.view import (
    ACTIONS,
    KIND_TITLES,
    ChangeView,
    PlanView,
    layout,
    plan_view,
    short_digest,
    table_rows,
)

MARKER = "<!-- kmirror-plan -->"
#: Below GitHub's 65,536-character limit for a comment, with room for what a workflow wraps around it.
DEFAULT_MAX_CHARS = 60_000

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~#&])")


def render_markdown(plan: Plan, *, max_chars: int = DEFAULT_MAX_CHARS, full: bool = False) -> str:
    """The plan as Markdown for a pull-request comment, at most about `max_chars` long; `full` shows each job's
    whole spec (`kmirror show`)."""
    return render_view_markdown(plan_view(plan, full=full), max_chars=max_chars)


def render_view_markdown(view: PlanView, *, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    head = [MARKER, f"### kmirror plan: {_title(view)}", ""]
    if view.unsealed_notice:
        head += [f"> 🔓 **Unsealed:** {_escape(view.unsealed_notice)}", ""]
    if view.warnings:
        n = len(view.warnings)
        head += [f"> ⚠️ **{n} warning{'s' if n != 1 else ''}**", ">"]
        head += [f"> - {_warning(w)}" for w in view.warnings]
        head.append("")
    if not view.changes:
        head += [view.summary_line(), ""]
    else:
        head += _summary_table(view)
    foot = [_footer(view)]

    remaining = max_chars - _cost(head + foot) - 400  # 400: room for the note on omitted changes
    body: list[str] = []
    shown = 0
    for kind in view.kinds():
        changes = [c for c in view.changes if c.kind == kind]
        blocks = [_diff_block(c) for c in changes]
        fence = _fence(blocks)
        opening = [*_section_open(kind, changes), "", f"{fence}diff"]
        closing = [fence, "", "</details>", ""]
        cost = _cost(opening + closing)
        fitting: list[list[str]] = []
        for block in blocks:
            if cost + _cost(block) + 1 > remaining:
                break
            fitting.append(block)
            cost += _cost(block) + 1
        if fitting:
            remaining -= cost
            shown += len(fitting)
            body += opening
            for i, block in enumerate(fitting):
                body += ([""] if i else []) + block
            body += closing
        if len(fitting) < len(blocks):
            break
    if shown < len(view.changes):
        body += [
            f"> **{len(view.changes) - shown} of {len(view.changes)} changes are not shown**: the comment would "
            "be too long for a pull request. The summary above counts them all; the full plan is in this run's "
            "`kmirror plan` output and its JSON plan file.",
            "",
        ]
    return "\n".join(head + body + foot) + "\n"


def _title(view: PlanView) -> str:
    if view.total == 0:
        return "no changes"
    return ", ".join(f"{view.summary.get(a, 0)} to {a}" for a in ACTIONS)


def _summary_table(view: PlanView) -> list[str]:
    rows = ["| Kind | Create | Update | Replace | Delete |", "| :-- | --: | --: | --: | --: |"]
    totals = dict.fromkeys(ACTIONS, 0)
    for kind in view.kinds():
        counts = view.counts(kind)
        for a in ACTIONS:
            totals[a] += counts[a]
        rows.append(f"| {_escape(KIND_TITLES.get(kind, kind))} | " + " | ".join(str(counts[a]) for a in ACTIONS) + " |")
    rows.append("| **Total** | " + " | ".join(f"**{totals[a]}**" for a in ACTIONS) + " |")
    return [*rows, ""]


def _section_open(kind: str, changes: list[ChangeView]) -> list[str]:
    counts = dict.fromkeys(ACTIONS, 0)
    for c in changes:
        if c.action in counts:
            counts[c.action] += 1
    detail = ", ".join(f"{n} to {a}" for a, n in counts.items() if n)
    destructive = counts["delete"] or counts["replace"]
    title = html.escape(KIND_TITLES.get(kind, kind))
    return [f"<details{' open' if destructive else ''}><summary><b>{title}</b>: {html.escape(detail)}</summary>"]


def _diff_block(change: ChangeView) -> list[str]:
    """A change as diff lines: the op in the first column, where GitHub colours `+` and `-` lines."""
    out = [f"# {change.comment}", f"{change.symbol} {change.address}"]
    out += [f"{op}{' ' * (4 + 4 * depth)}{text}".rstrip() for op, depth, text in layout(change.lines)]
    if change.table is not None:
        out += [f"{op}    {text}".rstrip() for op, text in table_rows(change.table)]
    return out


def _footer(view: PlanView) -> str:
    parts = [f"plan {_code(view.plan_id)}", f"spec {_code(short_digest(view.spec_digest))}"]
    if view.lineage or view.serial:
        parts.append(f"state serial {view.serial}")
        if view.lineage:
            parts.append(f"lineage {_code(view.lineage)}")
    else:
        parts.append("no state recorded yet")
    if view.created_at:
        parts.append(f"created {_escape(view.created_at)}")
    parts.append(f"format {view.format_version}")
    return "<sub>" + " · ".join(parts) + "</sub>"


def _warning(text: str) -> str:
    """A warning as one list item: its address (when it starts with one) as code, the rest escaped."""
    head, sep, rest = text.partition(": ")
    addressed = sep and "/" in head and " " not in head
    out = f"{_code(head)}: {_escape(rest)}" if addressed else _escape(text)
    return out.replace("\n", "<br>")


def _escape(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", text)


def _code(text: str) -> str:
    """`text` as an inline code span, with a fence longer than any run of backticks inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _cost(lines: list[str]) -> int:
    return sum(len(x) + 1 for x in lines)


def _fence(blocks: list[list[str]]) -> str:
    """A code fence longer than any run of backticks in the blocks, so that no value can close the code block."""
    text = "\n".join(line for block in blocks for line in block)
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=0)
    return "`" * max(3, longest + 1)
