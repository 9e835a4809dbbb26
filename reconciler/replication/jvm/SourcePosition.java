package io.kmirror.replication;

import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Where the row a real-time task thread just read came from, handed from the reader to the replication
 * interceptor on the same thread, in place of the source header.
 *
 * A real-time task reads, projects and writes one row at a time on one thread: Spark's DataSourceRDD iterator
 * calls the reader (LowLatencyReaderWrap, synchronously), the projection passes the row on, and Spark's Kafka
 * writer calls KafkaProducer.send, which runs the interceptors' onSend before it returns. So the row whose send
 * reaches onSend is the last row the thread's reader produced. The reader sets it (GroupedKafkaReader), onSend
 * takes it once (ReplicationInterceptor); a record sent with no position set is sent without a source, as
 * before the reader ran.
 *
 * The key and value sizes are kept too: onSend pairs a position only with a record of the same sizes, and
 * otherwise sends the record without a source (no offset-sync, the producer's timestamp), rather than pair
 * the wrong offset.
 */
public final class SourcePosition {
    private static final ThreadLocal<SourcePosition> CURRENT = ThreadLocal.withInitial(SourcePosition::new);

    private boolean set;
    private String topic;
    private long offset;
    private long timestamp;
    private int keySize;
    private int valueSize;

    private SourcePosition() {
    }

    /** This thread's position. */
    public static SourcePosition current() {
        return CURRENT.get();
    }

    /** The reader's row came from `record`. */
    public void set(ConsumerRecord<byte[], byte[]> record) {
        set = true;
        topic = record.topic();
        offset = record.offset();
        timestamp = record.timestamp();
        keySize = record.key() == null ? -1 : record.key().length;
        valueSize = record.value() == null ? -1 : record.value().length;
    }

    /** Nothing to hand on (the task ended). */
    public void clear() {
        set = false;
        topic = null;
    }

    /**
     * Takes the position for a record with these key and value sizes (-1: null): true if one was set and its
     * record had the same sizes. Either way the position is cleared: it pairs with one send at most.
     */
    boolean take(int recordKeySize, int recordValueSize) {
        boolean matches = set && keySize == recordKeySize && valueSize == recordValueSize;
        set = false;
        return matches;
    }

    /** Whether a position was set and not taken. */
    boolean isSet() {
        return set;
    }

    String topic() {
        return topic;
    }

    long offset() {
        return offset;
    }

    long timestamp() {
        return timestamp;
    }
}
