"""Run once by `spark-submit` (class_archive.py): loads the classes a kmirror job's driver loads as it starts
(the session, Catalyst, code generation over the job's projection), so that the JVM can record them."""

from pyspark.sql import SparkSession


def main() -> None:
    spark = SparkSession.builder.appName("kmirror-class-archive").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    rows = (
        spark.range(100)
        .selectExpr(
            "CAST(id AS STRING) AS topic",
            "CAST(id % 4 AS INT) AS partition",
            "CAST(CAST(id AS STRING) AS BINARY) AS key",
            "CAST(concat('v', id) AS BINARY) AS value",
            "current_timestamp() AS timestamp",
        )
        .selectExpr(
            "concat('remote.', topic) AS topic",
            "partition",
            "key",
            "value",
            "array(named_struct('key', 'h', 'value', CAST(concat(CAST(unix_millis(timestamp) AS STRING), ',', "
            "topic) AS BINARY))) AS headers",
        )
        .groupBy("partition")
        .count()
        .collect()
    )
    if len(rows) != 4:
        raise SystemExit(f"unexpected rows: {rows}")
    spark.stop()


if __name__ == "__main__":
    main()
