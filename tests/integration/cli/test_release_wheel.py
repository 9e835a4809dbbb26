"""The release as the release workflow builds it: wheel and sdist from `python -m build`, and the wheel installed
in a fresh virtualenv (a plan-only install: no pyspark) runs kmirror. Needs PyPI for the dependencies."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.integration.cli.conftest import Release

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
#: No PYTHONPATH: the installed wheel must run, not a checkout on the path.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=900, check=False, env=CLEAN_ENV
    )
    assert result.returncode == 0, f"{' '.join(map(str, args))}:\n{result.stdout}\n{result.stderr}"
    return result


def test_the_built_wheel_installs_and_runs_in_a_fresh_virtualenv(tmp_path: Path, release: Release) -> None:
    wheel, sdist = release.wheel, release.sdist
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in metadata and "Project-URL: Source" in metadata
    assert 'Requires-Dist: pyspark==4.1.3; extra == "spark"' in metadata
    with tarfile.open(sdist) as t:
        assert any(n.endswith("/LICENSE") for n in t.getnames())

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    _run(venv / "bin" / "pip", "install", "-q", wheel, cwd=tmp_path)
    kmirror = venv / "bin" / "kmirror"
    assert _run(kmirror, "--version", cwd=tmp_path).stdout.startswith("kmirror, version ")
    assert "is valid" in _run(kmirror, "validate", "-f", ROOT / "examples/migration/kmirror.yaml", cwd=tmp_path).stdout
    assert _run(kmirror, "schema", cwd=tmp_path).stdout.startswith("{")
    imported = _run(kmirror, "import", "mm2", ROOT / "tests/fixtures/strimzi/kafka-mirror-maker-2.yaml", cwd=tmp_path)
    assert "flows:" in imported.stdout
    where = _run(venv / "bin" / "python", "-c", "import reconciler; print(reconciler.__file__)", cwd=tmp_path).stdout
    assert where.startswith(str(venv)), f"kmirror ran from {where}, not from the installed wheel"
    no_spark = subprocess.run(
        [venv / "bin" / "python", "-c", "import pyspark"], capture_output=True, check=False, env=CLEAN_ENV
    )
    assert no_spark.returncode != 0, "a plain install pulled in pyspark; it belongs to the spark extra"
