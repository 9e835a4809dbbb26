"""Which JVM options a local job's driver gets from the class archive (reconciler.artifacts.class_archive)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.artifacts.class_archive import archive_path, classpath_fingerprint, driver_java_options

pytestmark = pytest.mark.unit


def test_no_archive_no_option_and_an_archive_is_mapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMIRROR_CACHE", str(tmp_path))
    path = archive_path()
    assert path is not None and path.parent == tmp_path / "cds"
    assert driver_java_options() == []  # never made: the job starts as it always did
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    assert driver_java_options() == [f"-XX:SharedArchiveFile={path}"]


def test_the_archive_is_named_for_the_jvm_it_was_recorded_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMIRROR_CACHE", str(tmp_path))
    here = archive_path()
    other = tmp_path / "jdk"
    (other / "bin").mkdir(parents=True)
    (other / "release").write_text('JAVA_VERSION="21.0.1"\n')
    monkeypatch.setenv("JAVA_HOME", str(other))
    assert archive_path() not in (None, here)  # another JVM build never maps this one's archive


def test_pyspark_installed_again_in_the_same_place_is_another_archive(tmp_path: Path) -> None:
    """The JVM refuses an archive whose jars have other times than when it was recorded (a venv made again at the
    same path): the fingerprint in the archive's name changes with them, so `kmirror dev fetch` records anew."""
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"classes")
    (jars / "notes.txt").write_text("not on the classpath")
    before = classpath_fingerprint(jars)
    assert len(before) == 1 and before[0].startswith("spark-core.jar 7 ")
    assert classpath_fingerprint(jars) == before  # nothing changed: the same archive
    stat = (jars / "spark-core.jar").stat()
    os.utime(jars / "spark-core.jar", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert classpath_fingerprint(jars) != before
