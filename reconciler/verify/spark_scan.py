"""`kmirror verify --engine spark`: the partitions' scans as tasks of a Spark batch job, one task per partition.

The driver (this process) plans every partition (`reconciler.verify.run`); here the plans become an RDD with one
element per partition, and each task runs the same scan as `--engine python` (`run.scan_partition`: read both
clusters with its own group-less read_committed readers, compare, count) on an executor, in parallel across the
cluster the flow's Spark settings name (`spark.master`, `spark.conf`). Only the counts come back. Executors need
kmirror and confluent-kafka installed (in local mode they run this Python). `--max-records-per-second` is split
evenly across the tasks that run at once.

Must not: read or compare records itself (that is `run.scan_partition`), or log a client configuration (it holds
credentials; it travels to the executors inside the tasks, as it does for the replication job).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from reconciler.spec.client_config import ClientConfig
from reconciler.verify.compare import PartitionTally
from reconciler.verify.kafka_reads import RateLimiter, reader
from reconciler.verify.run import PartitionTask, scan_partition

__all__ = ["scan_on_spark"]


def _scan_task(
    item: tuple[int, PartitionTask],
    source_config: ClientConfig,
    target_config: ClientConfig,
    rate: int | None,
    timeout: float,
) -> tuple[int, PartitionTally]:
    """One partition on an executor: its own readers, closed when done."""
    index, task = item
    src, dst = reader(source_config, timeout=timeout), reader(target_config, timeout=timeout)
    try:
        return index, scan_partition(task, src, dst, RateLimiter(rate), RateLimiter(rate))
    finally:
        src.close()
        dst.close()


def scan_on_spark(
    tasks: Sequence[PartitionTask],
    source_config: ClientConfig,
    target_config: ClientConfig,
    *,
    master: str,
    conf: Mapping[str, str],
    max_records_per_second: int | None,
    timeout: float,
) -> list[PartitionTally]:
    """The tallies of `tasks`, in their order, scanned as one Spark job on `master`."""
    if not tasks:
        return []
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors run this Python (and this kmirror)
    builder = SparkSession.builder.master(master).appName("kmirror-verify")
    for key, value in conf.items():
        builder = builder.config(key, value)
    builder = builder.config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
    spark = builder.getOrCreate()
    try:
        context = spark.sparkContext
        context.setLogLevel("ERROR")
        running = max(1, min(len(tasks), context.defaultParallelism))
        rate = None if max_records_per_second is None else max(1, max_records_per_second // running)
        source, target = dict(source_config), dict(target_config)
        rdd = context.parallelize(list(enumerate(tasks)), numSlices=len(tasks))
        done = rdd.map(lambda item: _scan_task(item, source, target, rate, timeout)).collect()
    finally:
        spark.stop()
    return [tally for _, tally in sorted(done, key=lambda x: x[0])]
