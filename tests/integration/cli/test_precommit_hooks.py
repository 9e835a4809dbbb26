"""kmirror's pre-commit hooks as a config repository runs them: `pre-commit try-repo` on this checkout.

pre-commit clones the checkout (uncommitted changes included), installs kmirror from it into its own virtualenv
(`language: python`; the dependencies come from PyPI) and runs the hook on a sample config repository: a valid
kmirror.yaml passes, an invalid one fails with kmirror's located error, and a stale kmirror.schema.json fails the
schema hook. Needs PyPI for the dependencies the first time (pre-commit's cache is this module's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
#: No PYTHONPATH: the hook must run the kmirror pre-commit installed, not a checkout on the path.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def _sample_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir()
    return _sample_repo_in(path, files)


def _sample_repo_in(path: Path, files: dict[str, str]) -> Path:
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    for name, text in files.items():
        (path / name).write_text(text)
    subprocess.run(["git", "add", "-A"], cwd=path, check=True)
    return path


def _try_repo(repo: Path, home: Path, *hooks: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), *hooks, "--all-files", "--color", "never"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**CLEAN_ENV, "PRE_COMMIT_HOME": str(home)},
    )


VALID = (ROOT / "examples" / "gitops-repo" / "kmirror.yaml").read_text()
INVALID = """\
version: 1
clusters:
  onprem: {bootstrap_servers: "localhost:19092"}
state: {cluster: onprem}
flows:
  - name: broken
    source: onprem
    target: nowhere
"""


def test_validate_hook_passes_a_valid_file_and_fails_an_invalid_one(tmp_path: Path, pre_commit_home: Path) -> None:
    valid = _sample_repo(tmp_path / "valid", {"kmirror.yaml": VALID, "notes.yaml": "not: [kmirror"})
    ok = _try_repo(valid, pre_commit_home, "kmirror-validate")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "kmirror validate" in ok.stdout and "Passed" in ok.stdout

    invalid = _sample_repo(tmp_path / "invalid", {"kmirror.yaml": VALID, "kmirror-prod.yaml": INVALID})
    bad = _try_repo(invalid, pre_commit_home, "kmirror-validate")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "Failed" in bad.stdout
    assert "kmirror-prod.yaml:8:" in bad.stdout and "nowhere" in bad.stdout  # file:line and the field's value
    assert "kmirror.yaml is valid" in bad.stdout  # each file checked on its own; the good one still passes


#: A `reconciler/` package a config repository could hold: imported instead of kmirror's, it would run its code.
SHADOW = {
    "reconciler/__init__.py": "raise SystemExit('SHADOW reconciler imported from the config repository')\n",
    "reconciler/cli/__init__.py": "",
    "reconciler/cli/precommit.py": "raise SystemExit('SHADOW precommit imported from the config repository')\n",
}


def test_hooks_ignore_a_reconciler_folder_in_the_config_repository(tmp_path: Path, pre_commit_home: Path) -> None:
    files = {"kmirror.yaml": VALID, **SHADOW}
    repo = tmp_path / "shadowed"
    (repo / "reconciler" / "cli").mkdir(parents=True)
    repo = _sample_repo_in(repo, files)
    ok = _try_repo(repo, pre_commit_home, "kmirror-validate")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "SHADOW" not in ok.stdout + ok.stderr and "Passed" in ok.stdout  # `python -m` alone would fail here


def test_python_hooks_run_isolated() -> None:
    """Every `python` entry is `python -I`: the working folder (the config repository) is not on the import path."""
    hooks = YAML(typ="safe").load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hooks, "no hooks"
    for hook in hooks:
        entry = hook["entry"].split()
        assert hook["language"] == "python", hook["id"]
        assert entry[:3] == ["python", "-I", "-m"], f"{hook['id']}: {hook['entry']!r} is not isolated"


def test_schema_hook_fails_a_stale_schema_copy(tmp_path: Path, pre_commit_home: Path) -> None:
    schema = (ROOT / "schemas" / "kmirror.schema.json").read_text()
    fresh = _sample_repo(tmp_path / "fresh", {"kmirror.yaml": VALID, "kmirror.schema.json": schema})
    ok = _try_repo(fresh, pre_commit_home, "kmirror-schema")
    assert ok.returncode == 0, ok.stdout + ok.stderr

    stale = json.loads(schema)
    stale["properties"].pop(next(iter(stale["properties"])))
    old = _sample_repo(tmp_path / "stale", {"kmirror.yaml": VALID, "kmirror.schema.json": json.dumps(stale)})
    bad = _try_repo(old, pre_commit_home, "kmirror-schema")
    assert bad.returncode == 1 and "Failed" in bad.stdout, bad.stdout + bad.stderr


def test_the_hooks_manifest_and_the_gitops_example_config_are_what_pre_commit_accepts() -> None:
    example = ROOT / "examples" / "gitops-repo" / ".pre-commit-config.yaml"
    for command, path in (("validate-manifest", ROOT / ".pre-commit-hooks.yaml"), ("validate-config", example)):
        result = subprocess.run(
            [sys.executable, "-m", "pre_commit", command, str(path)], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr
    assert "id: kmirror-validate" in example.read_text()
