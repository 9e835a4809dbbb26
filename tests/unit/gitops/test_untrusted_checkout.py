"""Issue 35, holes 1 and 2, in the workflows: the config repository's checkout is data, never code, and a pull
request cannot publish a file or a token through kmirror's messages.

- every `actions/checkout` leaves no token behind (`persist-credentials: false`);
- no `run:` script runs Python that could import from the checkout (`python -m`, `python -`, `python -c` without
  `-I`/`-P`), nor a module of kmirror's by path: the shadow-module test runs the plan workflow's steps in a checkout
  that adds a `reconciler/` package (and a `json.py`) whose import leaves a marker, and finds no marker;
- a fork's pull request that points `bootstrap_servers` at `${file:.git/config}` (where a checkout would keep the
  job's token) gets a comment and a step summary that name the reference and hold no token.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.workflows import ACTION, EXAMPLE_WORKFLOWS, REUSABLE, ROOT, Runner, load, only_job

pytestmark = pytest.mark.unit

WORKFLOWS = sorted([*REUSABLE.glob("*.yml"), *EXAMPLE_WORKFLOWS.glob("*.yml")])
CONFIG_CHECKOUTS = sorted([*REUSABLE.glob("kmirror-*.yml"), *EXAMPLE_WORKFLOWS.glob("*.yml"), ACTION])
"""The workflows (and the action) that run in a config repository's checkout; ci.yml and release.yml build kmirror
from its own."""
TOKEN = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"
PYTHON = re.compile(r"(?:^|[\s;|&(])python3?((?:\s+-[A-Za-z]+)*)\s+(-m|-c|-)(?=\s|$)", re.MULTILINE)


def _steps(doc: dict[str, Any]) -> list[dict[str, Any]]:
    if "runs" in doc:
        steps: list[dict[str, Any]] = doc["runs"]["steps"]
        return steps
    return [s for job in (doc.get("jobs") or {}).values() for s in job.get("steps", [])]


@pytest.mark.parametrize("path", [*WORKFLOWS, ACTION], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_checkout_keeps_the_token(path: Path) -> None:
    for s in _steps(load(path)):
        if str(s.get("uses", "")).startswith("actions/checkout@"):
            assert (s.get("with") or {}).get("persist-credentials") is False, f"{path.name}: {s}"


@pytest.mark.parametrize("path", CONFIG_CHECKOUTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_script_runs_python_that_could_import_the_checkout(path: Path) -> None:
    for s in _steps(load(path)):
        script = str(s.get("run", ""))
        assert "reconciler." not in script, f"{path.name}: runs a kmirror module by name: {script}"
        for match in PYTHON.finditer(script):
            flags = match.group(1)
            assert "I" in flags or "P" in flags, f"{path.name}: `python {flags} {match.group(2)}` without -I"


def _hostile_checkout(root: Path, marker: Path) -> None:
    """A pull request's checkout that adds kmirror's package and a stdlib module, each leaving `marker` on import."""
    payload = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for module in (
        "reconciler/__init__.py",
        "reconciler/cli/__init__.py",
        "reconciler/cli/__main__.py",
        "reconciler/spec/__init__.py",
        "reconciler/spec/connections.py",
        "json.py",
        "venv.py",
    ):
        (root / module).parent.mkdir(parents=True, exist_ok=True)
        (root / module).write_text(payload)  # fmt: skip


def test_the_plan_workflow_ignores_a_reconciler_package_in_the_checkout(tmp_path: Path) -> None:
    marker = tmp_path / "imported-from-the-pull-request"
    head = tmp_path / "workspace"
    _hostile_checkout(head, marker)
    base = head / ".kmirror-base"
    base.mkdir()
    spec = "version: 1\nclusters: {a: {bootstrap_servers: 'a:9092'}}\nstate: {cluster: a}\n"
    (base / "kmirror.yaml").write_text(spec)
    (head / "kmirror.yaml").write_text(spec.replace("a:9092", "evil.example.com:9092"))
    runner = Runner(head)
    job = only_job(load(REUSABLE / "kmirror-plan.yml"))
    flagged = runner.run(job, "connections", CONFIG="kmirror.yaml", FORK="false", BASE_ROOT=str(base), WORKDIR=".")
    assert flagged.returncode == 0, flagged.stderr
    assert "`clusters.a.bootstrap_servers`" in (runner.temp / "connections.md").read_text()
    validated = runner.run(job, "validate", CONFIG="kmirror.yaml", FORK="false")
    assert validated.returncode == 0, validated.stdout
    (runner.temp / "validate.txt").write_text("ok\n")
    (runner.temp / "plan.md").write_text("plan\n")
    commented = runner.run(
        job, "Write the comment", CONFIG="kmirror.yaml", FORK="false", VALIDATE="success", PLAN="success",
        RUN_URL="https://example/run", HEAD_SHA="0123456789abcdef", SECRET_NAMES="PW", PW="pw-0123456789",
    )  # fmt: skip
    assert commented.returncode == 0, commented.stderr
    assert not marker.exists(), f"code from the checkout ran: {marker.read_text()}"


def test_a_fork_cannot_publish_a_token_through_a_reference_in_bootstrap_servers(tmp_path: Path) -> None:
    head = tmp_path / "workspace"
    (head / ".git").mkdir(parents=True)
    (head / ".git" / "config").write_text(
        '[http "https://github.com/"]\n\textraheader = AUTHORIZATION: basic ' + TOKEN + "\n"
    )
    (head / "kmirror.yaml").write_text(
        textwrap.dedent("""\
            version: 1
            clusters:
              a: {bootstrap_servers: "${file:.git/config}"}
              b: {bootstrap_servers: "b:9092"}
            state: {cluster: b, topic: "${file:.git/config}"}
            """)
    )
    runner = Runner(head)
    job = only_job(load(REUSABLE / "kmirror-plan.yml"))
    validated = runner.run(job, "validate", CONFIG="kmirror.yaml", FORK="true")
    assert validated.returncode != 0
    commented = runner.run(
        job, "Write the comment", CONFIG="kmirror.yaml", FORK="true", VALIDATE="failure", PLAN="skipped",
        RUN_URL="https://example/run", HEAD_SHA="0123456789abcdef", SECRET_NAMES="",
    )  # fmt: skip
    assert commented.returncode == 0, commented.stderr
    comment = (runner.temp / "comment.md").read_text()
    assert "is invalid" in comment and "${file:.git/config}" in comment
    published = comment + runner.summary.read_text() + validated.stdout + validated.stderr
    for piece in (TOKEN, TOKEN[4:20], "extraheader", "AUTHORIZATION"):
        assert piece not in published
