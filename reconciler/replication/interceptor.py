"""Builds the JVM classes of the replication job's record path: the sink producer's interceptor.

`jvm/ReplicationInterceptor.java`, set as the Kafka sink producer's `interceptor.classes`, does two things per
record, inside the producer, without Python:
  - Spark 4.0's Kafka sink has no `timestamp` column (`KafkaRowWriter` sends
    `ProducerRecord(topic, partition, key, value, headers)`), so the job carries the source timestamp, offset
    and topic in a last header (`SOURCE_HEADER`); the interceptor removes it and sets the record's timestamp;
  - from each acknowledgement it pairs the record's source offset with the offset it landed at and writes MM2's
    offset-syncs with MM2's rule (`jvm/OffsetSyncRule.java`, the same rule as `reconciler.offsets.emitter`).
`interceptor_settings` gives the producer settings that configure it. `interceptor_jar` compiles the sources
with `javac` against the connector's kafka-clients jar, once per source version, into the kmirror cache (next to
the Kafka and Spark jars), and returns the jar's path.

Must not: run anything but `javac`, or write outside its cache folder.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from reconciler.devenv.jars import cache_root, spark_kafka_jars
from reconciler.errors import KmirrorError

SOURCE_HEADER = "__kmirror.source"
"""Header the job appends last to every record: ASCII `timestampMs,sourceOffset,sourceTopic`."""

INTERCEPTOR_CLASS = "io.kmirror.replication.ReplicationInterceptor"
SYNC_RULE_CLASS = "io.kmirror.replication.OffsetSyncRule"
_SOURCES = ("ReplicationInterceptor.java", "OffsetSyncRule.java")

#: How often the interceptor sends the held (delayed) offset-syncs, MM2's periodic promotion.
DELAYED_SYNCS_FLUSH_MS = 5000


def interceptor_settings(
    syncs_topic: str | None,
    syncs_client: Mapping[str, str],
    *,
    offset_lag_max: int,
    flush_ms: int = DELAYED_SYNCS_FLUSH_MS,
) -> dict[str, str]:
    """Producer settings for the interceptor: where offset-syncs go (None: write none) and MM2's lag bound.

    `syncs_client` holds the Java client properties of the cluster with the syncs topic; they stay in memory
    (Spark passes them to the producer, which hands them to its interceptor).
    """
    settings = {"interceptor.classes": INTERCEPTOR_CLASS, "kmirror.offset.lag.max": str(offset_lag_max)}
    if syncs_topic is not None:
        settings["kmirror.offset.syncs.topic"] = syncs_topic
        settings["kmirror.offset.syncs.flush.ms"] = str(flush_ms)
        settings.update({f"kmirror.offset.syncs.client.{k}": v for k, v in syncs_client.items()})
    return settings


def interceptor_jar() -> Path:
    """The interceptor jar, compiled on first use (needs a JDK's `javac`)."""
    sources = {name: (resources.files("reconciler.replication") / "jvm" / name).read_bytes() for name in _SOURCES}
    version = hashlib.sha256(b"".join(sources[n] for n in _SOURCES)).hexdigest()[:16]
    target = cache_root() / "jars" / f"kmirror-interceptor-{version}" / "kmirror-interceptor.jar"
    if target.exists():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise KmirrorError(
            "the replication job needs a JDK (`javac` is not on PATH) to build its producer interceptor once; "
            "install one, e.g. `apt-get install openjdk-17-jdk-headless`."
        )
    clients = [p for p in spark_kafka_jars() if p.name.startswith("kafka-clients-")]
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        paths = []
        for name, text in sources.items():
            (Path(work) / name).write_bytes(text)
            paths.append(str(Path(work) / name))
        classes = Path(work) / "classes"
        cmd = [javac, "--release", "11", "-nowarn", "-cp", ":".join(map(str, clients)), "-d", str(classes), *paths]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise KmirrorError(f"could not compile the producer interceptor:\n{result.stdout}{result.stderr}")
        staging = Path(work) / "interceptor.jar"
        with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: kmirror\n\n")
            for cls in sorted(classes.rglob("*.class")):
                jar.write(cls, cls.relative_to(classes).as_posix())
        staging.replace(target)  # atomic: a reader never sees half a jar
    return target
