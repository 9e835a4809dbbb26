package io.kmirror.replication;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeRead;
import org.apache.spark.sql.kafka010.KafkaBatchInputPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A real-time task's reader of a group of source partitions (GroupedKafkaSource), with one consumer.
 *
 * Rows are those of Spark's Kafka source, written by SourceRows, in each partition's offset order. With
 * `positions`, each row's source position is handed to the replication interceptor on the task's thread
 * (SourcePosition). The task's end offsets are the next offset of every partition of the group. A partition
 * whose position is no longer on the source (deleted by retention) goes on from the earliest offset, or from
 * the latest if it is past the end, like Spark's source with failOnDataLoss=false; with failOnDataLoss=true
 * the task fails.
 *
 * The consumer, and the records it fetched that the task did not forward before its batch ended, are kept for
 * the next batch's task of the same group (same query, same partitions): it reads on without a new connection
 * or a second fetch of those records. Kept consumers unused for a minute are closed.
 */
final class GroupedKafkaReader implements SupportsRealTimeRead<InternalRow> {
    private static final Logger log = LoggerFactory.getLogger(GroupedKafkaReader.class);
    private static final long IDLE_MS = 60_000;
    private static final Map<String, Kept> KEPT = new ConcurrentHashMap<>();

    /** A consumer between two tasks of its group, with what it fetched and the task did not forward. */
    private static final class Kept {
        final KafkaConsumer<byte[], byte[]> consumer;
        final Map<TopicPartition, Long> next;
        final Iterator<ConsumerRecord<byte[], byte[]>> fetched;
        final long since = System.currentTimeMillis();

        Kept(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> next,
                Iterator<ConsumerRecord<byte[], byte[]>> fetched) {
            this.consumer = consumer;
            this.next = next;
            this.fetched = fetched;
        }
    }

    private final String key;
    private final boolean failOnDataLoss;
    private final SourceRows rows;
    private final boolean positions;
    private final LinkedHashMap<TopicPartition, Long> next = new LinkedHashMap<>();
    private final KafkaConsumer<byte[], byte[]> consumer;
    private Iterator<ConsumerRecord<byte[], byte[]>> fetched = Collections.emptyIterator();
    private UnsafeRow row;
    private long dataLoss;
    private boolean broken;

    GroupedKafkaReader(KafkaBatchInputPartition[] members, boolean positions) {
        KafkaBatchInputPartition first = members[0];
        Map<String, Object> params = first.executorKafkaParams();
        this.failOnDataLoss = first.failOnDataLoss();
        this.rows = new SourceRows(first.includeHeaders());
        this.positions = positions;
        for (KafkaBatchInputPartition member : members) {
            next.put(member.offsetRange().topicPartition(), member.offsetRange().fromOffset());
        }
        this.key = params.get("group.id") + "|" + params.get("bootstrap.servers") + "|" + next.keySet();
        closeIdle();
        Kept kept = KEPT.remove(key);
        if (kept != null && kept.next.equals(next)) { // the previous batch's task ended where this one starts
            consumer = kept.consumer;
            fetched = kept.fetched;
            return;
        }
        consumer = kept != null ? kept.consumer : new KafkaConsumer<>(params);
        try {
            if (kept == null) {
                consumer.assign(new ArrayList<>(next.keySet()));
            }
            seekAll();
        } catch (RuntimeException e) {
            consumer.close(Duration.ZERO);
            throw e;
        }
    }

    /** Every partition to its start offset (Spark's -2 earliest, -1 latest resolved to real offsets). */
    private void seekAll() {
        List<TopicPartition> earliest = new ArrayList<>();
        List<TopicPartition> latest = new ArrayList<>();
        for (Map.Entry<TopicPartition, Long> e : next.entrySet()) {
            if (e.getValue() == -2L) {
                earliest.add(e.getKey());
            } else if (e.getValue() == -1L) {
                latest.add(e.getKey());
            } else {
                consumer.seek(e.getKey(), e.getValue());
            }
        }
        if (!earliest.isEmpty()) {
            consumer.seekToBeginning(earliest);
        }
        if (!latest.isEmpty()) {
            consumer.seekToEnd(latest);
        }
        for (TopicPartition tp : earliest) {
            next.put(tp, consumer.position(tp));
        }
        for (TopicPartition tp : latest) {
            next.put(tp, consumer.position(tp));
        }
    }

    /** Groups exist in real-time mode only: micro-batches read Spark's own partitions. */
    @Override
    public boolean next() {
        throw new UnsupportedOperationException("a group of Kafka partitions is read in real-time mode only");
    }

    @Override
    public RecordStatus nextWithTimeout(Long timeoutMs) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (true) {
            while (fetched.hasNext()) {
                ConsumerRecord<byte[], byte[]> record = fetched.next();
                TopicPartition tp = new TopicPartition(record.topic(), record.partition());
                Long expected = next.get(tp);
                if (expected == null || record.offset() < expected) {
                    continue; // a partition this group no longer reads, or a record it forwarded already
                }
                row = rows.toRow(record);
                if (positions) {
                    SourcePosition.current().set(record);
                }
                next.put(tp, record.offset() + 1);
                return RecordStatus.newStatusWithoutArrivalTime(true); // Spark 4.1 reads no arrival time
            }
            long left = deadline - System.currentTimeMillis();
            if (left <= 0) {
                return RecordStatus.newStatusWithoutArrivalTime(false);
            }
            try {
                fetched = consumer.poll(Duration.ofMillis(left)).iterator();
            } catch (OffsetOutOfRangeException e) {
                broken = true; // the consumer is fine, but the next task must not trust a half-handled state
                if (failOnDataLoss) {
                    throw e;
                }
                moveIntoRange(e.partitions());
                broken = false;
            } catch (RuntimeException e) {
                broken = true;
                throw e;
            }
        }
    }

    /** Partitions whose next offset left the log: on from the earliest offset, or the latest if past the end. */
    private void moveIntoRange(Set<TopicPartition> partitions) {
        Map<TopicPartition, Long> earliest = consumer.beginningOffsets(partitions);
        Map<TopicPartition, Long> latest = consumer.endOffsets(partitions);
        for (TopicPartition tp : partitions) {
            long wanted = next.getOrDefault(tp, 0L);
            long to = wanted < earliest.get(tp) ? earliest.get(tp) : latest.get(tp);
            log.warn("{}: offset {} is not on the source (earliest {}, latest {}); reading on from {}. Records may "
                    + "have been lost", tp, wanted, earliest.get(tp), latest.get(tp), to);
            dataLoss++;
            consumer.seek(tp, to);
            next.put(tp, to);
        }
    }

    @Override
    public UnsafeRow get() {
        return row;
    }

    @Override
    public PartitionOffset getOffset() {
        return new GroupedKafkaSource.GroupOffset(next);
    }

    @Override
    public CustomTaskMetric[] currentMetricsValues() {
        long lost = dataLoss;
        return new CustomTaskMetric[] {metric("dataLoss", lost), metric("offsetOutOfRange", lost)};
    }

    private static CustomTaskMetric metric(String name, long value) {
        return new CustomTaskMetric() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public long value() {
                return value;
            }
        };
    }

    /** Keeps the consumer for the group's next task, unless this task failed. */
    @Override
    public void close() {
        if (positions) {
            SourcePosition.current().clear(); // a row read and not sent must not pair with a later send
        }
        if (broken) {
            consumer.close(Duration.ZERO);
            return;
        }
        Kept previous = KEPT.put(key, new Kept(consumer, new LinkedHashMap<>(next), fetched));
        if (previous != null) { // a retried or speculative task of the same group ended too
            previous.consumer.close(Duration.ZERO);
        }
    }

    private static void closeIdle() {
        long now = System.currentTimeMillis();
        KEPT.entrySet().removeIf(e -> {
            if (now - e.getValue().since < IDLE_MS) {
                return false;
            }
            e.getValue().consumer.close(Duration.ZERO);
            return true;
        });
    }
}
