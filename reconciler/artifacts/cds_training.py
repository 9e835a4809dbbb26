"""Run once by `spark-submit` (class_archive.py): loads the classes a kmirror job's driver loads as it starts
(the session, Catalyst, code generation over the job's projection, the Kafka connector and clients), so that the
JVM can record them. No broker: the Kafka clients are built against a closed port and closed again."""

import sys
import tempfile
import zipfile

from pyspark.sql import SparkSession

#: A port nothing listens on: clients are created (their classes loaded and initialised), never connected.
NOWHERE = "127.0.0.1:1"


def main(jars: list[str]) -> None:
    spark = SparkSession.builder.appName("kmirror-class-archive").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
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
    _streaming_query(spark)
    if jars:
        _kafka(spark, jars)
    spark.stop()


def _streaming_query(spark: SparkSession) -> None:
    """A streaming query run to its end (rate source, no sink): the classes a query's start loads, its
    checkpoint's offset and commit logs through Hadoop's file system among them."""
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 100)
            .load()
            .selectExpr("CAST(value AS STRING) AS key", "CAST(timestamp AS STRING) AS value")
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(once=True)
            .start()
        )
        query.awaitTermination(120)
        query.stop()


def _kafka(spark: SparkSession, jars: list[str]) -> None:
    """Every class of the job's jars (the connector, kafka-clients, the interceptor), loaded through the loader
    that `--jars` gave them; then the connector's source resolved and a producer, consumer and admin client built
    and closed, for the classes and lambdas only running code loads."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    loaded = missed = 0
    for jar in jars:
        with zipfile.ZipFile(jar) as z:
            names = [n for n in z.namelist() if n.endswith(".class") and "-" not in n and not n.startswith("META-INF")]
        for name in names:
            try:
                jvm.java.lang.Class.forName(name[: -len(".class")].replace("/", "."), False, loader)
                loaded += 1
            except Exception:  # an optional dependency missing (e.g. a compression codec): not needed
                missed += 1
    print(f"job jars: {loaded} classes loaded, {missed} not")
    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", NOWHERE)
        .option("subscribe", "kmirror-class-archive")
        .option("includeHeaders", "true")
        .load()
    )
    projected = stream.selectExpr("concat('remote.', topic) AS topic", "partition", "key", "value", "headers")
    projected._jdf.queryExecution().analyzed()  # resolved and checked, as the job's query is
    props = jvm.java.util.Properties()
    for key, value in {
        "bootstrap.servers": NOWHERE,
        "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "value.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "value.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "max.block.ms": "1",
        "request.timeout.ms": "100",
        "default.api.timeout.ms": "100",
    }.items():
        props.setProperty(key, value)
    zero = jvm.java.time.Duration.ZERO
    clients = jvm.org.apache.kafka.clients
    for client in (
        clients.producer.KafkaProducer(props),
        clients.consumer.KafkaConsumer(props),
        clients.admin.AdminClient.create(props),
    ):
        client.close(zero)


if __name__ == "__main__":
    main(sys.argv[1:])
