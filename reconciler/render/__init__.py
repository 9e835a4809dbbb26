"""Renderers: the Plan value as text (a terminal), Markdown (a pull-request comment) or JSON (the plan file).

Every renderer is computed from the public plan document (`Plan.model_dump(mode="json")`, see
docs/plan-format.md) through one format-neutral view (`view.py`), so a new format never touches diff logic,
and the planner never formats anything. Display only: the executor acts on a change's action and payload and
never on what is rendered here.

Pure: functions from a Plan to a string. No I/O, no printing, no Kafka or Spark client.
"""

from __future__ import annotations

from reconciler.plan.definition import Plan
from reconciler.render.json_plan import render_json
from reconciler.render.markdown import MARKER, render_markdown
from reconciler.render.text import render_text

FORMATS = ("text", "markdown", "json")

__all__ = ["FORMATS", "MARKER", "render", "render_json", "render_markdown", "render_text"]


def render(plan: Plan, fmt: str, *, color: bool = False) -> str:
    """`plan` in format `fmt` (one of FORMATS); `color` applies to text only."""
    if fmt == "text":
        return render_text(plan, color)
    if fmt == "markdown":
        return render_markdown(plan)
    if fmt == "json":
        return render_json(plan)
    raise ValueError(f"unknown plan format {fmt!r}; expected one of: {', '.join(FORMATS)}")
