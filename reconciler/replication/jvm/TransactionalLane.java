package io.kmirror.replication;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * One source partition's transactional writer, cached per JVM (the transaction's init cost is paid once per
 * partition per JVM): a KafkaProducer whose transactional.id is stable for (state topic, flow, source topic,
 * partition), so a zombie task or driver writing the same partition is fenced by initTransactions.
 *
 * After initTransactions the lane reads the group's committed offset of its remote partition on the target
 * (requireStable: no transaction of the previous producer is pending any more) and from then on keeps the
 * position itself: a row below it is skipped. A transaction holds records in source order and ends with
 * sendOffsetsToTransaction({remote partition: next source offset}); it is committed when older than
 * transaction.interval.ms at the next row, by a timer when no row comes (real-time mode tasks live for a whole
 * checkpoint interval), and when the Spark task ends. The lock keeps the timer and the task thread apart.
 *
 * Offset-syncs (MM2's rule, OffsetSyncRule) come from the offsets the records landed at: with the syncs topic
 * on the target they are sent in the transaction after a flush, so data and translation commit together;
 * otherwise they go through one plain producer per JVM after the commit (SourceSyncs).
 *
 * Any error drops the lane (its producer is closed, its transaction aborted if it can be) and fails the task:
 * the next use builds a new lane, which fences the old id and reads the committed position again.
 */
final class TransactionalLane {
    private static final ConcurrentHashMap<String, TransactionalLane> LANES = new ConcurrentHashMap<>();
    private static final ConcurrentHashMap<String, Object> INITS = new ConcurrentHashMap<>();
    private static final AtomicLong SYNCS_SENT = new AtomicLong();
    private static final long CLOSE_TIMEOUT_MS = 5_000L;
    private static volatile ScheduledExecutorService timer;

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(TransactionalLane::shutdown, "kmirror-eos-exit"));
    }

    final String sourceTopic;
    final int partition;
    private final String transactionalId;
    private final TopicPartition remote;
    private final ConsumerGroupMetadata group;
    private final long intervalMs;
    private final String syncsTopic;
    private final boolean syncsInTransaction;
    private final long flushMs;
    private final TopicPartition source;
    private final ReentrantLock lock = new ReentrantLock();
    private final SourceSyncs sourceSyncs;
    private KafkaProducer<byte[], byte[]> producer;
    private volatile boolean dropped;
    private RuntimeException failure;
    /** Next source offset to write; -1 while the group has none (nothing is skipped then). */
    private long next = -1L;
    private boolean open;
    private long openedAt;
    private final List<long[]> pendingOffsets = new ArrayList<>();
    private final List<Future<RecordMetadata>> pendingAcks = new ArrayList<>();
    private final OffsetSyncRule rule;
    private long[] held;
    private long heldPromotedAt = System.currentTimeMillis();

    private TransactionalLane(Map<String, String> settings, String sourceTopic, int partition, String remoteTopic) {
        this.sourceTopic = sourceTopic;
        this.partition = partition;
        this.transactionalId = settings.get("transactional.id.prefix") + sourceTopic + "." + partition;
        this.remote = new TopicPartition(remoteTopic, partition);
        this.source = new TopicPartition(sourceTopic, partition);
        this.group = new ConsumerGroupMetadata(settings.get("group"));
        this.intervalMs = Long.parseLong(settings.getOrDefault("transaction.interval.ms", "200"));
        String topic = settings.get("syncs.topic");
        this.syncsTopic = topic == null || topic.isEmpty() ? null : topic;
        this.syncsInTransaction = Boolean.parseBoolean(settings.getOrDefault("syncs.in.transaction", "false"));
        this.flushMs = Long.parseLong(settings.getOrDefault("syncs.flush.ms", "5000"));
        this.rule = new OffsetSyncRule(Long.parseLong(settings.getOrDefault("offset.lag.max", "100")));
        this.sourceSyncs = syncsTopic == null || syncsInTransaction ? null : SourceSyncs.of(settings, syncsTopic);
    }

    /** The live lane of a source partition, created (producer initialised, position read) on first use. */
    static TransactionalLane of(Map<String, String> settings, String sourceTopic, int partition, String remoteTopic) {
        String id = settings.get("transactional.id.prefix") + sourceTopic + "." + partition;
        TransactionalLane lane = LANES.get(id);
        if (lane != null && !lane.dropped) {
            return lane;
        }
        synchronized (INITS.computeIfAbsent(id, k -> new Object())) { // lanes of other partitions init meanwhile
            lane = LANES.get(id);
            if (lane == null || lane.dropped) {
                lane = new TransactionalLane(settings, sourceTopic, partition, remoteTopic);
                lane.init(settings);
                LANES.put(id, lane);
                startTimer(lane.intervalMs);
            }
            return lane;
        }
    }

    boolean isDropped() {
        return dropped;
    }

    private void init(Map<String, String> settings) {
        Properties props = new Properties();
        for (Map.Entry<String, String> e : settings.entrySet()) {
            if (e.getKey().startsWith("producer.")) {
                props.put(e.getKey().substring("producer.".length()), e.getValue());
            }
        }
        props.put("transactional.id", transactionalId);
        props.put("enable.idempotence", "true");
        props.put("acks", "all");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        props.remove("interceptor.classes");
        producer = new KafkaProducer<>(props);
        try {
            producer.initTransactions(); // fences every older producer of this id and ends its transaction
            try (PartitionLeaders leaders = new PartitionLeaders(props, transactionalId + "-leaders")) {
                leaders.await(remote); // a new remote partition: see PartitionLeaders
            }
            next = committedPosition(props);
        } catch (RuntimeException e) {
            closeQuietly();
            throw e;
        }
    }

    /** The group's committed offset of the remote partition on the target (-1: none), stable. */
    private long committedPosition(Properties producerProps) {
        try (Admin admin = Admin.create(PartitionLeaders.adminProperties(producerProps))) {
            ListConsumerGroupOffsetsSpec spec =
                    new ListConsumerGroupOffsetsSpec().topicPartitions(Collections.singletonList(remote));
            Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(
                            Collections.singletonMap(group.groupId(), spec),
                            new ListConsumerGroupOffsetsOptions().requireStable(true))
                    .partitionsToOffsetAndMetadata(group.groupId())
                    .get(60, TimeUnit.SECONDS);
            OffsetAndMetadata committed = offsets.get(remote);
            return committed == null ? -1L : committed.offset();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new org.apache.kafka.common.errors.InterruptException(e);
        } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
            throw new org.apache.kafka.common.KafkaException(
                    "cannot read the committed position of " + remote + " in group " + group.groupId(), e);
        }
    }

    /** One row: skipped when the target already has it, else sent in the open transaction. */
    void write(long sourceOffset, long timestamp, byte[] key, byte[] value, List<Header> headers) {
        lock.lock();
        try {
            check();
            if (sourceOffset < next) {
                return; // in a committed transaction already (or sent in this one): Spark replays it
            }
            try {
                if (!open) {
                    producer.beginTransaction();
                    open = true;
                    openedAt = System.currentTimeMillis();
                }
                Long ts = timestamp >= 0 ? timestamp : null;
                Future<RecordMetadata> ack = producer.send(
                        new ProducerRecord<>(remote.topic(), partition, ts, key, value, headers));
                if (syncsTopic != null) {
                    pendingOffsets.add(new long[] {sourceOffset});
                    pendingAcks.add(ack);
                }
                next = sourceOffset + 1;
                if (System.currentTimeMillis() - openedAt >= intervalMs) {
                    commitLocked();
                }
            } catch (RuntimeException e) {
                fail(e);
                throw e;
            }
        } finally {
            lock.unlock();
        }
    }

    /** Commit the open transaction (the task ended). Throws if the lane failed. */
    void commit() {
        lock.lock();
        try {
            check();
            try {
                commitLocked();
            } catch (RuntimeException e) {
                fail(e);
                throw e;
            }
        } finally {
            lock.unlock();
        }
    }

    /** The task failed: abort the open transaction and drop the lane (the retry starts from the target). */
    void abort(Throwable cause) {
        lock.lock();
        try {
            if (!dropped) {
                fail(new org.apache.kafka.common.KafkaException("the Spark task failed", cause));
            }
        } finally {
            lock.unlock();
        }
    }

    private void check() {
        if (dropped) {
            throw failure != null ? failure : new IllegalStateException(transactionalId + " was closed");
        }
    }

    private void commitLocked() {
        if (!open) {
            return;
        }
        List<long[]> syncs = Collections.emptyList();
        if (syncsInTransaction) {
            syncs = syncsFromAcks(); // after a flush: every record's offset is known before the commit
            for (long[] s : syncs) {
                producer.send(new ProducerRecord<>(syncsTopic, 0, syncKey(source), syncValue(s[0], s[1])));
            }
        }
        producer.sendOffsetsToTransaction(Collections.singletonMap(remote, new OffsetAndMetadata(next)), group);
        producer.commitTransaction();
        open = false;
        if (sourceSyncs != null) {
            syncs = syncsFromAcks(); // the commit flushed: every record is acknowledged
            for (long[] s : syncs) {
                sourceSyncs.send(syncKey(source), syncValue(s[0], s[1]));
            }
        }
        SYNCS_SENT.addAndGet(syncs.size());
    }

    /**
     * The offset-syncs due for the transaction's records (MM2's rule over every record, in order), plus the held
     * one when it is older than syncs.flush.ms (MM2's periodic promotion). Flushes first: every record is acked.
     */
    private List<long[]> syncsFromAcks() {
        List<long[]> out = new ArrayList<>();
        if (!pendingAcks.isEmpty()) {
            producer.flush();
        }
        for (int i = 0; i < pendingAcks.size(); i++) {
            RecordMetadata md;
            try {
                md = pendingAcks.get(i).get();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new org.apache.kafka.common.errors.InterruptException(e);
            } catch (ExecutionException e) {
                throw new org.apache.kafka.common.KafkaException("a record was not written", e.getCause());
            }
            long upstream = pendingOffsets.get(i)[0];
            if (rule.update(upstream, md.offset())) {
                out.add(new long[] {upstream, md.offset()});
                held = null;
            } else {
                held = new long[] {upstream, md.offset()};
            }
        }
        pendingAcks.clear();
        pendingOffsets.clear();
        long now = System.currentTimeMillis();
        if (now - heldPromotedAt >= flushMs) {
            if (held != null) {
                out.add(held);
                held = null;
            }
            heldPromotedAt = now;
        }
        return out;
    }

    /** Close the producer and forget the lane; its open transaction is aborted (or by the next init). */
    private void fail(RuntimeException cause) {
        failure = cause;
        dropped = true;
        LANES.remove(transactionalId, this);
        if (open) {
            try {
                producer.abortTransaction();
            } catch (RuntimeException ignored) {
                // fenced or broken: the next producer of this id aborts it when it initialises
            }
        }
        open = false;
        pendingAcks.clear();
        pendingOffsets.clear();
        closeQuietly();
    }

    private void closeQuietly() {
        try {
            producer.close(Duration.ofMillis(CLOSE_TIMEOUT_MS));
        } catch (RuntimeException ignored) {
            // closing a fenced producer may throw; it is gone either way
        }
    }

    /** The timer's pass: commit this lane's transaction when it is due and no task holds the lane. */
    private void tick() {
        if (dropped || !lock.tryLock()) {
            return;
        }
        try {
            if (!dropped && open && System.currentTimeMillis() - openedAt >= intervalMs) {
                try {
                    commitLocked();
                } catch (RuntimeException e) {
                    report(transactionalId + ": commit failed, the lane restarts: " + e);
                    fail(e);
                }
            }
        } finally {
            lock.unlock();
        }
    }

    private static synchronized void startTimer(long intervalMs) {
        if (timer != null) {
            return;
        }
        timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "kmirror-eos-commits");
            t.setDaemon(true);
            return t;
        });
        long period = Math.max(10L, intervalMs / 4);
        timer.scheduleWithFixedDelay(() -> {
            for (TransactionalLane lane : LANES.values()) {
                try {
                    lane.tick();
                } catch (RuntimeException e) {
                    report("timer: " + e);
                }
            }
        }, period, period, TimeUnit.MILLISECONDS);
    }

    static void flushAll() {
        for (TransactionalLane lane : LANES.values()) {
            lane.tick();
        }
        SourceSyncs.flushAll();
    }

    static long syncsSent() {
        return SYNCS_SENT.get();
    }

    /** JVM exit: abort what is open (nothing of it is committed, so Spark's replay writes it), close, flush syncs. */
    private static void shutdown() {
        Thread closer = new Thread(() -> {
            if (timer != null) {
                timer.shutdownNow();
            }
            for (TransactionalLane lane : LANES.values()) {
                lane.lock.lock();
                try {
                    if (!lane.dropped) {
                        lane.fail(new IllegalStateException("the JVM is exiting"));
                    }
                } finally {
                    lane.lock.unlock();
                }
            }
            SourceSyncs.flushAll();
        }, "kmirror-eos-close");
        closer.setDaemon(true);
        closer.start();
        try {
            closer.join(2 * CLOSE_TIMEOUT_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static byte[] syncKey(TopicPartition tp) {
        byte[] topic = tp.topic().getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(2 + topic.length + 4)
                .putShort((short) topic.length)
                .put(topic)
                .putInt(tp.partition())
                .array();
    }

    static byte[] syncValue(long upstream, long downstream) {
        return ByteBuffer.allocate(16).putLong(upstream).putLong(downstream).array();
    }

    static void report(String message) {
        System.err.println("kmirror ExactlyOnceWriter: " + message);
    }

    /** Offset-syncs to the source cluster, after the transactions commit: one plain producer per JVM and topic. */
    static final class SourceSyncs {
        private static final ConcurrentHashMap<String, SourceSyncs> ALL = new ConcurrentHashMap<>();
        private final String topic;
        private final KafkaProducer<byte[], byte[]> producer;
        private final AtomicLong failed = new AtomicLong();

        private SourceSyncs(Map<String, String> settings, String topic) {
            this.topic = topic;
            Properties props = new Properties();
            for (Map.Entry<String, String> e : settings.entrySet()) {
                if (e.getKey().startsWith("syncs.client.")) {
                    props.put(e.getKey().substring("syncs.client.".length()), e.getValue());
                }
            }
            props.put("client.id", "kmirror-eos-offset-syncs");
            props.put("key.serializer", ByteArraySerializer.class.getName());
            props.put("value.serializer", ByteArraySerializer.class.getName());
            props.put("acks", "all");
            props.put("enable.idempotence", "true");
            props.put("linger.ms", "5");
            props.put("max.block.ms", "10000");
            producer = new KafkaProducer<>(props);
        }

        static SourceSyncs of(Map<String, String> settings, String topic) {
            return ALL.computeIfAbsent(topic, t -> new SourceSyncs(settings, t));
        }

        void send(byte[] key, byte[] value) {
            producer.send(new ProducerRecord<>(topic, 0, key, value), (md, e) -> {
                if (e != null && failed.incrementAndGet() % 1000 == 1) {
                    // A lost sync only makes translation coarser until the next one; replication goes on.
                    report("offset-sync to " + topic + " failed: " + e);
                }
            });
        }

        static void flushAll() {
            for (SourceSyncs s : ALL.values()) {
                try {
                    s.producer.flush();
                } catch (RuntimeException e) {
                    report("offset-syncs not flushed: " + e);
                }
            }
        }
    }
}
