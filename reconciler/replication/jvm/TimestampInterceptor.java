package io.kmirror.replication;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * Gives each replicated record the timestamp of its source record.
 *
 * Spark 4.0's Kafka sink builds ProducerRecord(topic, partition, key, value, headers) and has no timestamp
 * column, so the producer would stamp every record with the time of the copy. The replication job therefore
 * appends one last header, "__kmirror.timestamp", holding the source timestamp in milliseconds as ASCII
 * digits. This interceptor, run by the sink's producer before serialisation, removes exactly that last
 * header and sets the record's timestamp from it. Records without it pass unchanged; headers of the same
 * name written by users (anywhere but last) are never touched.
 */
public final class TimestampInterceptor implements ProducerInterceptor<byte[], byte[]> {
    public static final String HEADER = "__kmirror.timestamp";

    @Override
    public ProducerRecord<byte[], byte[]> onSend(ProducerRecord<byte[], byte[]> record) {
        Header[] headers = record.headers().toArray();
        if (headers.length == 0) {
            return record;
        }
        Header last = headers[headers.length - 1];
        if (!HEADER.equals(last.key()) || last.value() == null) {
            return record;
        }
        long timestamp = Long.parseLong(new String(last.value(), StandardCharsets.US_ASCII));
        RecordHeaders rest = new RecordHeaders(Arrays.copyOf(headers, headers.length - 1));
        // A negative timestamp (a pre-0.10 record without one) is refused by ProducerRecord: let the
        // producer stamp it, as MM2 does for such records.
        Long kept = timestamp >= 0 ? timestamp : null;
        return new ProducerRecord<>(record.topic(), record.partition(), kept, record.key(), record.value(), rest);
    }

    @Override
    public void onAcknowledgement(RecordMetadata metadata, Exception exception) {}

    @Override
    public void close() {}

    @Override
    public void configure(Map<String, ?> configs) {}
}
