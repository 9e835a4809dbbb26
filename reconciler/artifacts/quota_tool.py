"""Builds and locates kmirror's client-quota tool: `reconciler/kafka_clients/jvm/ClientQuotas.java`, a tiny program on
Kafka's own Java Admin client, which sets and reads client quotas (KIP-546) for the Kafka admin adapter (its Python
client, librdkafka, has no such call).

The source ships inside the `reconciler.adapters` package; this module compiles it with `javac` against the
kafka-clients jar kmirror already fetches for the Spark job (`spark_kafka_jars`), once per source version, into its
own jar in the kmirror cache (the job's interceptor jar is not touched), and returns the `java` command line that
runs it (`quota_tool_command`). Where Java or the jars are missing, `ArtifactError` says what to install.

Must not: run anything but `javac`, write outside its cache folder, or see the cluster's client properties (they go
to the tool on its stdin, from the adapter).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from reconciler.artifacts.jars import ArtifactError, spark_kafka_jars
from reconciler.artifacts.java_build import cached_jar, jdk_tool, sources_version

SOURCE = "ClientQuotas.java"
MAIN_CLASS = "io.kmirror.quotas.ClientQuotas"
#: What a user installs to get the tool: Kafka's Java client comes with the `spark` extra, `java` with a JDK.
INSTALL_HINT = "pip install 'kmirror[spark]' (Kafka's Java client jars) and a JDK 17 (e.g. openjdk-17-jdk-headless)"


def _source() -> bytes:
    return (resources.files("reconciler.kafka_clients") / "jvm" / SOURCE).read_bytes()


def quota_tool_version(source: bytes | None = None) -> str:
    """The version of the tool's source (a hash): a new jar is compiled when it changes."""
    return sources_version({SOURCE: source if source is not None else _source()})


def client_jars() -> list[Path]:
    """kafka-clients and the slf4j API it logs through (pyspark's own): the tool's classpath besides its jar."""
    try:
        import pyspark
    except ImportError:
        raise ArtifactError(f"client quotas (replication.throttle) need Kafka's Java client: {INSTALL_HINT}") from None
    clients = [p for p in spark_kafka_jars() if p.name.startswith(("kafka-clients-", "slf4j-api-"))]
    if not any(p.name.startswith("kafka-clients-") for p in clients):
        raise ArtifactError(f"kafka-clients is not among the Spark Kafka connector's jars: {INSTALL_HINT}")
    if not any(p.name.startswith("slf4j-api-") for p in clients):
        clients += sorted((Path(pyspark.__file__).parent / "jars").glob("slf4j-api-*.jar"))[:1]
    return clients


def quota_tool_jar() -> Path:
    """The tool's jar, compiled on first use (needs a JDK's `javac`)."""
    return cached_jar(
        "kmirror-quotas",
        {SOURCE: _source()},
        client_jars,
        what="kmirror's client-quota tool",
        no_javac=(
            "client quotas (replication.throttle) are set with Kafka's Java Admin client, and kmirror builds its small "
            f"tool for that once with `javac`, which is not on PATH or in $JAVA_HOME/bin: install {INSTALL_HINT}"
        ),
    )


def quota_tool_command() -> list[str]:
    """The command that runs the tool (it reads its request on stdin): `java -cp ... io.kmirror.quotas.ClientQuotas`.

    Raises `ArtifactError` naming what to install when Java, javac or the Kafka client jars are missing.
    """
    java = jdk_tool("java")
    if java is None:
        raise ArtifactError(
            "client quotas (replication.throttle) are set with Kafka's Java Admin client, and `java` is not on PATH "
            f"or in $JAVA_HOME/bin: install {INSTALL_HINT}"
        )
    classpath = ":".join(str(p) for p in [quota_tool_jar(), *client_jars()])
    # A short-lived client: the quickest start (no tiered C2, one GC thread), small heap.
    return [java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx128m", "-cp", classpath, MAIN_CLASS]
