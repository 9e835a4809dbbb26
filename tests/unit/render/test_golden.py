"""Golden files: every hand-built plan in `plans.py`, rendered as text (plain and coloured), Markdown and JSON.

A renderer change shows up as a diff of the files in `golden/`. When the change is intended, rewrite them with

    KMIRROR_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/render

and review the diff of `tests/unit/render/golden/` like any other code change.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.plan.definition import Plan
from reconciler.render import render_json, render_markdown, render_text
from tests.unit.render.plans import PLANS

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("KMIRROR_UPDATE_GOLDEN") == "1"

#: golden file suffix -> renderer
RENDERERS: dict[str, Callable[[Plan], str]] = {
    "txt": lambda plan: render_text(plan, color=False),
    "color.txt": lambda plan: render_text(plan, color=True),
    "md": render_markdown,
    "json": render_json,
}


def _check(path: Path, rendered: str) -> None:
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(rendered, encoding="utf-8", newline="")
        return
    assert path.exists(), f"{path} is missing; create it with KMIRROR_UPDATE_GOLDEN=1"
    expected = path.read_text(encoding="utf-8")
    assert rendered == expected, f"{path.name} differs; if the change is intended, rerun with KMIRROR_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("suffix", list(RENDERERS))
@pytest.mark.parametrize("name", list(PLANS))
def test_golden(name: str, suffix: str) -> None:
    _check(GOLDEN / f"{name}.{suffix}", RENDERERS[suffix](PLANS[name]()))


@pytest.mark.parametrize("name", list(PLANS))
def test_golden_json_reads_back_as_the_same_plan(name: str) -> None:
    if UPDATE:
        pytest.skip("golden files are being rewritten")
    assert Plan.from_json((GOLDEN / f"{name}.json").read_text(encoding="utf-8")) == PLANS[name]()


def test_no_stale_golden_files() -> None:
    expected = {f"{name}.{suffix}" for name in PLANS for suffix in RENDERERS}
    stale = sorted(p.name for p in GOLDEN.iterdir() if p.name not in expected)
    assert not stale, f"golden files no test produces (delete them): {stale}"
