"""The plan as a terminal reads it, in Terraform's layout: `+ ~ -/+ -` symbols, config diffs key by key.

Laid out from `reconciler.render.view` (itself computed from the JSON plan); nothing here compares before
and after. ANSI colour only when the caller asks for it: the CLI passes `color=True` only on a tty and
without `--no-color`, so a redirected plan or a CI log stays plain.

Pure: returns a string, prints nothing; no Kafka or Spark client.
"""

from __future__ import annotations

from reconciler.plan.definition import Plan
from reconciler.render.view import (
    ACTIONS,
    LEGEND,
    SYMBOLS,
    ChangeView,
    PlanView,
    layout,
    plan_view,
    short_digest,
    table_rows,
)

_RESET = "\x1b[0m"
_BOLD = "\x1b[1m"
_COLORS = {"+": "\x1b[32m", "~": "\x1b[33m", "-/+": "\x1b[35m", "-": "\x1b[31m"}
_INDENT = 6  # where an attribute's op sits: under the resource address, as in Terraform


class _Paint:
    def __init__(self, color: bool) -> None:
        self.color = color

    def op(self, symbol: str) -> str:
        code = _COLORS.get(symbol)
        return f"{code}{symbol}{_RESET}" if self.color and code else symbol

    def bold(self, text: str, symbol: str | None = None) -> str:
        if not self.color:
            return text
        return f"{_BOLD}{_COLORS.get(symbol or '', '')}{text}{_RESET}"


def render_text(plan: Plan, color: bool = False, *, full: bool = False) -> str:
    """The plan for a terminal; `color` adds ANSI colour (green create, yellow update, magenta replace, red delete);
    `full` shows each job's whole spec (`kmirror show`)."""
    return render_view_text(plan_view(plan, full=full), color)


def render_view_text(view: PlanView, color: bool = False) -> str:
    paint = _Paint(color)
    out = [_header(view), ""]
    if view.unsealed_notice:
        out += [paint.bold("Unsealed:", "~") + " " + view.unsealed_notice, ""]
    if view.changes:
        used = [a for a in ACTIONS if any(c.action == a for c in view.changes)]
        out.append("Resource actions are indicated with the following symbols:")
        out += [f"{' ' * (3 - len(SYMBOLS[a]))}{paint.op(SYMBOLS[a])} {LEGEND[a]}" for a in used]
        out += ["", "kmirror will perform the following actions:", ""]
        for change in view.changes:
            out += _change(change, paint)
            out.append("")
    if view.warnings:
        out.append(paint.bold("Warnings:", "~"))
        for warning in view.warnings:
            first, *rest = warning.splitlines() or [""]
            out.append(f"  - {first}")
            out += [f"    {line}" for line in rest]
        out.append("")
    out.append(paint.bold(view.summary_line(), "+" if view.total == 0 else None))
    return "\n".join(out) + "\n"


def _header(view: PlanView) -> str:
    state = f"state serial {view.serial}" if view.lineage or view.serial else "no state recorded yet"
    return f"kmirror plan {view.plan_id} (spec {short_digest(view.spec_digest)}, {state})"


def _change(change: ChangeView, paint: _Paint) -> list[str]:
    symbol = change.symbol
    out = [
        paint.bold(f"  # {change.comment}"),
        f"{' ' * (3 - len(symbol))}{paint.op(symbol)} {change.address}",
    ]
    for op, depth, text in layout(change.lines):
        out.append(f"{' ' * (_INDENT + 4 * depth)}{paint.op(op)} {text}".rstrip())
    if change.table is not None:
        for op, text in table_rows(change.table):
            out.append(f"{' ' * _INDENT}{paint.op(op)} {text}".rstrip())
    return out
