"""Starts the driver JVM's warm-up of Spark's one-time work (`jvm/SparkWarmup.java`) before anything else.

spark-submit starts the driver JVM, then this Python process, which imports the job and asks the clusters for
their partitions before it creates the Spark session: about half a second in which the JVM idles. Started first,
the warm-up uses it (the error catalogue, the SQL grammar, the code compiler: about 0.25 s each).

Must not: fail or delay the job; without the warm-up the job does the same work itself, later.
"""

from __future__ import annotations


def start_spark_warmup() -> None:
    """Start SparkWarmup on a JVM daemon thread; best effort (nothing to report: the job's start says the rest)."""
    try:
        from pyspark import SparkContext

        SparkContext._ensure_initialized()  # connects to spark-submit's gateway; the session comes later
        SparkContext._jvm.io.kmirror.replication.SparkWarmup.start()  # type: ignore[union-attr]
    except Exception:  # an older interceptor jar, no gateway (not under spark-submit): start without it
        return
