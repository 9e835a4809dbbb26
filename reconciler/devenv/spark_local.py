"""A local SparkSession with the Spark Kafka connector, for tests and the `kmirror dev` tooling.

The replication job gets the same jars through spark-submit's `--jars`; this is the in-process equivalent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler.devenv.jars import spark_kafka_jars


def local_session(app_name: str, work_dir: Path, master: str = "local[2]") -> Any:
    from pyspark.sql import SparkSession

    jars = ",".join(str(p) for p in spark_kafka_jars())
    return (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.local.dir", str(work_dir / "local"))
        .config("spark.sql.warehouse.dir", str(work_dir / "warehouse"))
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
