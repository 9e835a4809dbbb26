"""Which JVM options a local job's driver gets from the class archive (reconciler.artifacts.class_archive)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from reconciler.artifacts.class_archive import (
    UNRECORDED_MAX_AGE_S,
    _archive_name,
    _write_record,
    archive_path,
    driver_java_options,
    prune_archives,
)
from reconciler.artifacts.driver_home import fingerprint

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
    before = fingerprint(jars)
    assert len(before) == 1 and before[0].startswith("spark-core.jar 7 ")
    assert fingerprint(jars) == before  # nothing changed: the same archive
    stat = (jars / "spark-core.jar").stat()
    os.utime(jars / "spark-core.jar", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert fingerprint(jars) != before


def _install(root: Path, name: str) -> Path:
    """A pyspark folder of another venv, with one jar."""
    spark = root / name / "pyspark"
    (spark / "jars").mkdir(parents=True)
    (spark / "jars" / "spark-core.jar").write_bytes(b"classes")
    return spark


def _recorded_for(folder: Path, spark: Path, java_home: Path) -> Path:
    """An archive recorded for `spark` with `java_home`, as `ensure_driver_archive` leaves it."""
    archive = folder / _archive_name(java_home, spark, "4.1.3")
    archive.write_bytes(b"archive")
    _write_record(archive, java_home, spark, "4.1.3")
    return archive


def test_dev_fetch_deletes_the_archives_no_install_can_map_any_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each venv made again recorded a new archive (about 160 MB) and left the old one: the cache grew by one per
    CI run. An archive whose pyspark folder is gone or holds other jars, or whose JDK changed, is refused by the
    JVM anyway, so it goes; one another live venv maps stays."""
    monkeypatch.setenv("KMIRROR_CACHE", str(tmp_path / "cache"))
    keep = archive_path()
    assert keep is not None
    keep.parent.mkdir(parents=True)
    keep.write_bytes(b"this install's")
    jdk = tmp_path / "jdk"
    (jdk / "bin").mkdir(parents=True)
    (jdk / "release").write_text('JAVA_VERSION="17.0.9"\n')
    live = _recorded_for(keep.parent, _install(tmp_path, "venv-live"), jdk)
    gone_spark = _install(tmp_path, "venv-removed")
    gone = _recorded_for(keep.parent, gone_spark, jdk)
    shutil.rmtree(gone_spark.parent)
    rebuilt_spark = _install(tmp_path, "venv-rebuilt")
    rebuilt = _recorded_for(keep.parent, rebuilt_spark, jdk)
    jar = rebuilt_spark / "jars" / "spark-core.jar"
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))  # installed again
    old_jdk = tmp_path / "jdk-17.0.9"
    (old_jdk / "bin").mkdir(parents=True)
    (old_jdk / "release").write_text('JAVA_VERSION="17.0.9"\n')
    other_jdk = _recorded_for(keep.parent, _install(tmp_path, "venv-jdk"), old_jdk)
    shutil.rmtree(old_jdk)  # the JDK it was recorded with was removed (updated)
    young, old = keep.parent / "spark-driver-4.1.3-young.jsa", keep.parent / "spark-driver-4.1.3-old.jsa"
    for unrecorded in (young, old):  # made before archives had records
        unrecorded.write_bytes(b"archive")
    now = time.time()
    os.utime(old, (now - UNRECORDED_MAX_AGE_S - 60, now - UNRECORDED_MAX_AGE_S - 60))

    removed = prune_archives(keep, now=now)

    assert sorted(removed) == sorted([gone, rebuilt, other_jdk, old])
    left = sorted(p.name for p in keep.parent.iterdir() if p.name != ".lock")
    assert left == sorted([keep.name, live.name, live.name + ".source", young.name])
    assert prune_archives(keep, now=now) == []  # nothing more to delete
