"""The JVM artifacts kmirror runs with, resolved once: Kafka and Spark jars from Maven Central, the interceptor jar.

Production code (the runners) and the local clusters (`reconciler.devenv`) both use it; it imports neither.
"""

from reconciler.artifacts.class_archive import driver_java_options, ensure_driver_archive, prune_archives
from reconciler.artifacts.interceptor_jar import interceptor_jar, job_jars
from reconciler.artifacts.jars import (
    KAFKA_SOURCE_VERSION,
    KAFKA_TARGET_VERSION,
    ArtifactError,
    cache_root,
    filesystem_jars,
    kafka_libs,
    mm2_libs,
    spark_kafka_jars,
)

__all__ = [
    "KAFKA_SOURCE_VERSION",
    "KAFKA_TARGET_VERSION",
    "ArtifactError",
    "cache_root",
    "driver_java_options",
    "ensure_driver_archive",
    "filesystem_jars",
    "interceptor_jar",
    "job_jars",
    "kafka_libs",
    "mm2_libs",
    "prune_archives",
    "spark_kafka_jars",
]
