"""The workflows' own `run:` steps, executed as GitHub would, against the real local clusters.

One config repository per test (an isolated World: own aliases, topic prefix, state topic), a repository secret
given as an environment variable and referenced as ${env:...}: the pull-request plan and its comment, the
apply on merge and its job summary, and the scheduled drift check: 0 when clean, 2 after a change made by hand
on the target, 1 on an invalid file. The github-script steps run against a fake GitHub (tests/workflows.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.plan.definition import FORMAT_VERSION
from reconciler.render.markdown import MARKER
from tests.conftest import KafkaCluster
from tests.integration.plan.harness import World, create_topics, describe, new_world, set_config
from tests.workflows import REUSABLE as WORKFLOWS
from tests.workflows import FakeGitHub, Runner, load, only_job, step

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-Value-that-must-never-leak"
#: The repository secret KMIRROR_PLAN_KEY, which the workflows give to their plan and apply steps.
PLAN_KEY = "0f1e2d3c4b5a69788796a5b4c3d2e1f0-plan-key"
CONFIG_MARKER = "<!-- kmirror-config: kmirror.yaml -->"


@pytest.fixture
def world(tmp_path: Path, source: KafkaCluster, target: KafkaCluster) -> World:
    return new_world(tmp_path, source, target)


def _config(world: World) -> Path:
    """The World's spec, with credentials referenced from the environment as a config repository would."""
    path = world.spec()
    text = path.read_text()
    text = text.replace(
        f'{world.dst}: {{bootstrap_servers: "{world.target.bootstrap_servers}"}}',
        f'{world.dst}: {{bootstrap_servers: "{world.target.bootstrap_servers}", '
        f'client: {{sasl.username: kmirror, sasl.password: "${{env:KMIRROR_TEST_PASSWORD}}"}}}}',
    )
    assert "${env:KMIRROR_TEST_PASSWORD}" in text
    path.write_text(text)
    return path


def _job(kind: str) -> dict:  # type: ignore[type-arg]
    return only_job(load(WORKFLOWS / f"kmirror-{kind}.yml"))


def _pr_plan(runner: Runner, gh: FakeGitHub) -> dict[str, str]:
    """The plan workflow's steps, in order, with the outcomes GitHub would pass between them."""
    job = _job("plan")
    meta = runner.run(job, "meta", WORKDIR=".")
    assert meta.outcome == "success" and meta.outputs["slug"] == "kmirror.yaml"  # the artifact's name
    validate = runner.run(job, "validate")
    plan_outcome = "skipped"
    exitcode = ""
    if validate.outcome == "success":
        plan = runner.run(job, "plan", TIMEOUT="30")
        plan_outcome, exitcode = plan.outcome, plan.outputs["exitcode"]
    written = runner.run(
        job, "Write the comment",
        VALIDATE=validate.outcome, PLAN=plan_outcome, RUN_URL="https://github.example/run/1", HEAD_SHA="a" * 40,
        SECRET_NAMES="KMIRROR_TEST_PASSWORD",
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    script = step(job, "Post or update the pull-request comment")["with"]["script"]
    gh.run(script, {"CONFIG": "kmirror.yaml", "COMMENT_FILE": str(runner.temp / "comment.md")}, runner.temp)
    return {"validate": validate.outcome + validate.stdout, "plan": plan_outcome, "exitcode": exitcode}


def _drift(runner: Runner, gh: FakeGitHub) -> tuple[int, str]:
    job = _job("drift")
    result = runner.run(job, "plan", TIMEOUT="30")
    code = result.outputs["exitcode"]
    if code in ("0", "2"):
        assert result.returncode == 0, result.stderr  # drift is not a failure of the job
        script = step(job, "Open, update or close the drift issue")["with"]["script"]
        env = {"CONFIG": "kmirror.yaml", "EXITCODE": code, "LABEL": "kmirror-drift",
               "PLAN_FILE": str(runner.temp / "drift.md")}  # fmt: skip
        gh.run(script, env, runner.temp)
    else:
        assert result.returncode == 1, "an error fails the drift job"
    return int(code), (runner.temp / "drift.md").read_text() + result.stderr


def _no_secret_anywhere(runner: Runner, *texts: str) -> None:
    for text in texts:
        assert SECRET not in text and PLAN_KEY not in text
    for path in runner.temp.iterdir():
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), f"{path.name} holds the secret"
            assert PLAN_KEY not in path.read_text(errors="replace"), f"{path.name} holds the plan key"


def _stop_jobs_after(request: pytest.FixtureRequest, world: World, plan: dict) -> None:  # type: ignore[type-arg]
    """Once the job runner is wired, apply deploys the flow's replication job: stop it when the test ends."""
    if any(c["kind"] == "job" for c in plan["changes"]):

        def stop() -> None:
            world.kmirror("apply", "-f", str(world.spec(flow="enabled: false", name="stop.yaml")), "--auto-approve")

        request.addfinalizer(stop)


def test_pull_request_merge_and_drift_on_real_clusters(world: World, request: pytest.FixtureRequest) -> None:
    orders = f"{world.prefix}orders"
    create_topics(world.source, (orders, 3, {"retention.ms": "3600000", "cleanup.policy": "delete"}))
    config = _config(world)
    assert config == world.tmp / "kmirror.yaml"
    runner = Runner(
        world.tmp,
        env={"CONFIG": "kmirror.yaml", "KMIRROR_TEST_PASSWORD": SECRET, "FORK": "false", "KMIRROR_PLAN_KEY": PLAN_KEY},
    )
    pr = FakeGitHub(pr=12)

    # 1. the pull request: validate, plan as Markdown, one comment, the JSON plan for the artifact
    first = _pr_plan(runner, pr)
    assert first["validate"].startswith("success") and "is valid" in first["validate"]
    assert first["plan"] == "success" and first["exitcode"] == "2"
    markdown = (runner.temp / "plan.md").read_text()
    assert markdown.startswith(MARKER + "\n")
    assert "| Kind | Create | Update | Replace | Delete |" in markdown
    assert "| **Total** |" in markdown
    assert f"topic/{world.dst}/{world.remote(orders)}" in markdown
    saved = json.loads((runner.temp / "kmirror-plan.json").read_text())
    assert saved["format_version"] == FORMAT_VERSION and saved["summary"]["create"] >= 1
    assert saved["digest"].startswith("hmac-sha256:") and "Unsealed" not in markdown  # sealed with the secret
    _stop_jobs_after(request, world, saved)
    (comment,) = pr.comments
    assert comment["body"].startswith(MARKER) and CONFIG_MARKER in comment["body"]
    assert "| **Total** |" in comment["body"]
    _no_secret_anywhere(runner, comment["body"])

    # a second push: the same comment is edited, not a new one added
    _pr_plan(runner, pr)
    assert len(pr.comments) == 1 and pr.calls == [["updateComment", comment["id"]]]

    # 2. the merge: validate, apply --auto-approve, the output in the job summary
    apply_job = _job("apply")
    assert runner.run(apply_job, "kmirror validate").returncode == 0
    applied = runner.run(apply_job, "apply", LOCK_TIMEOUT="60", TIMEOUT="30")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert runner.run(apply_job, "Job summary", OUTCOME=applied.outcome).returncode == 0
    summary = runner.summary.read_text()
    assert "kmirror apply of `kmirror.yaml`" in summary and "Apply complete" in summary
    assert describe(world.target, world.remote(orders))[0] == 3
    _no_secret_anywhere(runner, applied.stdout, applied.stderr)

    # 3. the schedule: clean, then a change made by hand on the target, then clean again after re-applying
    issues = FakeGitHub()
    code, _ = _drift(runner, issues)
    assert code == 0 and issues.issues == []

    set_config(world.target, world.remote(orders), "retention.ms", "60000")
    code, text = _drift(runner, issues)
    assert code == 2
    assert text.startswith(MARKER) and f"topic/{world.dst}/{world.remote(orders)}" in text and "retention.ms" in text
    (issue,) = issues.issues
    assert issue["state"] == "open" and issue["labels"] == ["kmirror-drift"] and "retention.ms" in issue["body"]

    code, _ = _drift(runner, issues)  # still drifting: the same issue, edited
    assert code == 2 and len(issues.issues) == 1

    assert runner.run(apply_job, "apply", LOCK_TIMEOUT="60", TIMEOUT="30").returncode == 0
    assert describe(world.target, world.remote(orders))[1]["retention.ms"] == "3600000"
    code, _ = _drift(runner, issues)
    assert code == 0 and issues.issues[0]["state"] == "closed"
    _no_secret_anywhere(runner)

    # 4. an invalid file: the drift job fails (exit 1) and leaves the issue alone; the PR comment shows the error
    (world.tmp / "kmirror.yaml").write_text(
        config.read_text().replace("naming: {policy: prefix}", "naming: {policy: nope}")
    )
    code, text = _drift(runner, issues)
    assert code == 1 and "kmirror.yaml:" in text and "naming.policy" in text
    result = _pr_plan(runner, pr)
    assert result["validate"].startswith("failure") and result["plan"] == "skipped"
    assert (
        len(pr.comments) == 1 and "is invalid" in pr.comments[0]["body"] and "naming.policy" in pr.comments[0]["body"]
    )


def test_a_missing_secret_fails_the_plan_with_its_name(world: World) -> None:
    create_topics(world.source, (f"{world.prefix}a", 1, {}))
    config = _config(world)
    runner = Runner(world.tmp, env={"CONFIG": config.name, "FORK": "false", "KMIRROR_PLAN_KEY": ""})  # no secrets
    pr = FakeGitHub(pr=1)
    result = _pr_plan(runner, pr)
    assert result["validate"].startswith("success")  # validate is offline: references are not resolved
    assert result["plan"] == "failure" and result["exitcode"] == "1"
    body = pr.comments[0]["body"]
    assert body.startswith(MARKER) and "kmirror plan failed" in body
    assert "KMIRROR_TEST_PASSWORD" in body and "is not set" in body


def test_plan_of_an_unreachable_cluster_exits_1_with_what_to_check(world: World) -> None:
    config = _config(world)
    config.write_text(config.read_text().replace(world.source.bootstrap_servers, "127.0.0.1:1"))
    runner = Runner(world.tmp, env={"CONFIG": config.name, "KMIRROR_TEST_PASSWORD": SECRET, "KMIRROR_PLAN_KEY": ""})
    result = runner.run(_job("drift"), "plan", TIMEOUT="3")
    assert result.returncode == 1 and result.outputs["exitcode"] == "1"
    assert "did not answer" in result.stderr and "bootstrap_servers" in result.stderr
