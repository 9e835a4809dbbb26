"""Fetches the JVM artifacts kmirror runs (Kafka brokers, the Spark Kafka connector, MirrorMaker 2) with Maven.

Everything comes from Maven Central through the pom beside this module, into a cache folder
(`$KMIRROR_CACHE`, default `~/.cache/kmirror`). A set is fetched once: it lands in a temporary folder and is
renamed into place only when Maven succeeded, so a half-finished download is never mistaken for a complete one.
This module starts no broker and no Spark; it only makes sure the jars are on disk. It is production code (apply
needs the connector jar): `reconciler.devenv` re-exports it for the local clusters, never the other way round.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from reconciler.artifacts.ivy import ivy_command, ivy_module
from reconciler.errors import KmirrorError


class ArtifactError(KmirrorError):
    """A JVM artifact could not be fetched or built."""


#: The "old" source of a version-upgrade migration: the newest 3.9.x release.
KAFKA_SOURCE_VERSION = "3.9.2"
#: The target: the newest 4.x release whose artifacts are all on Maven Central.
KAFKA_TARGET_VERSION = "4.3.1"

_COMPLETE_MARKER = ".complete"
#: `maven` or `ivy`: which resolver fetches the jars (default: Maven when on PATH, else Ivy).
RESOLVER_ENV = "KMIRROR_RESOLVER"


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
    """The folder of the artifact set `name` (pom profiles `profile`, comma separated), fetched once.

    Maven when it is on PATH (or `KMIRROR_RESOLVER=maven`), else Apache Ivy from pyspark's jars
    (`KMIRROR_RESOLVER=ivy` forces it): a user who pip-installed kmirror needs no Maven.
    """
    target = cache_root() / "jars" / name
    if (target / _COMPLETE_MARKER).exists():
        return target
    choice = os.environ.get(RESOLVER_ENV, "").strip().lower()
    mvn = shutil.which("mvn")
    use_ivy = choice == "ivy" or (choice != "maven" and mvn is None)
    if not use_ivy and mvn is None:
        raise ArtifactError(f"{RESOLVER_ENV}=maven, but Maven (`mvn`) is not on PATH (apt-get install maven)")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(target, ignore_errors=True)  # a folder without the marker is an interrupted fetch
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    tool = "Apache Ivy" if use_ivy else "Maven"
    print(f"kmirror: fetching {name} from Maven Central with {tool} (once; cached in {target.parent})", file=sys.stderr)
    jvm = resources.files("reconciler.artifacts") / "jvm"
    with resources.as_file(jvm) as jvm_dir:
        if use_ivy:
            module = staging / "ivy.xml"
            module.write_text(ivy_module((jvm_dir / "pom.xml").read_text(), profile.split(","), properties))
            cmd = ivy_command(_java(), _ivy_jar(), module, cache_root() / "ivy", staging)
        else:
            cmd = [
                str(mvn), "-q", "-B", "-s", str(jvm_dir / "settings.xml"), "-f", str(jvm_dir / "pom.xml"),
                "-P", profile, f"-Dout={staging}",
                *(f"-D{k}={v}" for k, v in properties.items()),
                "dependency:copy-dependencies",
            ]  # fmt: skip
        # One Ivy resolution at a time on this cache: Ivy's cache is not safe for two at once (the local
        # clusters fetch both Kafka versions side by side).
        with cache_lock(cache_root() / ".ivy.lock") if use_ivy else contextlib.nullcontext():
            result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not any(staging.glob("*.jar")):
        shutil.rmtree(staging, ignore_errors=True)
        lines = [ln for ln in (result.stdout + result.stderr).splitlines() if ln.strip()]
        tail = "\n".join(lines[-15:])
        raise ArtifactError(f"{tool} could not fetch {name} from Maven Central:\n{tail}")
    (staging / "ivy.xml").unlink(missing_ok=True)
    (staging / _COMPLETE_MARKER).write_text(" ".join(cmd) + "\n")
    try:
        staging.rename(target)
    except OSError:  # another process finished the same fetch first; theirs is as good as ours
        shutil.rmtree(staging, ignore_errors=True)
    return target


@contextlib.contextmanager
def cache_lock(lock_file: Path) -> Iterator[None]:
    """One process at a time holds `lock_file` (in the cache; its folder is made if missing)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise ArtifactError("Java (17 or newer) is not on PATH; kmirror's Kafka and Spark need it")
    return java


def _ivy_jar() -> Path:
    """Apache Ivy as pyspark ships it (Spark resolves `--packages` with it)."""
    try:
        import pyspark
    except ImportError:
        raise ArtifactError(
            "fetching Kafka and Spark jars needs Maven (`mvn`) or pyspark's Apache Ivy: "
            "pip install 'kmirror[spark]' (or install Maven)"
        ) from None
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("ivy-*.jar"))
    if not jars:
        raise ArtifactError("pyspark ships no Apache Ivy jar here; install Maven (`mvn`) to fetch the jars")
    return jars[-1]
