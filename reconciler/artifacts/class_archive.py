"""A class-data sharing archive of the job driver's classes (Java's AppCDS), made once per Java and pyspark.

A job's driver JVM spends most of its start loading, parsing and verifying Spark's classes. With an archive of
them mapped at start, on a 2-core machine: SparkSession up in 2.3 s instead of 4.3-4.8 s, the first query in
1.3-1.5 s instead of 2.4-3.1 s (`spark-submit` of the same script, each twice). A training run records the
archive (`cds_training.py`: the session, Catalyst, code generation, a streaming query, and every class of the
job's jars, the Kafka connector and kafka-clients, with a client of each kind built; no broker) with
`-XX:ArchiveClassesAtExit`; local jobs then start with `-XX:SharedArchiveFile`. It is tied to one JVM build and
one Spark home (driver_home.py: the classpath it recorded, each jar with its size and time, as the JVM checks
them), so its name carries both; a JVM that finds it does not match says so in the driver log and starts without
it. The job jars come through `--jars` (Spark's own class loader): the JVM serves their classes from the archive
only while their bytes match, so another connector version is merely slower, never wrong.

`kmirror dev fetch` makes it (about half a minute, once); nothing else does, so `kmirror apply` never pays for it.
It also deletes the archives in the folder that no install can map any more (`prune_archives`): each records the
JDK and Spark home it was made from, so one whose home is gone or holds other jars is known dead.

Must not: write outside its cache folder, or fail a job's start (no archive: no option).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

from reconciler.artifacts.driver_home import driver_home, fingerprint, pyspark_folder, spark_env
from reconciler.artifacts.interceptor_jar import interceptor_version, job_jars
from reconciler.artifacts.jars import ArtifactError, cache_lock, cache_root

_TRAINING = "cds_training.py"
#: Changes when the training loads other classes, so an archive recorded by an older one is recorded again.
#: 2: the job jars' classes (the Kafka connector, kafka-clients, the interceptor) too.
_TRAINING_VERSION = "training 2"


def _java_home() -> Path | None:
    """The JDK spark-submit runs: $JAVA_HOME, else the `java` on PATH (spark-class's own rule)."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    java = shutil.which("java")
    return Path(os.path.realpath(java)).parent.parent if java else None


def _archive_name(java_home: Path, spark_home: Path, pyspark_version: str) -> str:
    """The name of the archive this JDK and this Spark home (its jars as they are now) map."""
    release = java_home / "release"
    key = hashlib.sha256(
        "\n".join(
            [
                str(java_home.resolve()),
                release.read_text() if release.exists() else "",
                str(spark_home),
                *fingerprint(spark_home / "jars"),
                _TRAINING_VERSION,
                interceptor_version(),  # the job jar's classes are recorded too; the JVM refuses changed ones
            ]
        ).encode()
    ).hexdigest()[:16]
    return f"spark-driver-{pyspark_version}-{key}.jsa"


def _spark_home() -> tuple[Path, str] | None:
    """The Spark home local drivers start from (driver_home.py) and pyspark's version; None without pyspark."""
    try:
        _, version = pyspark_folder()
    except ImportError:
        return None
    return driver_home(), version


def archive_path() -> Path | None:
    """Where this JVM's and pyspark's archive is (or would be); None without a JVM or pyspark."""
    home, spark = _java_home(), _spark_home()
    return None if home is None or spark is None else _archive_at(home, *spark)


def _archive_at(java_home: Path, spark_home: Path, pyspark_version: str) -> Path:
    # The classpath the archive records is the jars' paths: another Spark home (another venv) is another key.
    return cache_root() / "cds" / _archive_name(java_home, spark_home, pyspark_version)


def driver_java_options() -> list[str]:
    """The JVM options that map the archive into a job's driver, or none when it has not been made."""
    path = archive_path()
    return [f"-XX:SharedArchiveFile={path}"] if path is not None and path.exists() else []


def ensure_driver_archive(timeout: float = 300) -> Path:
    """The archive, recorded by a training run of pyspark's `spark-submit` first if missing (one at a time)."""
    home, spark = _java_home(), _spark_home()
    if home is None or spark is None:
        raise ArtifactError("a class archive needs Java and pyspark: pip install 'kmirror[spark]'")
    target = _archive_at(home, *spark)
    spark_submit = spark[0] / "bin" / "spark-submit"
    with cache_lock(target.parent / ".lock"):
        if target.exists():
            _write_record(target, home, *spark)  # one made before archives had records: adopted
            return target
        script = resources.files("reconciler.artifacts") / _TRAINING
        with tempfile.TemporaryDirectory(dir=target.parent) as work:
            staging = Path(work) / "archive.jsa"
            (Path(work) / _TRAINING).write_bytes(script.read_bytes())
            jars = [str(p) for p in job_jars()]  # their classes too
            env = spark_env(spark[0], sys.executable)  # this interpreter has pyspark
            cmd = [
                str(spark_submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                "--driver-java-options", f"-XX:ArchiveClassesAtExit={staging}", "--jars", ",".join(jars),
                str(Path(work) / _TRAINING), *jars,
            ]  # fmt: skip
            result = subprocess.run(
                cmd, capture_output=True, text=True, cwd=work, timeout=timeout, check=False, env=env
            )
            if result.returncode != 0 or not staging.exists():
                raise ArtifactError(f"could not record the class archive:\n{(result.stdout + result.stderr)[-2000:]}")
            _write_record(target, home, *spark)  # before the archive appears: a prune never sees it without one
            staging.replace(target)  # atomic: a JVM never maps half an archive
    return target


#: Beside each archive, where it was recorded from (`<archive>.source`, JSON): the JDK and the Spark home.
_RECORD_SUFFIX = ".source"
#: An archive without a record was made before records were kept; it is deleted once this old.
UNRECORDED_MAX_AGE_S = 7 * 24 * 3600


def _record_of(archive: Path) -> Path:
    return archive.with_name(archive.name + _RECORD_SUFFIX)


def _write_record(archive: Path, java_home: Path, spark_home: Path, pyspark_version: str) -> None:
    record = {"java_home": str(java_home), "spark_home": str(spark_home), "pyspark": pyspark_version}
    _record_of(archive).write_text(json.dumps(record) + "\n")


def _still_mapped(archive: Path, now: float) -> bool:
    """Whether some install can still map `archive`: its JDK and Spark home still name it (the same JDK build,
    the same jars, sizes and times), or, without a record, it is younger than UNRECORDED_MAX_AGE_S."""
    try:
        data = json.loads(_record_of(archive).read_text())
    except FileNotFoundError:
        return now - archive.stat().st_mtime < UNRECORDED_MAX_AGE_S
    except (OSError, ValueError):
        return False
    try:
        java_home, spark_home = Path(data["java_home"]), Path(data["spark_home"])
        return spark_home.is_dir() and _archive_name(java_home, spark_home, str(data["pyspark"])) == archive.name
    except (KeyError, TypeError, OSError):
        return False


def prune_archives(keep: Path, now: float | None = None) -> list[Path]:
    """Delete the archives beside `keep` that no install can map any more (its Spark home is gone or holds
    other jars, or its JDK is another build: the JVM would refuse it), with their records; the ones deleted.

    Each venv made again (CI in a fresh clone, a `make setup` after `rm -rf .venv`) records a new archive of about
    160 MB; without this the cache folder grew by one per install. Runs under the cache folder's lock, as
    recording does, so it never sees an archive being recorded. A job that mapped a deleted archive keeps its
    mapping (the file lives on until the JVM exits)."""
    moment = time.time() if now is None else now
    removed = []
    with cache_lock(keep.parent / ".lock"):
        for archive in sorted(keep.parent.glob("spark-driver-*.jsa")):
            if archive == keep or _still_mapped(archive, moment):
                continue
            archive.unlink(missing_ok=True)
            _record_of(archive).unlink(missing_ok=True)
            removed.append(archive)
        for record in keep.parent.glob(f"spark-driver-*.jsa{_RECORD_SUFFIX}"):
            if not record.with_suffix("").exists():
                record.unlink(missing_ok=True)  # its archive went another way
    return removed
