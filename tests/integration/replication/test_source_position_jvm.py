"""In real-time mode the task's reader hands each row's source position to the interceptor on the task's thread
(jvm/SourcePosition.java), in place of a header. The interceptor must pair a position with the one send that
follows it on the same thread, and with nothing else: a send with no row read before it, a record whose key and
value sizes are not the row's, or a position set on another thread goes out without a source (the producer's
timestamp, no offset-sync, not counted as replicated from any source partition). The micro-batch header still
works beside it.

The end-to-end pairing, through Spark's real-time tasks, is what the offset-sync and cutover tests check on a
running job (real-time is the default mode); this checks the rule on its own, with a single-file Java program
calling the interceptor.
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
import io.kmirror.replication.ReplicationInterceptor;
import io.kmirror.replication.SourcePosition;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Optional;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;

public class Pairing {
    static byte[] b(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    static ConsumerRecord<byte[], byte[]> read(long offset, long timestamp, String key, String value) {
        return new ConsumerRecord<>("orders", 3, offset, timestamp, TimestampType.CREATE_TIME, -1, -1, b(key),
                b(value), new RecordHeaders(), Optional.empty());
    }

    static ProducerRecord<byte[], byte[]> send(String key, String value, String... headers) {
        RecordHeaders all = new RecordHeaders();
        for (int i = 0; i < headers.length; i += 2) {
            all.add(headers[i], b(headers[i + 1]));
        }
        // partition null: the interceptor's leader gate is not asked (no broker here)
        return new ProducerRecord<>("src.orders", null, b(key), b(value), all);
    }

    static ReplicationInterceptor interceptor;

    static void show(String name, ProducerRecord<byte[], byte[]> sent) {
        ProducerRecord<byte[], byte[]> out = interceptor.onSend(sent);
        StringBuilder headers = new StringBuilder();
        out.headers().forEach(h -> headers.append(h.key()).append('=').append(new String(h.value())).append(';'));
        System.out.println(name + " timestamp=" + out.timestamp() + " headers=" + headers
                + " unpaired=" + ReplicationInterceptor.unpairedRecords());
        int keySize = out.key() == null ? -1 : out.key().length;
        int valueSize = out.value() == null ? -1 : out.value().length;
        interceptor.onAcknowledgement(new RecordMetadata(new TopicPartition("src.orders", -1), 500, 0, 0L, keySize,
                valueSize), null);
    }

    public static void main(String[] args) throws Exception {
        interceptor = new ReplicationInterceptor();
        interceptor.configure(Map.of("client.id", "pairing", "bootstrap.servers", "127.0.0.1:9"));
        SourcePosition here = SourcePosition.current();

        here.set(read(41, 1732600000123L, "k", "value"));
        show("paired", send("k", "value", "trace", "t1"));
        show("nothing-read", send("k", "value"));
        here.set(read(42, 1732600000124L, "k", "a longer value"));
        show("other-sizes", send("k", "value"));
        here.set(read(43, 1732600000125L, null, "v"));
        show("null-key-read-key-sent", send("", "v"));
        Thread other = new Thread(() -> SourcePosition.current().set(read(44, 1732600000126L, "k", "value")));
        other.start();
        other.join();
        show("other-thread", send("k", "value"));
        here.set(read(45, -1L, null, null));
        show("no-timestamp-tombstone", send(null, null));
        here.set(read(46, 1732600000127L, "k", "value"));
        here.clear();
        show("cleared", send("k", "value"));
        show("header", send("k", "value", "trace", "t2", "__kmirror.source", "1732600000128,47,orders"));
        System.out.print(ReplicationInterceptor.drainAcknowledged());
        interceptor.close();
    }
}
"""


def test_a_position_pairs_with_the_next_send_on_its_thread_and_nothing_else(tmp_path: Path) -> None:
    java = shutil.which("java")
    assert java is not None, "a JDK is needed"
    source = tmp_path / "Pairing.java"
    source.write_text(PROGRAM)
    classpath = [*map(str, job_jars()), str(Path(pyspark.__file__).parent / "jars" / "*")]  # slf4j too
    out = subprocess.run(
        [java, "-cp", ":".join(classpath), str(source)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[:8] == [
        "paired timestamp=1732600000123 headers=trace=t1; unpaired=0",
        "nothing-read timestamp=null headers= unpaired=0",
        "other-sizes timestamp=null headers= unpaired=1",
        "null-key-read-key-sent timestamp=null headers= unpaired=2",
        "other-thread timestamp=null headers= unpaired=2",
        "no-timestamp-tombstone timestamp=null headers= unpaired=2",
        "cleared timestamp=null headers= unpaired=2",
        "header timestamp=1732600000128 headers=trace=t2; unpaired=2",
    ], out.stdout
    # What the target acknowledged, per source partition (drainAcknowledged: topic, partition, remote, count,
    # bytes, ..., last offset): the paired record, the tombstone (counted, not aged) and the header's record.
    acknowledged = [line.split("\t") for line in lines[8:]]
    assert [(f[0], f[2], f[3], f[4], f[-1]) for f in acknowledged] == [("orders", "src.orders", "3", "12", "47")]
