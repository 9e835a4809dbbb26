"""Builds the one JVM class the replication job needs: the producer interceptor that keeps source timestamps.

Spark 4.0's Kafka sink has no `timestamp` column: `KafkaRowWriter` sends
`ProducerRecord(topic, partition, key, value, headers)`, so the target would stamp every record with the time
of the copy. The job carries the source timestamp in a last header (`TIMESTAMP_HEADER`) and
`jvm/TimestampInterceptor.java`, set as the sink producer's `interceptor.classes`, moves it into the record's
timestamp. This module compiles that source with `javac` against the connector's kafka-clients jar, once per
source version, into the kmirror cache (next to the Kafka and Spark jars), and returns the jar's path.

Must not: run anything but `javac`, or write outside its cache folder.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from importlib import resources
from pathlib import Path

from reconciler.devenv.jars import cache_root, spark_kafka_jars
from reconciler.errors import KmirrorError

TIMESTAMP_HEADER = "__kmirror.timestamp"
"""Header the job appends last to every record; the interceptor turns it into the record's timestamp."""

INTERCEPTOR_CLASS = "io.kmirror.replication.TimestampInterceptor"
_SOURCE_NAME = "TimestampInterceptor.java"


def interceptor_jar() -> Path:
    """The interceptor jar, compiled on first use (needs a JDK's `javac`)."""
    source = (resources.files("reconciler.replication") / "jvm" / _SOURCE_NAME).read_bytes()
    version = hashlib.sha256(source).hexdigest()[:16]
    target = cache_root() / "jars" / f"kmirror-interceptor-{version}" / "kmirror-interceptor.jar"
    if target.exists():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise KmirrorError(
            "the replication job needs a JDK (`javac` is not on PATH) to build its timestamp interceptor once; "
            "install one, e.g. `apt-get install openjdk-17-jdk-headless`."
        )
    clients = [p for p in spark_kafka_jars() if p.name.startswith("kafka-clients-")]
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        src = Path(work) / _SOURCE_NAME
        src.write_bytes(source)
        classes = Path(work) / "classes"
        cmd = [javac, "--release", "11", "-nowarn", "-cp", ":".join(map(str, clients)), "-d", str(classes), str(src)]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise KmirrorError(f"could not compile the timestamp interceptor:\n{result.stdout}{result.stderr}")
        staging = Path(work) / "interceptor.jar"
        with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: kmirror\n\n")
            for cls in sorted(classes.rglob("*.class")):
                jar.write(cls, cls.relative_to(classes).as_posix())
        staging.replace(target)  # atomic: a reader never sees half a jar
    return target
