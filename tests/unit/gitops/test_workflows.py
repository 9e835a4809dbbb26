"""The GitHub workflows keep their promises: one updated PR comment, never-overlapping applies, one drift issue.

Every workflow file is parsed and its key guarantees checked; the github-script steps run in Node against a
fake GitHub (tests/workflows.py) so the comment-by-marker and open/update/close logic is exercised as written.
actionlint (make lint) checks syntax, expressions and the calls between the files; this checks intent.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reconciler.render.markdown import MARKER
from tests.workflows import ACTION, EXAMPLE_WORKFLOWS, REUSABLE, ROOT, FakeGitHub, load, only_job, step

pytestmark = pytest.mark.unit

KINDS = ("plan", "apply", "drift", "verify")
ALL_FILES = sorted([*ROOT.glob(".github/workflows/*.yml"), ACTION, *EXAMPLE_WORKFLOWS.glob("*.yml")])


def reusable(kind: str) -> dict[str, Any]:
    return load(REUSABLE / f"kmirror-{kind}.yml")


def example(kind: str) -> dict[str, Any]:
    return load(EXAMPLE_WORKFLOWS / f"kmirror-{kind}.yml")


def script_of(job: dict[str, Any], name: str) -> str:
    s = step(job, name)
    assert s["uses"].startswith("actions/github-script@")
    text: str = s["with"]["script"]
    return text


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_workflow_file_parses(path: Path) -> None:
    doc = load(path)
    assert doc["name"]
    assert "runs" in doc or "jobs" in doc


def test_kmirror_ci_runs_ci_run() -> None:
    job = only_job(load(REUSABLE / "ci.yml"))
    assert any(s.get("run") == "bash .ci/run" for s in job["steps"])


def test_make_lint_runs_a_pinned_actionlint_on_every_workflow() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^ACTIONLINT_VERSION \?= v\d+\.\d+\.\d+$", makefile, re.M)
    assert re.search(r"^lint: .*\bactionlint\b", makefile, re.M)
    assert re.search(r"^test: lint", makefile, re.M)
    script = (ROOT / ".ci" / "actionlint").read_text()
    assert ".github/workflows/*.yml examples/*/.github/workflows/*.yml" in script


@pytest.mark.parametrize("kind", KINDS)
def test_reusable_workflows_are_called_not_triggered(kind: str) -> None:
    doc = reusable(kind)
    assert list(doc["on"]) == ["workflow_call"]
    inputs = doc["on"]["workflow_call"]["inputs"]
    assert inputs["kmirror-repository"]["required"] and inputs["kmirror-ref"]["required"]
    assert inputs["config"]["default"] == "kmirror.yaml"
    job = only_job(doc)
    assert job["env"]["CONFIG"] == "${{ inputs.config }}"
    setup = _setup(job)
    if kind == "plan":  # a fork's pull request gets no secret (see test_a_fork_gets_no_secret_and_no_plan)
        assert setup["with"]["secrets-json"] == "${{ env.FORK != 'true' && toJSON(secrets) || '{}' }}"
    else:
        assert setup["with"]["secrets-json"] == "${{ toJSON(secrets) }}"


def _setup(job: dict[str, Any]) -> dict[str, Any]:
    (found,) = [s for s in job["steps"] if s.get("uses") == "./.kmirror-action/.github/actions/kmirror"]
    return found


def test_plan_validates_then_plans_markdown_and_saves_the_json_plan() -> None:
    doc = reusable("plan")
    job = only_job(doc)
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert 'kmirror validate -f "$CONFIG"' in step(job, "validate")["run"]
    plan = step(job, "plan")
    assert plan["if"] == "steps.validate.outcome == 'success' && env.FORK != 'true'"
    for flag in ("--format markdown", "--detailed-exitcode", '--out "$RUNNER_TEMP/kmirror-plan.json"'):
        assert flag in plan["run"]
    upload = step(job, "Upload the JSON plan")
    assert upload["uses"].startswith("actions/upload-artifact@")
    assert "kmirror-plan.json" in upload["with"]["path"]
    failing = step(job, "Fail on an invalid config or a failed plan")
    assert "steps.validate.outcome != 'success'" in failing["if"] and "exit 1" in failing["run"]


def test_plan_comment_is_found_by_the_renderers_marker() -> None:
    job = only_job(reusable("plan"))
    script = script_of(job, "Post or update the pull-request comment")
    assert f"const marker = '{MARKER}';" in script
    assert "updateComment" in script and "createComment" in script
    assert "always()" in step(job, "Post or update the pull-request comment")["if"]
    # the error comments carry the marker too, so a failing push edits the same comment
    assert step(job, "Write the comment")["run"].count(f'echo "{MARKER}"') == 4  # invalid, fork, failed, warning


def test_apply_never_overlaps_and_writes_the_job_summary() -> None:
    job = only_job(reusable("apply"))
    concurrency = job["concurrency"]
    assert concurrency["cancel-in-progress"] is False
    assert "inputs.config" in concurrency["group"] and "github.repository" in concurrency["group"]
    run = step(job, "apply")["run"]
    assert 'kmirror apply -f "$CONFIG" --auto-approve --lock-timeout "$LOCK_TIMEOUT"' in run
    assert "set -o pipefail" in run
    summary = step(job, "Job summary")
    assert summary["if"].startswith("always()") and "$GITHUB_STEP_SUMMARY" in summary["run"]
    assert job["permissions"] == {"contents": "read"}


def test_drift_plans_with_detailed_exitcode_and_fails_only_on_errors() -> None:
    doc = reusable("drift")
    assert doc["on"]["workflow_call"]["inputs"]["label"]["default"] == "kmirror-drift"
    job = only_job(doc)
    assert job["permissions"] == {"contents": "read", "issues": "write"}
    run = step(job, "plan")["run"]
    assert "--detailed-exitcode" in run and "--format markdown" in run
    assert re.search(r"\*\) .*exit 1", run)
    issue_step = step(job, "Open, update or close the drift issue")
    assert issue_step["if"] == "steps.plan.outputs.exitcode == '0' || steps.plan.outputs.exitcode == '2'"


def test_verify_runs_each_flow_with_detailed_exitcode_and_a_report_file() -> None:
    doc = reusable("verify")
    assert doc["on"]["workflow_call"]["inputs"]["label"]["default"] == "kmirror-verify"
    job = only_job(doc)
    assert job["permissions"] == {"contents": "read", "issues": "write"}
    run = step(job, "verify")["run"]
    assert 'kmirror verify -f "$CONFIG" --flow "$flow" "${args[@]}" -o "$report"' in run
    assert "--format markdown --detailed-exitcode" in run and "$GITHUB_STEP_SUMMARY" in run
    assert step(job, "Open, update or close the verify issue")["if"] == (
        "steps.verify.outputs.verdict == 'ok' || steps.verify.outputs.verdict == 'mismatch'"
    )
    assert step(job, "Fail on a mismatch or an error")["if"].startswith("always()")


# -- the callers in examples/gitops-repo ------------------------------------------------------------------------


def _secret_names_in_example_config() -> set[str]:
    values = str(load(EXAMPLE_WORKFLOWS.parents[1] / "kmirror.yaml"))  # parsed: the comments are gone
    return set(re.findall(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}", values))


@pytest.mark.parametrize("kind", KINDS)
def test_example_calls_the_reusable_workflow_with_its_inputs(kind: str) -> None:
    doc = example(kind)
    job = only_job(doc)
    uses = job["uses"]
    match = re.fullmatch(r"([\w.-]+/[\w.-]+)/\.github/workflows/(kmirror-\w+\.yml)@([\w.-]+)", uses)
    assert match, uses
    repository, file, ref = match.groups()
    assert file == f"kmirror-{kind}.yml"
    assert job["with"]["kmirror-repository"] == repository and job["with"]["kmirror-ref"] == ref
    declared = reusable(kind)["on"]["workflow_call"]["inputs"]
    assert set(job["with"]) <= set(declared)
    assert {k for k, v in declared.items() if v.get("required")} <= set(job["with"])
    assert job["secrets"] == "inherit"
    assert set(job["with"]["env-secrets"].split()) == _secret_names_in_example_config()
    needed = only_job(reusable(kind))["permissions"]
    assert doc["permissions"] == needed  # a caller must grant what the called job asks for


def test_example_triggers() -> None:
    assert "pull_request" in example("plan")["on"]
    apply = example("apply")
    assert apply["on"]["push"]["branches"] == ["main"]
    assert apply["concurrency"]["cancel-in-progress"] is False
    assert example("drift")["on"]["schedule"][0]["cron"]
    assert example("verify")["on"]["schedule"][0]["cron"]
    assert example("verify")["concurrency"]["cancel-in-progress"] is False


def test_example_config_references_secrets_and_names_the_schema() -> None:
    text = (EXAMPLE_WORKFLOWS.parents[1] / "kmirror.yaml").read_text()
    assert text.startswith("# yaml-language-server: $schema=")
    assert _secret_names_in_example_config()


# -- the composite action -------------------------------------------------------------------------------------


def test_action_installs_kmirror_with_python_java_and_a_cache() -> None:
    action = load(ACTION)
    assert action["runs"]["using"] == "composite"
    uses = [s.get("uses", "") for s in action["runs"]["steps"]]
    assert any(u.startswith("actions/setup-python@") for u in uses)
    assert any(u.startswith("actions/setup-java@") for u in uses)
    cache = next(s for s in action["runs"]["steps"] if s.get("uses", "").startswith("actions/cache@"))
    assert "~/.cache/kmirror" in cache["with"]["path"]
    for kind in KINDS:
        given = _setup(only_job(reusable(kind)))["with"]
        assert set(given) <= set(action["inputs"])


def test_action_scripts_pass_shellcheck(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck", path=str(Path(__file__).parents[3] / ".venv" / "bin")) or shutil.which(
        "shellcheck"
    )
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install -e '.[dev]')")
    for i, s in enumerate(load(ACTION)["runs"]["steps"]):
        if "run" in s:
            script = tmp_path / f"step{i}.sh"
            script.write_text("#!/usr/bin/env bash\n" + s["run"])
            result = subprocess.run([shellcheck, str(script)], capture_output=True, text=True)
            assert result.returncode == 0, result.stdout


# -- the pull-request path is safe -------------------------------------------------------------------------------


def test_a_fork_gets_no_secret_and_no_plan() -> None:
    job = only_job(reusable("plan"))
    fork = job["env"]["FORK"]
    assert "github.event.pull_request.head.repo.full_name != github.repository" in fork
    assert "env.FORK != 'true'" in _setup(job)["with"]["env-secrets"]
    assert "env.FORK != 'true'" in step(job, "plan")["if"]
    assert "env.FORK != 'true'" in step(job, "Post or update the pull-request comment")["if"]
    steps = [s.get("name") or s.get("uses") for s in job["steps"]]
    assert steps.index("Refuse pull_request_target") < steps.index("./.kmirror-action/.github/actions/kmirror")
    refuse = step(job, "Refuse pull_request_target")
    assert refuse["if"] == "github.event_name == 'pull_request_target'" and "exit 1" in refuse["run"]
    for example in EXAMPLE_WORKFLOWS.glob("*.yml"):
        triggers = load(example).get("on") or load(example).get(True) or {}  # YAML 1.1 reads `on:` as True
        assert "pull_request_target" not in triggers


#: The steps that run `kmirror plan` or `kmirror apply`, per reusable workflow: the only ones given the plan key.
PLAN_KEY_STEPS: dict[str, set[str]] = {"plan": {"plan"}, "apply": {"apply"}, "drift": {"plan"}, "verify": set()}


@pytest.mark.parametrize("kind", KINDS)
def test_the_plan_key_reaches_the_plan_and_apply_steps_only(kind: str) -> None:
    job = only_job(reusable(kind))
    assert "KMIRROR_PLAN_KEY" not in job.get("env", {})
    given = set()
    for s in job["steps"]:
        env = s.get("env", {})
        if "KMIRROR_PLAN_KEY" in env:
            assert env["KMIRROR_PLAN_KEY"] == "${{ secrets.KMIRROR_PLAN_KEY }}"
            given.add(s.get("id") or s.get("name"))
        elif re.search(r"^\s*kmirror (plan|apply)\b", s.get("run", ""), re.M):
            raise AssertionError(f"{kind}: step {s.get('id') or s.get('name')!r} runs kmirror without the plan key")
    assert given == PLAN_KEY_STEPS[kind]
    if kind == "plan":  # a fork's pull request never runs the step that holds the key
        assert "env.FORK != 'true'" in step(job, "plan")["if"]


def test_the_example_tells_to_create_the_plan_key() -> None:
    readme = (EXAMPLE_WORKFLOWS.parents[1] / "README.md").read_text()
    assert "`KMIRROR_PLAN_KEY`" in readme and "openssl rand -hex 32" in readme
    assert "KMIRROR_PLAN_KEY" in (ROOT / "docs" / "security.md").read_text()
    for kind in ("plan", "apply"):
        assert only_job(example(kind))["secrets"] == "inherit"  # how the key reaches the reusable workflow


def test_the_comment_flags_connection_changes_and_is_scrubbed_of_every_exported_secret(tmp_path: Path) -> None:
    from tests.workflows import Runner

    runner = Runner(tmp_path)
    (runner.temp / "validate.txt").write_text("ok\n")
    (runner.temp / "plan.err").write_text("Error: broker said: bad password hunter2-secret-value\n")
    (runner.temp / "connections.md").write_text(
        "> [!WARNING]\n> **This pull request changes where kmirror connects or how it authenticates:** x.\n\n"
    )
    result = runner.run(
        only_job(reusable("plan")),
        "Write the comment",
        CONFIG="kmirror.yaml",
        FORK="false",
        VALIDATE="success",
        PLAN="failure",
        RUN_URL="https://example/run",
        HEAD_SHA="0123456789abcdef",
        SECRET_NAMES="CLOUD_PASSWORD",
        CLOUD_PASSWORD="hunter2-secret-value",
    )
    assert result.returncode == 0, result.stderr
    comment = (runner.temp / "comment.md").read_text()
    assert comment.startswith(f"{MARKER}\n> [!WARNING]") and comment.count(MARKER) == 1
    assert "bad password ***" in comment and "hunter2" not in comment
    assert "kmirror plan failed" in comment


# -- the github-script logic, run in Node against a fake GitHub ------------------------------------------------

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def _comment(gh: FakeGitHub, tmp: Path, body: str, config: str = "kmirror.yaml") -> None:
    comment_file = tmp / "comment.md"
    comment_file.write_text(body)
    script = script_of(only_job(reusable("plan")), "Post or update the pull-request comment")
    gh.run(script, {"CONFIG": config, "COMMENT_FILE": str(comment_file)}, tmp)


@needs_node
def test_the_plan_comment_is_created_once_then_edited_in_place(tmp_path: Path) -> None:
    gh = FakeGitHub(pr=7)
    gh.comments.append({"id": 1, "issue_number": 7, "body": "LGTM", "user": {"type": "User"}})
    gh.comments.append({"id": 2, "issue_number": 8, "body": f"{MARKER}\nother PR", "user": {"type": "Bot"}})
    _comment(gh, tmp_path, f"{MARKER}\nplan one\n<!-- kmirror-config: kmirror.yaml -->\n")
    _comment(gh, tmp_path, f"{MARKER}\nplan two\n<!-- kmirror-config: kmirror.yaml -->\n")
    _comment(gh, tmp_path, f"{MARKER}\nplan three\n<!-- kmirror-config: kmirror.yaml -->\n")
    ours = [c for c in gh.comments if c["issue_number"] == 7 and c["body"].startswith(MARKER)]
    assert len(ours) == 1 and "plan three" in ours[0]["body"]
    assert [c[0] for c in gh.calls] == ["updateComment"]  # the last run only edited
    assert gh.comments[0]["body"] == "LGTM" and "other PR" in gh.comments[1]["body"]

    # a second config file in the same repository gets its own comment
    _comment(gh, tmp_path, f"{MARKER}\nstaging\n<!-- kmirror-config: staging.yaml -->\n", config="staging.yaml")
    assert len([c for c in gh.comments if c["issue_number"] == 7 and c["body"].startswith(MARKER)]) == 2


@needs_node
def test_a_huge_plan_is_cut_below_githubs_comment_limit_and_stays_findable(tmp_path: Path) -> None:
    gh = FakeGitHub(pr=3)
    body = f"{MARKER}\n" + "x" * 200_000 + "\n<!-- kmirror-config: kmirror.yaml -->\n"
    _comment(gh, tmp_path, body)
    _comment(gh, tmp_path, body)
    (only,) = gh.comments
    assert len(only["body"]) <= 65536
    assert only["body"].startswith(MARKER) and "<!-- kmirror-config: kmirror.yaml -->" in only["body"]
    assert "artifacts" in only["body"]


def _drift(gh: FakeGitHub, tmp: Path, exitcode: int, plan: str = f"{MARKER}\n### plan\n") -> None:
    plan_file = tmp / "drift.md"
    plan_file.write_text(plan)
    script = script_of(only_job(reusable("drift")), "Open, update or close the drift issue")
    env = {"CONFIG": "kmirror.yaml", "EXITCODE": str(exitcode), "LABEL": "kmirror-drift", "PLAN_FILE": str(plan_file)}
    gh.run(script, env, tmp)


@needs_node
def test_drift_opens_one_issue_updates_it_and_closes_it_when_clean(tmp_path: Path) -> None:
    gh = FakeGitHub()
    _drift(gh, tmp_path, 0)
    assert gh.issues == [] and gh.calls == []

    _drift(gh, tmp_path, 2, f"{MARKER}\nretention.ms changed\n")
    (issue,) = gh.issues
    assert issue["state"] == "open" and issue["labels"] == ["kmirror-drift"]
    assert issue["title"] == "kmirror drift: kmirror.yaml"
    assert "retention.ms changed" in issue["body"] and "<!-- kmirror-config: kmirror.yaml -->" in issue["body"]
    assert gh.labels == ["kmirror-drift"]

    _drift(gh, tmp_path, 2, f"{MARKER}\nnow partitions too\n")
    assert len(gh.issues) == 1 and "now partitions too" in gh.issues[0]["body"]
    assert gh.calls == [["updateIssue", issue["number"], "edit"]]

    _drift(gh, tmp_path, 0)
    assert gh.issues[0]["state"] == "closed" and gh.issues[0]["state_reason"] == "completed"
    closing = [c for c in gh.comments if c["issue_number"] == issue["number"]]
    assert len(closing) == 1 and "Drift is gone" in closing[0]["body"]

    _drift(gh, tmp_path, 0)  # clean again: nothing to do
    assert gh.calls == []

    _drift(gh, tmp_path, 2)  # drift again: a new issue (the old one stays closed), the label already exists
    assert [i["state"] for i in gh.issues] == ["closed", "open"]
    assert gh.labels == ["kmirror-drift"]


@needs_node
def test_drift_issue_of_another_config_is_left_alone(tmp_path: Path) -> None:
    gh = FakeGitHub(labels=["kmirror-drift"])
    other = {"number": 5, "title": "kmirror drift: other.yaml", "labels": ["kmirror-drift"], "state": "open",
             "body": "<!-- kmirror-config: other.yaml -->"}  # fmt: skip
    gh.issues.append(other)
    _drift(gh, tmp_path, 0)
    assert gh.issues[0]["state"] == "open"
    _drift(gh, tmp_path, 2)
    assert len(gh.issues) == 2 and gh.issues[0]["body"] == "<!-- kmirror-config: other.yaml -->"


# -- the verify workflow: its step against a fake kmirror, its issue against a fake GitHub ------------------------

FAKE_KMIRROR = """#!/usr/bin/env bash
# validate lists the flows; verify behaves per flow name: good 0, inflight 2, bad 1 (report), broken 1 (none)
if [ "$1" = validate ]; then echo '{"ok": true, "flows": ["good", "inflight", "bad", "broken"]}'; exit 0; fi
while [ $# -gt 0 ]; do
  case $1 in --flow) flow=$2; shift ;; -o) out=$2; shift ;; esac
  shift
done
case $flow in
  good) echo "### report of good: match" > "$out"; exit 0 ;;
  inflight) echo "### report of inflight: match, incomplete" > "$out"; exit 2 ;;
  bad) echo "### report of bad: MISMATCH: 1 missing" > "$out"; exit 1 ;;
  *) echo "Error: cluster did not answer" >&2; exit 1 ;;
esac
"""


def _verify_step(tmp: Path, flows: str, fail_on_incomplete: str = "false") -> tuple[Any, str, str]:
    from tests.workflows import Runner

    fake = tmp / "fake-bin"
    fake.mkdir(exist_ok=True)
    (fake / "kmirror").write_text(FAKE_KMIRROR)
    (fake / "kmirror").chmod(0o755)
    runner = Runner(tmp / "work")
    runner.summary.write_text("")
    path = os.pathsep.join([str(fake), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    result = runner.run(only_job(reusable("verify")), "verify", CONFIG="kmirror.yaml", FLOWS=flows, TOPICS="",
                        SINCE="24h", SAMPLE="1", MAX_RPS="", ENGINE="python", TIMEOUT="30",
                        FAIL_ON_INCOMPLETE=fail_on_incomplete, PATH=path)  # fmt: skip
    not_ok = (runner.temp / "kmirror-verify" / "not-ok.md").read_text()
    return result, runner.summary.read_text(), not_ok


def test_the_verify_step_reports_every_flow_and_files_only_the_ones_not_ok(tmp_path: Path) -> None:
    result, summary, not_ok = _verify_step(tmp_path, "good inflight")
    assert result.returncode == 0, result.stderr
    assert result.outputs["verdict"] == "ok" and result.outputs["errors"] == "0"
    assert "report of good" in summary and "report of inflight" in summary and not_ok == ""

    result, summary, not_ok = _verify_step(tmp_path, "good inflight", fail_on_incomplete="true")
    assert result.outputs["verdict"] == "mismatch" and "report of inflight" in not_ok and "good" not in not_ok

    result, summary, not_ok = _verify_step(tmp_path, "")  # every flow of the file, from kmirror validate
    assert result.returncode == 0, result.stderr
    assert result.outputs["verdict"] == "mismatch" and result.outputs["errors"] == "1"
    assert "report of bad" in not_ok and "report of good" not in not_ok and "inflight" not in not_ok
    assert "flow `broken`" in summary and "before it could report" in summary
    assert "::error::kmirror verify of flow broken failed (exit 1)" in result.stdout

    result, _, not_ok = _verify_step(tmp_path, "good broken")  # an error only: the issue is left as it is
    assert result.outputs["verdict"] == "error" and not_ok == ""


def _verify_issue(gh: FakeGitHub, tmp: Path, verdict: str, report: str = "### report of bad\n") -> None:
    report_file = tmp / "not-ok.md"
    report_file.write_text(report)
    script = script_of(only_job(reusable("verify")), "Open, update or close the verify issue")
    env = {"CONFIG": "kmirror.yaml", "VERDICT": verdict, "LABEL": "kmirror-verify", "REPORT_FILE": str(report_file)}
    gh.run(script, env, tmp)


@needs_node
def test_verify_opens_one_issue_updates_it_and_closes_it_when_every_flow_verifies(tmp_path: Path) -> None:
    gh = FakeGitHub()
    _verify_issue(gh, tmp_path, "ok")
    assert gh.issues == [] and gh.calls == []

    _verify_issue(gh, tmp_path, "mismatch", "### flow a: MISMATCH: 3 missing\n")
    (issue,) = gh.issues
    assert issue["state"] == "open" and issue["labels"] == ["kmirror-verify"]
    assert issue["title"] == "kmirror verify: kmirror.yaml"
    assert "3 missing" in issue["body"] and "<!-- kmirror-config: kmirror.yaml -->" in issue["body"]

    _verify_issue(gh, tmp_path, "mismatch", "### flow a: MISMATCH: 1 different\n")
    assert len(gh.issues) == 1 and "1 different" in gh.issues[0]["body"]
    assert gh.calls == [["updateIssue", issue["number"], "edit"]]

    _verify_issue(gh, tmp_path, "ok")
    assert gh.issues[0]["state"] == "closed"
    closing = [c for c in gh.comments if c["issue_number"] == issue["number"]]
    assert len(closing) == 1 and "verifies again" in closing[0]["body"]
