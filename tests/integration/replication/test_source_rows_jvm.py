"""The real-time reader's rows (jvm/SourceRows.java) are byte for byte the rows Spark's Kafka source gives
(KafkaRecordToRowConverter), with and without the headers column, for records with and without key, value,
headers, header values, multi-byte header keys and topic names, a record without timestamp, and a record right
after one with more headers (the row is reused). A difference would change what the sink writes.

Needs a JDK: the job's jars (the interceptor's compiled as the job does on first use, Spark's Kafka connector)
and pyspark's jars; a single-file Java program converts each record both ways and compares the rows.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pyspark
import pytest

from reconciler.artifacts import job_jars

pytestmark = [pytest.mark.integration]

PROGRAM = """
import io.kmirror.replication.SourceRows;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.kafka010.KafkaRecordToRowConverter;

public class CompareRows {
    static byte[] b(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    static ConsumerRecord<byte[], byte[]> record(String topic, int partition, long offset, long timestamp,
            TimestampType type, String key, String value, String... headers) {
        RecordHeaders all = new RecordHeaders();
        for (int i = 0; i < headers.length; i += 2) {
            all.add(headers[i], b(headers[i + 1]));
        }
        return new ConsumerRecord<>(topic, partition, offset, timestamp, type, -1, -1, b(key), b(value), all,
                Optional.empty());
    }

    public static void main(String[] args) {
        List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        String big = "v".repeat(5000);
        records.add(record("orders", 0, 0, 1732600000123L, TimestampType.CREATE_TIME, "k", "value"));
        records.add(record("orders", 0, 1, 1732600000124L, TimestampType.CREATE_TIME, null, "no key",
                "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "b", null, "", ""));
        records.add(record("orders", 0, 2, 1732600000125L, TimestampType.CREATE_TIME, "tombstone", null,
                "only", "one"));
        records.add(record("orders", 5, Long.MAX_VALUE - 1, -1L, TimestampType.NO_TIMESTAMP_TYPE, "", ""));
        records.add(record("z\u00fcrich.\u65e5\u672c", 23, 7, 0L, TimestampType.LOG_APPEND_TIME, big, big,
                "\u00e9t\u00e9", big, "\u65e5", "x", "dup", "1", "dup", "2"));
        records.add(record("orders", 1, 3, 1L, TimestampType.CREATE_TIME, "after a bigger row", "v"));
        records.add(record("orders", 1, 4, Long.MAX_VALUE / 1000, TimestampType.CREATE_TIME, "k", "v", "h", "1"));
        records.add(record("t".repeat(249), 2, 0, -1L, TimestampType.NO_TIMESTAMP_TYPE, "a long topic", "v"));
        for (String mode : new String[] {"no-headers", "headers"}) {
            boolean includeHeaders = !mode.equals("no-headers");
            var spark = new KafkaRecordToRowConverter().toUnsafeRowProjector(includeHeaders);
            SourceRows ours = new SourceRows(includeHeaders);
            for (ConsumerRecord<byte[], byte[]> r : records) {
                UnsafeRow expected = spark.apply(r).copy();
                UnsafeRow actual = ours.toRow(r).copy();
                System.out.println(mode + " " + r.offset() + " " + (expected.equals(actual)
                        ? "same" : "differs: spark " + expected + " ours " + actual));
            }
        }
    }
}
"""


def test_the_readers_rows_are_the_bytes_of_sparks_kafka_source(tmp_path: Path) -> None:
    java = shutil.which("java")
    assert java is not None, "a JDK is needed"
    source = tmp_path / "CompareRows.java"
    source.write_text(PROGRAM)
    classpath = [*map(str, job_jars()), str(Path(pyspark.__file__).parent / "jars" / "*")]
    out = subprocess.run(
        [java, "-cp", ":".join(classpath), str(source)], capture_output=True, text=True, check=False, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert len(lines) == 2 * 8, out.stdout
    assert all(line.endswith(" same") for line in lines), out.stdout
