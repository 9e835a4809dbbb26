"""The release, built once per test worker: `python -m build` (an sdist, then the wheel from it, as the release
workflow builds them) from a copy of the checkout, so the build leaves nothing in it. The wheel tests share it
(tests/conftest.py runs them on one worker)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Release:
    wheel: Path
    sdist: Path


@pytest.fixture(scope="session")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    work = tmp_path_factory.mktemp("release")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", ".kmirror", "*cache*", "build"))
    result = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", work / "dist", source],
        cwd=work, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"python -m build:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    (wheel,) = (work / "dist").glob("kmirror-*.whl")
    (sdist,) = (work / "dist").glob("kmirror-*.tar.gz")
    return Release(wheel, sdist)
