"""The jars of the local clusters: `reconciler.artifacts.jars`, re-exported for the dev tooling and its tests."""

from reconciler.artifacts.jars import (
    KAFKA_SOURCE_VERSION,
    KAFKA_TARGET_VERSION,
    _artifact_name,
    cache_root,
    kafka_libs,
    mm2_libs,
    spark_kafka_jars,
)

__all__ = [
    "KAFKA_SOURCE_VERSION",
    "KAFKA_TARGET_VERSION",
    "_artifact_name",
    "cache_root",
    "kafka_libs",
    "mm2_libs",
    "spark_kafka_jars",
]
