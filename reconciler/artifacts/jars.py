"""Fetches the JVM artifacts kmirror runs (Kafka brokers, the Spark Kafka connector, MirrorMaker 2).

Everything comes from Maven Central into a cache folder (`$KMIRROR_CACHE`, default `~/.cache/kmirror`), one
folder per set. The sets kmirror knows (`known_sets`) are pinned in committed locks (`jvm/locks`, made with
`make lock` from what Maven resolved): such a set is downloaded jar by jar, in parallel, each checked against
its SHA-256 (`pinned`). A set without a lock, or whose lock no longer matches the pom beside this module, is
resolved through that pom, with Maven when it is on PATH, else with Apache Ivy from pyspark's jars
(`KMIRROR_RESOLVER=maven` or `ivy` forces that resolver, even for a locked set). A set is fetched once: it lands
in a temporary folder and is renamed into place only when the fetch succeeded, so a half-finished download is
never mistaken for a complete one. This module starts no broker and no Spark; it only makes sure the jars are
on disk. It is production code (apply needs the connector jar): `reconciler.devenv` re-exports it for the local
clusters, never the other way round.
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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from reconciler.artifacts import pinned
from reconciler.artifacts.ivy import ivy_command, ivy_module
from reconciler.errors import KmirrorError


class ArtifactError(KmirrorError):
    """A JVM artifact could not be fetched or built."""


#: The "old" source of a version-upgrade migration: the newest 3.9.x release.
KAFKA_SOURCE_VERSION = "3.9.2"
#: The target: the newest 4.x release whose artifacts are all on Maven Central.
KAFKA_TARGET_VERSION = "4.3.1"

#: Hadoop's test clusters behind `kmirror dev up --yarn` (the Hadoop that pyspark 4.1's client jars speak to).
HADOOP_MINICLUSTER_VERSION = "3.4.2"

_COMPLETE_MARKER = ".complete"
#: `maven` or `ivy`: resolve every set with that resolver, lock or not (default: the set's lock when it has a
#: current one, else Maven when on PATH, else Ivy).
RESOLVER_ENV = "KMIRROR_RESOLVER"
#: The printed name of fetching from a lock (the wheel's demo test counts it).
LOCK_TOOL = "the pinned lock"


@dataclass(frozen=True)
class JarSet:
    """A set of jars: its cache folder's name, and the pom profiles and properties that resolve it."""

    name: str
    profiles: tuple[str, ...]
    properties: Mapping[str, str] = field(default_factory=dict)


def kafka_set(version: str) -> JarSet:
    """A Kafka broker (and its perf tools); 4.x also gets the slf4j binding its pom lacks."""
    profiles = ("kafka",) if version.startswith(("2.", "3.")) else ("kafka", "kafka4-logging")
    return JarSet(f"kafka-{version}", profiles, {"kafka.version": version})


def mm2_set(version: str) -> JarSet:
    return JarSet(f"mm2-{version}", ("mm2",), {"kafka.version": version})


def spark_kafka_set(spark_version: str) -> JarSet:
    return JarSet(f"spark-kafka-{spark_version}", ("spark-kafka",), {"spark.version": spark_version})


def hadoop_minicluster_set(version: str = HADOOP_MINICLUSTER_VERSION) -> JarSet:
    return JarSet(f"hadoop-minicluster-{version}", ("hadoop-minicluster",), {"hadoop.version": version})


def hadoop_aws_set(version: str = HADOOP_MINICLUSTER_VERSION) -> JarSet:
    """Hadoop's S3A filesystem (`s3a://` checkpoint roots) with the AWS SDK v2 modules it loads (not the SDK bundle)."""
    return JarSet(f"hadoop-aws-{version}", ("hadoop-aws",), {"hadoop.version": version})


def known_sets(spark_version: str) -> list[JarSet]:
    """The sets kmirror fetches with pyspark `spark_version`: the ones `make lock` pins."""
    return [
        kafka_set(KAFKA_SOURCE_VERSION),
        kafka_set(KAFKA_TARGET_VERSION),
        mm2_set(KAFKA_TARGET_VERSION),
        spark_kafka_set(spark_version),
        hadoop_minicluster_set(),
        hadoop_aws_set(),
    ]


def cache_root() -> Path:
    return Path(os.environ.get("KMIRROR_CACHE") or Path.home() / ".cache" / "kmirror")


def kafka_libs(version: str) -> Path:
    """The folder holding `kafka_2.13-<version>.jar` and all its runtime dependencies (fetched if missing)."""
    return _ensure(kafka_set(version))


def mm2_libs(version: str) -> Path:
    """The folder holding Apache MirrorMaker 2 (`connect-mirror`, `connect-runtime`) and its dependencies."""
    return _ensure(mm2_set(version))


def hadoop_minicluster_libs() -> Path:
    """The folder holding Hadoop's MiniDFSCluster and MiniYARNCluster and their dependencies (fetched if missing)."""
    return _ensure(hadoop_minicluster_set())


def hadoop_aws_jars() -> list[Path]:
    """Hadoop's S3A filesystem and the AWS SDK modules it loads, minus the jars pyspark already ships (its Netty,
    httpcore, commons-codec, slf4j: the SDK runs on Spark's newer ones). Fetched once (~18 MB, 51 jars locked)."""
    return _not_shipped(_ensure(hadoop_aws_set()))


def filesystem_jars(checkpoint: str) -> list[Path]:
    """The jars a job needs to reach a checkpoint URI beyond what pyspark's Hadoop client has: S3A for `s3a://`."""
    scheme = checkpoint.split("://", 1)[0].lower() if "://" in checkpoint else ""
    return hadoop_aws_jars() if scheme == "s3a" else []


def spark_kafka_jars() -> list[Path]:
    """The Spark Kafka connector for the installed pyspark, minus the jars pyspark already ships.

    Passing a second copy of, say, scala-library or lz4 at another version onto Spark's classpath invites
    subtle conflicts, so only artifacts pyspark does not have are returned.
    """
    import pyspark

    return _not_shipped(_ensure(spark_kafka_set(pyspark.__version__)))


def _not_shipped(folder: Path) -> list[Path]:
    """The jars of `folder` whose artifact pyspark does not ship (in any version)."""
    import pyspark

    shipped = {_artifact_name(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(p for p in folder.glob("*.jar") if _artifact_name(p.name) not in shipped)


def _artifact_name(jar_file: str) -> str:
    """`kafka-clients-3.9.0.jar` -> `kafka-clients`: Maven names a jar `<artifactId>-<version>.jar`, and a
    version starts with `<digits>.<digits>`, which no artifactId segment like `-0-10_2.13` does."""
    match = re.match(r"^(.*?)-(\d+\.\d+.*)\.jar$", jar_file)
    return match.group(1) if match else jar_file.removesuffix(".jar")


def _ensure(jar_set: JarSet) -> Path:
    """The folder of `jar_set`, fetched once: from its lock when it has a current one, else resolved with
    Maven when it is on PATH, else with Apache Ivy from pyspark's jars (a user who pip-installed kmirror needs no
    Maven). `KMIRROR_RESOLVER=maven` or `ivy` forces that resolver.
    """
    name = jar_set.name
    target = cache_root() / "jars" / name
    if (target / _COMPLETE_MARKER).exists():
        return target
    choice = os.environ.get(RESOLVER_ENV, "").strip().lower()
    lock = None if choice in ("maven", "ivy") else locked(jar_set)
    mvn = shutil.which("mvn")
    use_ivy = choice == "ivy" or (choice != "maven" and mvn is None)
    if lock is None and not use_ivy and mvn is None:
        raise ArtifactError(f"{RESOLVER_ENV}=maven, but Maven (`mvn`) is not on PATH (apt-get install maven)")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(target, ignore_errors=True)  # a folder without the marker is an interrupted fetch
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    tool = LOCK_TOOL if lock is not None else "Apache Ivy" if use_ivy else "Maven"
    print(f"kmirror: fetching {name} from Maven Central with {tool} (once; cached in {target.parent})", file=sys.stderr)
    try:
        if lock is not None:
            repository = pinned.repository()
            pinned.fetch(lock, staging, repository)
            done = f"{len(lock.jars)} jars of {name}'s lock ({lock.fingerprint}) from {repository}"
        else:
            done = " ".join(_resolve(jar_set, staging, None if use_ivy else mvn))
    except pinned.LockError as e:
        shutil.rmtree(staging, ignore_errors=True)
        raise ArtifactError(
            f"could not fetch {name}: {e}. ({RESOLVER_ENV}=maven or ivy resolves it without the lock)"
        ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    (staging / _COMPLETE_MARKER).write_text(done + "\n")
    try:
        staging.rename(target)
    except OSError:  # another process finished the same fetch first; theirs is as good as ours
        shutil.rmtree(staging, ignore_errors=True)
    return target


def locked(jar_set: JarSet) -> pinned.Lock | None:
    """The committed lock of `jar_set`, if it has one made from the pom as it is now (else None: resolve)."""
    jvm = resources.files("reconciler.artifacts") / "jvm"
    lock_file = jvm / "locks" / f"{jar_set.name}.json"
    if not lock_file.is_file():
        return None
    with resources.as_file(lock_file) as path:
        lock = pinned.read_lock(path)
    current = pinned.fingerprint((jvm / "pom.xml").read_text(), jar_set.profiles, jar_set.properties)
    if lock.name != jar_set.name or lock.fingerprint != current:
        return None
    return lock


def maven_command(mvn: str, jvm_dir: Path, jar_set: JarSet, out: Path) -> list[str]:
    """Maven copying `jar_set` into `out`, named `<artifactId>-<version>[-<classifier>].jar`."""
    return [
        mvn, "-q", "-B", "-s", str(jvm_dir / "settings.xml"), "-f", str(jvm_dir / "pom.xml"),
        "-P", ",".join(jar_set.profiles), f"-Dout={out}",
        *(f"-D{k}={v}" for k, v in jar_set.properties.items()),
        "dependency:copy-dependencies",
    ]  # fmt: skip


def _resolve(jar_set: JarSet, staging: Path, mvn: str | None) -> list[str]:
    """Resolve `jar_set` into `staging` with Maven (`mvn`), or with Ivy when it is None; the command run."""
    tool = "Apache Ivy" if mvn is None else "Maven"
    jvm = resources.files("reconciler.artifacts") / "jvm"
    with resources.as_file(jvm) as jvm_dir:
        if mvn is None:
            module = staging / "ivy.xml"
            module.write_text(ivy_module((jvm_dir / "pom.xml").read_text(), jar_set.profiles, jar_set.properties))
            cmd = ivy_command(_java(), _ivy_jar(), module, cache_root() / "ivy", staging)
        else:
            cmd = maven_command(mvn, jvm_dir, jar_set, staging)
        # One Ivy resolution at a time on this cache: Ivy's cache is not safe for two at once (the local
        # clusters fetch both Kafka versions side by side).
        with cache_lock(cache_root() / ".ivy.lock") if mvn is None else contextlib.nullcontext():
            result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not any(staging.glob("*.jar")):
        raise ArtifactError(f"{tool} could not fetch {jar_set.name} from Maven Central:\n{output_tail(result)}")
    (staging / "ivy.xml").unlink(missing_ok=True)
    return cmd


def output_tail(result: subprocess.CompletedProcess[str], lines: int = 15) -> str:
    """The last non-blank lines of a resolver's output: where Maven and Ivy say what went wrong."""
    return "\n".join([ln for ln in (result.stdout + result.stderr).splitlines() if ln.strip()][-lines:])


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
