"""What the renderers promise, checked directly rather than through golden files.

Summary lines and counts, the Markdown marker and layout, colour only on request, secrets and control
characters, no-op changes, size limits for pull-request comments, and that every format is computed from the
public JSON plan alone.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.plan.definition import Action, Plan, change_of
from reconciler.render import FORMATS, MARKER, render, render_json, render_markdown, render_text
from reconciler.render.markdown import DEFAULT_MAX_CHARS
from reconciler.render.view import SENSITIVE_VALUE, plan_view, view_of
from reconciler.resources.addresses import Kind, topic_address
from tests.unit.render.plans import (
    PLANS,
    RESOLVED_SECRET,
    doc_example_plan,
    empty_plan,
    full_plan,
    make_plan,
    topic_form,
    topics_plan,
    warnings_only_plan,
)

pytestmark = pytest.mark.unit

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def all_renderings(plan: Plan) -> dict[str, str]:
    return {
        "text": render_text(plan, color=False),
        "color": render_text(plan, color=True),
        "markdown": render_markdown(plan),
        "json": render_json(plan),
    }


def test_summary_line_counts_every_action() -> None:
    plan = full_plan()
    assert (plan.summary.create, plan.summary.update, plan.summary.replace, plan.summary.delete) == (5, 6, 4, 5)
    text = render_text(plan, color=False)
    assert text.rstrip("\n").splitlines()[-1] == "Plan: 5 to create, 6 to update, 4 to replace, 5 to delete."
    assert "### kmirror plan: 5 to create, 6 to update, 4 to replace, 5 to delete" in render_markdown(plan)
    assert "| **Total** | **5** | **6** | **4** | **5** |" in render_markdown(plan)


@pytest.mark.parametrize("plan", [empty_plan(), warnings_only_plan()], ids=["empty", "warnings-only"])
def test_no_changes(plan: Plan) -> None:
    text = render_text(plan, color=False)
    assert text.rstrip("\n").splitlines()[-1] == "No changes. The clusters match the desired state."
    assert "will perform" not in text
    markdown = render_markdown(plan)
    assert "No changes. The clusters match the desired state." in markdown
    assert "<details" not in markdown
    assert "| Kind |" not in markdown


@pytest.mark.parametrize("name", list(PLANS))
def test_markdown_starts_with_the_marker_a_workflow_looks_for(name: str) -> None:
    assert MARKER == "<!-- kmirror-plan -->"
    assert render_markdown(PLANS[name]()).splitlines()[0] == MARKER


def test_markdown_puts_warnings_on_top_and_opens_destructive_sections() -> None:
    markdown = render_markdown(full_plan())
    assert markdown.index("3 warnings") < markdown.index("| Kind |") < markdown.index("<details")
    assert "> - `topic/cloud/__weird_*name*`: replication factor is 1" in markdown
    assert "<details open><summary><b>Topics</b>" in markdown  # holds deletes and replaces
    assert "<details><summary><b>Consumer group offsets</b>: 1 to update</summary>" in markdown
    assert markdown.count("<details") == markdown.count("</details>") == 5
    assert markdown.count("```diff") == 5


def test_warning_text_is_escaped_in_markdown() -> None:
    markdown = render_markdown(make_plan([], ("flow a: pattern `x|y` <b>bold</b> *not* emphasis",)))
    assert r"flow a: pattern \`x\|y\` \<b\>bold\</b\> \*not\* emphasis" in markdown


def test_colour_only_when_asked() -> None:
    plan = full_plan()
    plain = render_text(plan, color=False)
    coloured = render_text(plan, color=True)
    assert "\x1b" not in plain
    assert "\x1b" not in render_markdown(plan)
    for code, symbol in (("32", "+"), ("33", "~"), ("35", "-/+"), ("31", "-")):
        assert f"\x1b[{code}m{symbol}\x1b[0m" in coloured
    assert ANSI.sub("", coloured) == plain


def test_config_diffs_are_shown_key_by_key() -> None:
    lines = render_text(topics_plan(), color=False).splitlines()
    assert '          + max.message.bytes = "2097152"' in lines
    assert '          ~ retention.ms      = "86400000" -> "604800000"' in lines
    assert '          - segment.bytes     = "1073741824"' in lines
    assert "            # (1 unchanged config hidden)" in lines
    assert "      ~ partitions = 3 -> 6" in lines
    assert "-/+ topic/cloud/ledger" in lines


def test_every_change_is_shown_but_noop_changes_only_in_json() -> None:
    plan = full_plan()
    noop = [c for c in plan.changes if c.action == Action.NOOP]
    assert noop
    out = all_renderings(plan)
    for change in plan.changes:
        if change.action == Action.NOOP:
            assert change.address not in out["text"] and change.address not in out["markdown"]
            assert change.address in out["json"]
        else:
            for rendered in out.values():
                assert change.address in rendered


def test_a_job_spec_is_never_printed_and_secrets_stay_references(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PASS", RESOLVED_SECRET)  # were any renderer to resolve a reference, this would leak
    plan = full_plan()
    out = all_renderings(plan)
    for rendered in out.values():
        assert RESOLVED_SECRET not in rendered
    for name in ("text", "color", "markdown"):
        assert "${env:PASS}" not in out[name]  # no spec at all: operation, runner, digest and the reason
        assert "cloud:9092" not in out[name]
    assert '"sasl.password": "${env:PASS}"' in out["json"]  # the plan file keeps the reference, as written
    assert "spec_digest = sha256:aaaabbbbcccc -> sha256:111122223333" in out["text"]


def test_sensitive_looking_literal_values_are_masked_but_references_shown() -> None:
    # Config values are free-form strings: a hand-written plan file may carry a literal secret in one.
    configs = {
        "client.sasl.password": "literal-Pa55",
        "client.ssl.keystore.password": "${file:/run/ks.pass}",
        "sasl.jaas.config": 'PlainLoginModule required password="jaas-Pa55";',
    }
    change = change_of(
        address=topic_address("cloud", "odd"),
        kind=Kind.TOPIC,
        action=Action.CREATE,
        after=topic_form("cloud", "odd", 1, configs),
    )
    plan = make_plan([change])
    for rendered in (render_text(plan, color=False), render_markdown(plan)):
        assert "literal-Pa55" not in rendered and "jaas-Pa55" not in rendered
        assert re.search(r"client\.sasl\.password +" + re.escape(f"= {SENSITIVE_VALUE}"), rendered)
        assert re.search(r'client\.ssl\.keystore\.password += "\$\{file:/run/ks\.pass\}"', rendered)


def test_control_characters_cannot_reach_the_terminal() -> None:
    change = change_of(
        address=topic_address("cloud", "t"),
        kind=Kind.TOPIC,
        action=Action.CREATE,
        after=topic_form("cloud", "t", 1, {"x.note": "\x1b[2J\x1b]0;owned\x07"}),
        reason="made by \u202eevil",
    )
    text = render_text(make_plan([change]), color=False)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert r'x.note = "\u001b[2J\u001b]0;owned\u0007"' in text
    assert r"(made by \u202eevil)" in text


def test_a_backtick_fence_in_a_value_cannot_close_the_diff_block() -> None:
    change = change_of(
        address=topic_address("cloud", "t"),
        kind=Kind.TOPIC,
        action=Action.CREATE,
        after=topic_form("cloud", "t", 1, {"x.note": "```\n<script>"}),
    )
    markdown = render_markdown(make_plan([change]))
    assert "````diff" in markdown and "\n````\n" in markdown


def test_markdown_stays_under_the_pull_request_comment_limit() -> None:
    n = 3000
    changes = [
        change_of(
            address=topic_address("cloud", f"orders.{i:05d}"),
            kind=Kind.TOPIC,
            action=Action.CREATE,
            after=topic_form("cloud", f"orders.{i:05d}", 6, {"retention.ms": "604800000"}, source=f"orders.{i:05d}"),
            reason=f"mirror of onprem:orders.{i:05d} (flow onprem-to-cloud)",
        )
        for i in range(n)
    ]
    plan = make_plan(changes, ("flow onprem-to-cloud: a warning stays on top",))
    markdown = render_markdown(plan)
    assert len(markdown) <= DEFAULT_MAX_CHARS
    assert "a warning stays on top" in markdown
    assert f"| Topics | {n} | 0 | 0 | 0 |" in markdown  # the summary still counts every change
    shown = markdown.count("\n+ topic/cloud/")
    assert 0 < shown < n
    assert f"**{n - shown} of {n} changes are not shown**" in markdown
    assert markdown.count("<details") == markdown.count("</details>") == 1
    assert markdown.count("```") == 2
    assert render_markdown(plan, max_chars=10**7).count("\n+ topic/cloud/") == n


@pytest.mark.parametrize("name", list(PLANS))
def test_renderers_are_computed_from_the_json_plan(name: str) -> None:
    plan = PLANS[name]()
    reread = Plan.from_json(render_json(plan))
    assert reread == plan
    assert all_renderings(reread) == all_renderings(plan)
    assert view_of(json.loads(render_json(plan))) == plan_view(plan)


def test_render_dispatches_by_format_name() -> None:
    plan = full_plan()
    assert FORMATS == ("text", "markdown", "json")
    assert render(plan, "text") == render_text(plan, color=False)
    assert render(plan, "text", color=True) == render_text(plan, color=True)
    assert render(plan, "markdown") == render_markdown(plan)
    assert render(plan, "json") == plan.to_json()
    with pytest.raises(ValueError, match="unknown plan format 'yaml'"):
        render(plan, "yaml")


def test_the_render_package_imports_no_kafka_spark_or_cli() -> None:
    code = (
        "import sys, reconciler.render; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('confluent_kafka', 'pyspark') "
        "or m.startswith(('reconciler.adapters', 'reconciler.cli', 'reconciler.devenv'))]; "
        "print(bad)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_example_in_docs_plan_format_is_what_kmirror_produces() -> None:
    doc = (Path(__file__).parents[3] / "docs" / "plan-format.md").read_text(encoding="utf-8")
    example = doc[doc.index("## Example") :]
    json_block = example[example.index("```json\n") + 8 : example.index("\n```\n")]
    text_start = example.index("```\n", example.index("as `--format text`")) + 4
    text_block = example[text_start : example.index("```\n", text_start)]
    plan = doc_example_plan()
    assert Plan.from_json(json_block) == plan
    assert text_block == render_text(plan, color=False)
