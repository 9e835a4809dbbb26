"""The Spark home local job drivers start from (reconciler.artifacts.driver_home): pyspark's, without MLlib."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from reconciler.artifacts import driver_home as dh

pytestmark = pytest.mark.unit


def _pyspark(root: Path) -> Path:
    """A pyspark folder as pip installs it: bin, jars (MLlib's among them), python/lib/pyspark.zip."""
    spark = root / "site-packages" / "pyspark"
    (spark / "bin").mkdir(parents=True)
    (spark / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    (spark / "jars").mkdir()
    for jar in ("spark-core_2.13-4.1.3.jar", "spark-sql_2.13-4.1.3.jar", "spark-mllib_2.13-4.1.3.jar"):
        (spark / "jars" / jar).write_bytes(b"classes")
    (spark / "python" / "lib").mkdir(parents=True)
    (spark / "python" / "lib" / "pyspark.zip").write_bytes(b"zip")
    return spark


@pytest.fixture
def pyspark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    spark = _pyspark(tmp_path)
    monkeypatch.setenv("KMIRROR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(dh, "pyspark_folder", lambda: (spark, "4.1.3"))
    return spark


def test_the_home_links_pyspark_but_mllib_and_its_python_zip(pyspark: Path) -> None:
    home = dh.driver_home()
    assert home.parent == dh.homes_root() and home.name.startswith("4.1.3-")
    assert (home / "bin").resolve() == pyspark / "bin"
    assert sorted(p.name for p in (home / "jars").iterdir()) == [
        "spark-core_2.13-4.1.3.jar",
        "spark-sql_2.13-4.1.3.jar",
    ]
    assert all((home / "jars" / p).resolve().parent == pyspark / "jars" for p in os.listdir(home / "jars"))
    assert not (home / "python").exists()  # the driver imports the installed pyspark, not the zip
    assert dh.driver_home() == home  # made once
    assert dh.spark_env(home, "python3")["SPARK_HOME"] == str(home)


def test_pyspark_installed_again_is_another_home_and_the_old_one_is_pruned(
    pyspark: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = _pyspark(tmp_path / "other-venv")
    monkeypatch.setattr(dh, "pyspark_folder", lambda: (other, "4.1.2"))
    gone = dh.driver_home()
    shutil.rmtree(other)  # that venv was deleted
    monkeypatch.setattr(dh, "pyspark_folder", lambda: (pyspark, "4.1.3"))
    first = dh.driver_home()
    jar = pyspark / "jars" / "spark-core_2.13-4.1.3.jar"
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))  # installed again
    second = dh.driver_home()
    assert second != first
    assert sorted(dh.prune_homes(second)) == sorted([first, gone])
    assert [p.name for p in dh.homes_root().iterdir()] == [second.name]
    assert dh.prune_homes(second) == []
