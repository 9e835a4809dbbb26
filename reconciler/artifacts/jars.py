"""Fetches the JVM artifacts kmirror runs (Kafka brokers, the Spark Kafka connector, MirrorMaker 2) with Maven.

Everything comes from Maven Central through the pom beside this module, into a cache folder
(`$KMIRROR_CACHE`, default `~/.cache/kmirror`). A set is fetched once: it lands in a temporary folder and is
renamed into place only when Maven succeeded, so a half-finished download is never mistaken for a complete one.
This module starts no broker and no Spark; it only makes sure the jars are on disk. It is production code (apply
needs the connector jar): `reconciler.devenv` re-exports it for the local clusters, never the other way round.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from reconciler.errors import KmirrorError


class ArtifactError(KmirrorError):
    """A JVM artifact could not be fetched or built."""


#: The "old" source of a version-upgrade migration: the newest 3.9.x release.
KAFKA_SOURCE_VERSION = "3.9.2"
#: The target: the newest 4.x release whose artifacts are all on Maven Central.
KAFKA_TARGET_VERSION = "4.3.1"

_COMPLETE_MARKER = ".complete"


def cache_root() -> Path:
    return Path(os.environ.get("KMIRROR_CACHE") or Path.home() / ".cache" / "kmirror")


def kafka_libs(version: str) -> Path:
    """The folder holding `kafka_2.13-<version>.jar` and all its runtime dependencies (fetched if missing)."""
    profiles = "kafka" if version.startswith(("2.", "3.")) else "kafka,kafka4-logging"
    return _ensure(f"kafka-{version}", profiles, {"kafka.version": version})


def mm2_libs(version: str) -> Path:
    """The folder holding Apache MirrorMaker 2 (`connect-mirror`, `connect-runtime`) and its dependencies."""
    return _ensure(f"mm2-{version}", "mm2", {"kafka.version": version})


def spark_kafka_jars() -> list[Path]:
    """The Spark Kafka connector for the installed pyspark, minus the jars pyspark already ships.

    Passing a second copy of, say, scala-library or lz4 at another version onto Spark's classpath invites
    subtle conflicts, so only artifacts pyspark does not have are returned.
    """
    import pyspark

    folder = _ensure(f"spark-kafka-{pyspark.__version__}", "spark-kafka", {"spark.version": pyspark.__version__})
    shipped = {_artifact_name(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(p for p in folder.glob("*.jar") if _artifact_name(p.name) not in shipped)


def _artifact_name(jar_file: str) -> str:
    """`kafka-clients-3.9.0.jar` -> `kafka-clients`: Maven names a jar `<artifactId>-<version>.jar`, and a
    version starts with `<digits>.<digits>`, which no artifactId segment like `-0-10_2.13` does."""
    match = re.match(r"^(.*?)-(\d+\.\d+.*)\.jar$", jar_file)
    return match.group(1) if match else jar_file.removesuffix(".jar")


def _ensure(name: str, profile: str, properties: dict[str, str]) -> Path:
    target = cache_root() / "jars" / name
    if (target / _COMPLETE_MARKER).exists():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ArtifactError(
            "Maven (`mvn`) is not on PATH; it fetches Kafka and Spark jars from Maven Central "
            "(install it, e.g. `apt-get install maven`)."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(target, ignore_errors=True)  # a folder without the marker is an interrupted fetch
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    jvm = resources.files("reconciler.artifacts") / "jvm"
    with resources.as_file(jvm) as jvm_dir:
        cmd = [
            mvn, "-q", "-B", "-s", str(jvm_dir / "settings.xml"), "-f", str(jvm_dir / "pom.xml"),
            "-P", profile, f"-Dout={staging}",
            *(f"-D{k}={v}" for k, v in properties.items()),
            "dependency:copy-dependencies",
        ]  # fmt: skip
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise ArtifactError(f"Maven could not fetch {name} from Maven Central:\n{tail}")
    (staging / _COMPLETE_MARKER).write_text(" ".join(cmd) + "\n")
    try:
        staging.rename(target)
    except OSError:  # another process finished the same fetch first; theirs is as good as ours
        shutil.rmtree(staging, ignore_errors=True)
    return target
