"""Builds the replication job's JVM jar (`reconciler/replication/jvm/*.java`) with `javac`: the sink producer's
interceptor, the exactly-once writer (a Spark `ForeachWriter`), the local checkpoint file manager and the
client and Spark warm-ups.

The sources ship inside the `reconciler.replication` package (they are the job's record path); this module
compiles them against the connector's kafka-clients jar and pyspark's own jars, once per source version, into
the kmirror cache (next to the Kafka and Spark jars), and returns the jar's path.

Must not: run anything but `javac`, or write outside its cache folder.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from reconciler.artifacts.jars import spark_kafka_jars
from reconciler.artifacts.java_build import cached_jar, sources_version

_SOURCES = (
    "ReplicationInterceptor.java",
    "OffsetSyncRule.java",
    "ExactlyOnceWriter.java",
    "TransactionalLane.java",
    "LaneCommitStats.java",
    "LocalCheckpointFileManager.java",
    "ClientWarmup.java",
    "GroupedKafkaSource.java",
    "GroupedKafkaReader.java",
    "SourceRows.java",
    "SourcePosition.java",
    "PartitionLeaders.java",
    "SparkWarmup.java",
    "SchemaIds.java",
)


def job_jars() -> list[Path]:
    """The jars a job needs besides pyspark's (`--jars`): the Kafka connector and kmirror's interceptor jar, fetched
    or built if missing."""
    return [*spark_kafka_jars(), interceptor_jar()]


def _sources() -> dict[str, bytes]:
    return {name: (resources.files("reconciler.replication") / "jvm" / name).read_bytes() for name in _SOURCES}


def interceptor_version(sources: dict[str, bytes] | None = None) -> str:
    """The version of the interceptor jar's sources (a hash): a new one is compiled when they change."""
    return sources_version(sources or _sources())


def _classpath() -> list[Path | str]:
    import pyspark

    # kafka-clients, and Spark's Kafka source (GroupedKafkaSource wraps it)
    clients: list[Path | str] = [
        p for p in spark_kafka_jars() if p.name.startswith(("kafka-clients-", "spark-sql-kafka-"))
    ]
    clients.append(Path(pyspark.__file__).parent / "jars" / "*")  # ForeachWriter, Row, scala-library
    return clients


def interceptor_jar() -> Path:
    """The interceptor jar, compiled on first use (needs a JDK's `javac`)."""
    return cached_jar(
        "kmirror-interceptor",
        _sources(),
        _classpath,
        what="the producer interceptor",
        no_javac=(
            "the replication job needs a JDK (`javac` is not on PATH or in $JAVA_HOME/bin) to build its producer "
            "interceptor once; install one, e.g. `apt-get install openjdk-17-jdk-headless`."
        ),
    )
