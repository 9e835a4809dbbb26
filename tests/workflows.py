"""Reads kmirror's GitHub workflows and runs their steps for real, outside GitHub.

A `run:` step is executed as GitHub does when no shell is named (`bash -e script`), in a fake runner: the
`$GITHUB_OUTPUT`, `$GITHUB_ENV`, `$GITHUB_STEP_SUMMARY` files and `$RUNNER_TEMP` exist, and `kmirror` is the one
of this checkout. A step's inputs are its `env:` (the workflows pass every `${{ }}` value through `env:`, never
into the script text); the caller supplies their values, and a step that gains an env var the test does not
supply fails loudly instead of running with it unset.

An `actions/github-script` step is run by Node with a fake `github` client that keeps comments, issues and
labels in memory, so the comment-update and drift-issue logic is tested as written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]
REUSABLE = ROOT / ".github" / "workflows"
ACTION = ROOT / ".github" / "actions" / "kmirror" / "action.yml"
EXAMPLE_WORKFLOWS = ROOT / "examples" / "gitops-repo" / ".github" / "workflows"


def load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    return doc


def only_job(workflow: dict[str, Any]) -> dict[str, Any]:
    jobs = list(workflow["jobs"].values())
    assert len(jobs) == 1, "the reusable workflows have one job"
    job: dict[str, Any] = jobs[0]
    return job


def step(job: dict[str, Any], name_or_id: str) -> dict[str, Any]:
    for s in job["steps"]:
        if name_or_id in (s.get("id"), s.get("name")):
            found: dict[str, Any] = s
            return found
    raise KeyError(f"no step {name_or_id!r}; steps: {[s.get('id') or s.get('name') for s in job['steps']]}")


@dataclass
class Runner:
    """A fake GitHub runner rooted at `workdir` (the checked-out config repository)."""

    workdir: Path
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.temp = self.workdir / ".runner-temp"
        self.temp.mkdir(parents=True, exist_ok=True)
        self.summary = self.temp / "step-summary.md"
        self.summary.touch()

    def run(self, job: dict[str, Any], name_or_id: str, **inputs: str) -> StepResult:
        s = step(job, name_or_id)
        script = s["run"]
        assert "${{" not in script, f"step {name_or_id!r}: pass expressions through env:, not into the script"
        declared = {**job.get("env", {}), **s.get("env", {})}
        missing = sorted(k for k in declared if k not in inputs and k not in self.env and k not in ("NO_COLOR",))
        assert not missing, f"step {name_or_id!r} needs env {missing}: give them to Runner.run()"
        outputs = self.temp / f"output-{name_or_id}"
        outputs.write_text("")
        bin_dir = str(Path(sys.executable).parent)  # this checkout's kmirror
        env = {
            **os.environ,
            "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
            "NO_COLOR": "1",
            "RUNNER_TEMP": str(self.temp),
            "GITHUB_OUTPUT": str(outputs),
            "GITHUB_ENV": str(self.temp / "github-env"),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "GITHUB_SHA": "0123456789abcdef0123456789abcdef01234567",
            **self.env,
            **inputs,
        }
        script_file = self.temp / f"step-{name_or_id}.sh"
        script_file.write_text(script)
        proc = subprocess.run(
            ["bash", "-e", str(script_file)], cwd=self.workdir, env=env, capture_output=True, text=True, timeout=300
        )
        values = dict(line.split("=", 1) for line in outputs.read_text().splitlines() if "=" in line)
        return StepResult(proc.returncode, proc.stdout, proc.stderr, values)


@dataclass(frozen=True)
class StepResult:
    returncode: int
    stdout: str
    stderr: str
    outputs: dict[str, str]

    @property
    def outcome(self) -> str:
        return "success" if self.returncode == 0 else "failure"


# -- actions/github-script ------------------------------------------------------------------------------------

_FAKE_GITHUB = r"""
const fs = require('fs');
const world = JSON.parse(fs.readFileSync(process.env.WORLD_FILE, 'utf8'));
let nextId = world.nextId || 1000;
const ok = (data) => Promise.resolve({ data });
const find = (list, pred, what) => {
  const x = list.find(pred);
  if (!x) { const e = new Error(`${what} not found`); e.status = 404; throw e; }
  return x;
};
const rest = { issues: {
  listComments: async ({ issue_number }) => ok(world.comments.filter((c) => c.issue_number === issue_number)),
  createComment: async ({ issue_number, body }) => {
    const c = { id: nextId++, issue_number, body, user: { type: 'Bot' }, html_url: `c/${nextId}` };
    world.comments.push(c); world.calls.push(['createComment', issue_number]); return ok(c);
  },
  updateComment: async ({ comment_id, body }) => {
    const c = find(world.comments, (x) => x.id === comment_id, 'comment');
    c.body = body; world.calls.push(['updateComment', comment_id]); return ok(c);
  },
  listForRepo: async ({ state, labels }) => ok(world.issues.filter(
    (i) => i.state === state && (!labels || i.labels.includes(labels)))),
  create: async ({ title, body, labels }) => {
    if (labels.some((l) => !world.labels.includes(l))) { const e = new Error('no label'); e.status = 422; throw e; }
    const i = { number: nextId++, title, body, labels, state: 'open' };
    world.issues.push(i); world.calls.push(['createIssue', i.number]); return ok(i);
  },
  update: async ({ issue_number, body, state, state_reason }) => {
    const i = find(world.issues, (x) => x.number === issue_number, 'issue');
    if (body !== undefined) i.body = body;
    if (state !== undefined) { i.state = state; i.state_reason = state_reason; }
    world.calls.push(['updateIssue', issue_number, state || 'edit']); return ok(i);
  },
  createLabel: async ({ name }) => {
    if (world.labels.includes(name)) { const e = new Error('exists'); e.status = 422; throw e; }
    world.labels.push(name); world.calls.push(['createLabel', name]); return ok({ name });
  },
} };
const github = {
  rest,
  paginate: async (method, params) => (await method(params)).data,
};
const context = {
  repo: { owner: 'acme', repo: 'kafka-config' },
  issue: { number: world.pr || 0 },
  runId: 42,
  serverUrl: 'https://github.example',
};
const core = {
  info: (m) => world.log.push(m),
  warning: (m) => world.log.push(m),
  setFailed: (m) => { throw new Error(m); },
};
(async () => {
  const script = fs.readFileSync(process.env.SCRIPT_FILE, 'utf8');
  const fn = new Function('github', 'context', 'core', 'require', `return (async () => {\n${script}\n})();`);
  await fn(github, context, core, require);
  world.nextId = nextId;
  fs.writeFileSync(process.env.WORLD_FILE, JSON.stringify(world, null, 2));
})().catch((e) => { console.error(e); process.exit(1); });
"""


@dataclass
class FakeGitHub:
    """The repository a github-script step talks to: comments, issues, labels, and the calls made."""

    pr: int = 0
    comments: list[dict[str, Any]] = field(default_factory=list)
    issues: list[dict[str, Any]] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    calls: list[list[Any]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    next_id: int = 1000

    def run(self, script: str, env: dict[str, str], tmp: Path) -> None:
        node = shutil.which("node")
        assert node is not None, "node is needed to run github-script steps"
        world_file, script_file, main_file = tmp / "github.json", tmp / "script.js", tmp / "fake-github.js"
        world_file.write_text(
            json.dumps(
                {
                    "pr": self.pr,
                    "comments": self.comments,
                    "issues": self.issues,
                    "labels": self.labels,
                    "calls": [],
                    "log": [],
                    "nextId": self.next_id,
                }
            )
        )
        script_file.write_text(textwrap.dedent(script))
        main_file.write_text(_FAKE_GITHUB)
        proc = subprocess.run(
            [node, str(main_file)],
            env={**os.environ, **env, "WORLD_FILE": str(world_file), "SCRIPT_FILE": str(script_file)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, f"github-script failed:\n{proc.stdout}\n{proc.stderr}"
        world = json.loads(world_file.read_text())
        self.comments, self.issues, self.labels = world["comments"], world["issues"], world["labels"]
        self.calls, self.log, self.next_id = world["calls"], world["log"], world["nextId"]
