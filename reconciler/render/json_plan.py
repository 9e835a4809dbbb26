"""The plan as JSON: the plan document itself, `Plan.to_json()`, described field by field in docs/plan-format.md.

This is the format `kmirror plan --out` saves and `kmirror apply PLANFILE` reads back, so it is never
reshaped for display: what a reviewer or a script reads here is exactly what apply will execute.

Pure: returns a string; no I/O, no Kafka or Spark client.
"""

from __future__ import annotations

from reconciler.plan.definition import Plan


def render_json(plan: Plan) -> str:
    """The plan document (indented JSON, newline-terminated); `Plan.from_json` reads it back unchanged."""
    return plan.to_json()
