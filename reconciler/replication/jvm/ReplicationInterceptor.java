package io.kmirror.replication;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The sink producer's interceptor: gives each replicated record its source timestamp and writes MM2's
 * offset-syncs from the exact (source offset, target offset) pair of every record, as MirrorSourceTask does
 * in commitRecord.
 *
 * Spark's Kafka sink has no timestamp column, and does not know where a row came from, so the job tells the
 * interceptor each record's source position (topic, offset, timestamp), one of two ways:
 *   - real-time mode: the task's reader hands it over on the task's thread (SourcePosition);
 *   - micro-batch mode: the sink projection appends one last header, "__kmirror.source", ASCII
 *     "timestampMs,sourceOffset,sourceTopic", which onSend removes.
 * onSend sets the record's timestamp and queues the record's source position on its target partition. The
 * producer acknowledges a partition's records in the order they were sent (idempotent producer, one callback
 * per send, failures included), so onAcknowledgement takes the queue's head: that record's source offset
 * landed at metadata.offset(). The pair goes through MM2's rule (OffsetSyncRule); a due sync is sent at once,
 * the others are held per partition and the newest held one is sent every kmirror.offset.syncs.flush.ms
 * (MM2's promoteDelayedOffsetSyncs), at close and at JVM exit. The serialized key and value sizes of each
 * acknowledgement are checked against the queued record's; on a mismatch the partition writes no sync until
 * its records in flight are acknowledged, then starts again with a "first" sync, rather than pairing wrong
 * offsets.
 *
 * Settings (passed through the producer's configuration; the producer warns that it does not know them):
 *   kmirror.offset.syncs.topic          where syncs go; without it no syncs are written
 *   kmirror.offset.lag.max              MM2's offset.lag.max (default 100)
 *   kmirror.offset.syncs.flush.ms       how often held syncs are sent (default 5000)
 *   kmirror.offset.syncs.client.NAME    client properties of the cluster holding the syncs topic
 *
 * Wire format (MM2 OffsetSync): key = topic (int16 length + UTF-8), partition (int32); value = upstream
 * offset (int64), downstream offset (int64); big-endian.
 */
public final class ReplicationInterceptor implements ProducerInterceptor<byte[], byte[]> {
    public static final String HEADER = "__kmirror.source";
    public static final String SYNCS_TOPIC = "kmirror.offset.syncs.topic";
    public static final String OFFSET_LAG_MAX = "kmirror.offset.lag.max";
    public static final String FLUSH_MS = "kmirror.offset.syncs.flush.ms";
    public static final String CLIENT_PREFIX = "kmirror.offset.syncs.client.";
    /** Longest wait of flushAll, and of one send for metadata of the syncs topic. */
    private static final long FLUSH_ALL_TIMEOUT_MS = 10_000L;

    /** Every live interceptor of this JVM, for flushAll() and the exit hook. */
    private static final Set<ReplicationInterceptor> LIVE = ConcurrentHashMap.newKeySet();

    /**
     * Records (and their key and value bytes) the target acknowledged in this JVM: the job's live counts in
     * real-time mode, whose progress events come once per checkpoint interval.
     */
    private static final AtomicLong ACKED_RECORDS = new AtomicLong();
    private static final AtomicLong ACKED_BYTES = new AtomicLong();
    /** Records sent without their source position because they did not match their task's last row. */
    private static final AtomicLong UNPAIRED = new AtomicLong();

    /**
     * Per source partition, what was acknowledged since the last drainAcknowledged(): count, bytes, source
     * timestamp sum/min/max, age at send (send time - timestamp) sum/max/min, latency at acknowledgement
     * (acknowledgement time - timestamp) sum/max/min, last source offset, remote topic. The job's metrics in
     * real-time mode, where Spark's progress comes once per checkpoint interval.
     */
    private static final ConcurrentHashMap<TopicPartition, Stats> ACKED = new ConcurrentHashMap<>();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(ReplicationInterceptor::flushAll, "kmirror-syncs-exit"));
    }

    private final ConcurrentHashMap<TopicPartition, Lane> lanes = new ConcurrentHashMap<>();
    private final LinkedBlockingQueue<Sync> due = new LinkedBlockingQueue<>();
    private final LinkedHashMap<TopicPartition, Sync> delayed = new LinkedHashMap<>();
    private final AtomicLong sent = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicLong mismatches = new AtomicLong();
    private String syncsTopic;
    private long maxOffsetLag = 100L;
    private long flushMs = 5000L;
    private Properties clientProps;
    private Thread sender;
    private volatile boolean closed;
    private KafkaProducer<byte[], byte[]> producer;
    private PartitionLeaders leaders;
    /** Translates schema ids (flows with sync.schemas; see SchemaIds); null: records are copied unchanged. */
    private SchemaIds schemaIds;

    @Override
    public void configure(Map<String, ?> configs) {
        schemaIds = SchemaIds.shared(configs);
        Object id = configs.get("client.id");
        leaders = new PartitionLeaders(configs, (id == null ? "kmirror" : id) + "-leaders");
        Object topic = configs.get(SYNCS_TOPIC);
        syncsTopic = topic == null || topic.toString().isEmpty() ? null : topic.toString();
        maxOffsetLag = longSetting(configs, OFFSET_LAG_MAX, maxOffsetLag);
        flushMs = longSetting(configs, FLUSH_MS, flushMs);
        if (syncsTopic == null) {
            return;
        }
        clientProps = new Properties();
        for (Map.Entry<String, ?> e : configs.entrySet()) {
            if (e.getKey().startsWith(CLIENT_PREFIX) && e.getValue() != null) {
                clientProps.put(e.getKey().substring(CLIENT_PREFIX.length()), e.getValue().toString());
            }
        }
        Object clientId = configs.get("client.id");
        clientProps.put("client.id", (clientId == null ? "kmirror" : clientId) + "-offset-syncs");
        clientProps.put("key.serializer", ByteArraySerializer.class.getName());
        clientProps.put("value.serializer", ByteArraySerializer.class.getName());
        clientProps.put("acks", "all");
        clientProps.put("enable.idempotence", "true");
        clientProps.put("linger.ms", "5");
        clientProps.put("max.block.ms", Long.toString(FLUSH_ALL_TIMEOUT_MS));
        sender = new Thread(this::sendLoop, "kmirror-offset-syncs");
        sender.setDaemon(true);
        sender.start();
        LIVE.add(this);
    }

    @Override
    public ProducerRecord<byte[], byte[]> onSend(ProducerRecord<byte[], byte[]> record) {
        if (schemaIds != null) { // in place: the sizes the acknowledgement is checked against do not change
            schemaIds.translate(record.topic(), record.key(), record.value());
        }
        SourcePosition position = SourcePosition.current();
        TopicPartition tp = new TopicPartition(record.topic(), record.partition() == null ? -1 : record.partition());
        Lane lane = lane(tp);
        if (leaders != null && !lane.leaderServes) { // after its first record, a partition costs one field read
            leaders.await(tp); // a new partition's first record waits for its leader (see PartitionLeaders)
            lane.leaderServes = leaders.serves(tp);
        }
        int keySize = record.key() == null ? -1 : record.key().length;
        int valueSize = record.value() == null ? -1 : record.value().length;
        if (position.isSet()) { // real-time mode: the row this thread's reader just read (see SourcePosition)
            if (position.take(keySize, valueSize)) {
                long timestamp = position.timestamp();
                lane.sent(new Pending(position.topic(), position.offset(), timestamp, keySize, valueSize));
                return withTimestamp(record, timestamp, record.headers());
            }
            long n = UNPAIRED.incrementAndGet();
            if (n % 1000 == 1) {
                report("a record to " + tp + " does not match the row its task read last; sent without its source "
                        + "position: no offset-sync, the producer's timestamp (" + n + ")");
            }
            lane.sent(new Pending(null, -1L, -1L, keySize, valueSize)); // keeps the queue aligned
            return record;
        }
        Header[] headers = record.headers().toArray();
        Header last = headers.length == 0 ? null : headers[headers.length - 1];
        if (last == null || !HEADER.equals(last.key()) || last.value() == null) {
            lane.sent(new Pending(null, -1L, -1L, keySize, valueSize)); // keeps the queue aligned
            return record;
        }
        // "<timestamp>,<offset>,<topic>" (the micro-batch sink projection), read in place
        byte[] text = last.value();
        int first = indexOf(text, 0);
        int second = indexOf(text, first + 1);
        long timestamp = parseLong(text, 0, first);
        long offset = parseLong(text, first + 1, second);
        lane.sent(new Pending(lane.sourceTopic(text, second + 1), offset, timestamp, keySize, valueSize));
        return withTimestamp(record, timestamp, new RecordHeaders(Arrays.copyOf(headers, headers.length - 1)));
    }

    /**
     * The record with the source's timestamp and these headers. A negative timestamp (a pre-0.10 record without
     * one) is refused by ProducerRecord: the producer stamps it, as MM2 does for such records.
     */
    private static ProducerRecord<byte[], byte[]> withTimestamp(ProducerRecord<byte[], byte[]> record, long timestamp,
            Iterable<Header> headers) {
        Long kept = timestamp >= 0 ? timestamp : null;
        return new ProducerRecord<>(record.topic(), record.partition(), kept, record.key(), record.value(), headers);
    }

    /** Records this JVM sent without their source position because they did not match their task's last row. */
    public static long unpairedRecords() {
        return UNPAIRED.get();
    }

    @Override
    public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
        if (metadata == null) {
            return;
        }
        Lane lane = lanes.get(new TopicPartition(metadata.topic(), metadata.partition()));
        if (lane != null) {
            lane.acknowledged(metadata, exception);
        }
    }

    @Override
    public void close() {
        closed = true;
        LIVE.remove(this);
        if (leaders != null) {
            leaders.close();
        }
        if (sender != null) {
            sender.interrupt();
            try {
                sender.join(30_000L);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Sends the held syncs of every interceptor in this JVM and waits for them (job stop, JVM exit), for at
     * most FLUSH_ALL_TIMEOUT_MS: an unreachable syncs cluster must not keep the JVM from exiting.
     */
    public static void flushAll() {
        Thread flusher = new Thread(() -> {
            for (ReplicationInterceptor i : LIVE) {
                i.promoteDelayed();
                i.drain();
            }
        }, "kmirror-syncs-flush");
        flusher.setDaemon(true);
        flusher.start();
        try {
            flusher.join(FLUSH_ALL_TIMEOUT_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Records the target acknowledged through the interceptors of this JVM since it started. */
    public static long recordsAcknowledged() {
        return ACKED_RECORDS.get();
    }

    /** Key and value bytes of those records. */
    public static long bytesAcknowledged() {
        return ACKED_BYTES.get();
    }

    /**
     * What was acknowledged per source partition since the last call, one line each, tab-separated:
     * sourceTopic, partition, remoteTopic, count, bytes, tsSum, tsMin, tsMax, ageSum, ageMax, ageMin,
     * latencySum, latencyMax, latencyMin, lastOffset (times in ms).
     */
    public static String drainAcknowledged() {
        StringBuilder out = new StringBuilder();
        for (Map.Entry<TopicPartition, Stats> e : ACKED.entrySet()) {
            e.getValue().drainTo(e.getKey(), out);
        }
        return out.toString();
    }

    /** Offset-syncs sent by every live interceptor of this JVM (for the job's status). */
    public static long syncsSent() {
        long n = 0;
        for (ReplicationInterceptor i : LIVE) {
            n += i.sent.get();
        }
        return n;
    }

    private Lane lane(TopicPartition tp) {
        Lane lane = lanes.get(tp); // the common case without computeIfAbsent's bin lock
        return lane != null ? lane : lanes.computeIfAbsent(tp, k -> new Lane());
    }

    /** The index of the first ',' in `bytes` from `from`; a header without one is malformed. */
    public static int indexOf(byte[] bytes, int from) {
        for (int i = from; i < bytes.length; i++) {
            if (bytes[i] == ',') {
                return i;
            }
        }
        throw new NumberFormatException("no ',' in the " + HEADER + " header after byte " + from);
    }

    /** The decimal number in bytes [from, to), as Long.parseLong reads it (an optional '-'). */
    public static long parseLong(byte[] bytes, int from, int to) {
        boolean negative = from < to && bytes[from] == '-';
        int i = negative ? from + 1 : from;
        if (i >= to || to - i > 19) {
            throw new NumberFormatException("not a number in the " + HEADER + " header at byte " + from);
        }
        long value = 0;
        for (; i < to; i++) {
            int digit = bytes[i] - '0';
            if (digit < 0 || digit > 9) {
                throw new NumberFormatException("not a number in the " + HEADER + " header at byte " + i);
            }
            value = value * 10 + digit; // 19 digits can pass Long.MAX_VALUE: the sum then wraps below 0
            if (value < 0) {
                throw new NumberFormatException("a number out of range in the " + HEADER + " header");
            }
        }
        return negative ? -value : value;
    }

    private void offer(TopicPartition sourcePartition, long upstream, long downstream, boolean now) {
        if (syncsTopic == null) {
            return;
        }
        Sync sync = new Sync(sourcePartition, upstream, downstream);
        synchronized (delayed) {
            if (now) {
                delayed.remove(sourcePartition);
                due.add(sync);
            } else {
                delayed.put(sourcePartition, sync); // a held sync keeps its place, as MM2's LinkedHashMap
            }
        }
    }

    private void promoteDelayed() {
        synchronized (delayed) {
            due.addAll(delayed.values());
            delayed.clear();
        }
    }

    private void sendLoop() {
        long nextPromotion = System.currentTimeMillis() + flushMs;
        while (!closed) {
            try {
                Sync sync = due.poll(100L, TimeUnit.MILLISECONDS);
                if (sync != null) {
                    send(sync);
                }
                if (System.currentTimeMillis() >= nextPromotion) {
                    promoteDelayed();
                    nextPromotion = System.currentTimeMillis() + flushMs;
                }
            } catch (InterruptedException e) {
                break;
            } catch (RuntimeException e) {
                report("offset-syncs: " + e);
            }
        }
        promoteDelayed();
        drain();
        synchronized (this) {
            if (producer != null) {
                producer.close(java.time.Duration.ofSeconds(10));
                producer = null;
            }
        }
    }

    private void drain() {
        List<Sync> batch = new ArrayList<>();
        due.drainTo(batch);
        for (Sync s : batch) {
            send(s);
        }
        synchronized (this) {
            if (producer != null) {
                producer.flush();
            }
        }
    }

    private synchronized void send(Sync sync) {
        if (producer == null) {
            producer = new KafkaProducer<>(clientProps);
        }
        producer.send(new ProducerRecord<>(syncsTopic, 0, sync.key(), sync.value()), (md, e) -> {
            if (e == null) {
                sent.incrementAndGet();
            } else if (failed.incrementAndGet() % 1000 == 1) {
                // A lost sync only makes translation coarser until the next one; replication goes on.
                report("offset-sync to " + syncsTopic + " failed: " + e);
            }
        });
    }

    static void report(String message) {
        System.err.println("kmirror ReplicationInterceptor: " + message);
    }

    private static long longSetting(Map<String, ?> configs, String key, long fallback) {
        Object value = configs.get(key);
        return value == null ? fallback : Long.parseLong(value.toString().trim());
    }

    /** Records of one target partition sent and not yet acknowledged, and MM2's rule for its source partition. */
    private final class Lane {
        private final ArrayDeque<Pending> inflight = new ArrayDeque<>();
        private OffsetSyncRule rule = new OffsetSyncRule(maxOffsetLag);
        private boolean resync;
        /** Set once the leader gate let this partition's records through: later records skip the gate. */
        volatile boolean leaderServes;
        /** The source topic of the lane's records (one remote partition is fed by one source partition). */
        private volatile String sourceTopic;
        private Stats stats;
        private String statsTopic;

        /** The source topic named by bytes [from, end) of the header, as the lane's one String when it is that. */
        String sourceTopic(byte[] header, int from) {
            String known = sourceTopic;
            int length = header.length - from;
            if (known != null && known.length() == length) {
                boolean same = true;
                for (int i = 0; i < length && same; i++) {
                    same = known.charAt(i) == (header[from + i] & 0xff);
                }
                if (same) {
                    return known;
                }
            }
            String topic = new String(header, from, length, StandardCharsets.UTF_8);
            sourceTopic = topic;
            return topic;
        }

        /** The acknowledged-records figures of `topic`'s partition `partition` (looked up once per topic). */
        private Stats stats(String topic, int partition) {
            if (stats == null || !topic.equals(statsTopic)) {
                stats = ACKED.computeIfAbsent(new TopicPartition(topic, partition), k -> new Stats());
                statsTopic = topic;
            }
            return stats;
        }

        synchronized void sent(Pending pending) {
            inflight.addLast(pending);
        }

        synchronized void acknowledged(RecordMetadata metadata, Exception exception) {
            Pending p = inflight.pollFirst();
            if (p != null && exception == null && p.topic != null) {
                long size = Math.max(0, p.keySize) + Math.max(0, p.valueSize);
                ACKED_RECORDS.incrementAndGet();
                ACKED_BYTES.addAndGet(size);
                stats(p.topic, metadata.partition()).add(metadata.topic(), p, size, System.currentTimeMillis());
            }
            if (resync) {
                // Every send has exactly one acknowledgement, so once the queue runs empty it is aligned again.
                resync = !inflight.isEmpty();
                return;
            }
            if (p == null || exception != null || p.topic == null || metadata.offset() < 0) {
                return;
            }
            if (metadata.serializedKeySize() != p.keySize || metadata.serializedValueSize() != p.valueSize) {
                long n = mismatches.incrementAndGet();
                if (n % 1000 == 1) {
                    report("acknowledgement out of order on " + metadata.topic() + "-" + metadata.partition()
                            + "; its offset-syncs pause until its records in flight are acknowledged (" + n + ")");
                }
                rule = new OffsetSyncRule(maxOffsetLag);
                resync = !inflight.isEmpty();
                return;
            }
            TopicPartition source = new TopicPartition(p.topic, metadata.partition());
            offer(source, p.offset, metadata.offset(), rule.update(p.offset, metadata.offset()));
        }
    }

    private static final class Pending {
        final String topic;
        final long offset;
        final long timestamp;
        final long sentMs = System.currentTimeMillis();
        final int keySize;
        final int valueSize;

        Pending(String topic, long offset, long timestamp, int keySize, int valueSize) {
            this.topic = topic;
            this.offset = offset;
            this.timestamp = timestamp;
            this.keySize = keySize;
            this.valueSize = valueSize;
        }
    }

    /** Acknowledged records of one source partition since the last drain. */
    private static final class Stats {
        private String remote = "";
        private long count;
        private long bytes;
        private long tsSum;
        private long tsMin = Long.MAX_VALUE;
        private long tsMax = Long.MIN_VALUE;
        private long ageSum;
        private long ageMax = Long.MIN_VALUE;
        private long ageMin = Long.MAX_VALUE;
        private long latSum;
        private long latMax = Long.MIN_VALUE;
        private long latMin = Long.MAX_VALUE;
        private long lastOffset = -1L;

        synchronized void add(String remoteTopic, Pending p, long size, long ackMs) {
            remote = remoteTopic;
            count++;
            bytes += size;
            lastOffset = Math.max(lastOffset, p.offset);
            if (p.timestamp < 0) {
                return; // no timestamp: counted, not aged
            }
            long age = p.sentMs - p.timestamp;
            long latency = ackMs - p.timestamp;
            tsSum += p.timestamp;
            tsMin = Math.min(tsMin, p.timestamp);
            tsMax = Math.max(tsMax, p.timestamp);
            ageSum += age;
            ageMax = Math.max(ageMax, age);
            ageMin = Math.min(ageMin, age);
            latSum += latency;
            latMax = Math.max(latMax, latency);
            latMin = Math.min(latMin, latency);
        }

        synchronized void drainTo(TopicPartition source, StringBuilder out) {
            if (count == 0) {
                return;
            }
            boolean aged = tsMax != Long.MIN_VALUE;
            out.append(source.topic()).append('\t').append(source.partition()).append('\t').append(remote)
                    .append('\t').append(count).append('\t').append(bytes)
                    .append('\t').append(aged ? tsSum : 0).append('\t').append(aged ? tsMin : 0)
                    .append('\t').append(aged ? tsMax : 0)
                    .append('\t').append(aged ? ageSum : 0).append('\t').append(aged ? ageMax : 0)
                    .append('\t').append(aged ? ageMin : 0)
                    .append('\t').append(aged ? latSum : 0).append('\t').append(aged ? latMax : 0)
                    .append('\t').append(aged ? latMin : 0)
                    .append('\t').append(lastOffset).append('\n');
            count = bytes = tsSum = ageSum = latSum = 0;
            tsMin = ageMin = latMin = Long.MAX_VALUE;
            tsMax = ageMax = latMax = Long.MIN_VALUE;
        }
    }

    private static final class Sync {
        final TopicPartition partition;
        final long upstream;
        final long downstream;

        Sync(TopicPartition partition, long upstream, long downstream) {
            this.partition = partition;
            this.upstream = upstream;
            this.downstream = downstream;
        }

        byte[] key() {
            byte[] topic = partition.topic().getBytes(StandardCharsets.UTF_8);
            return ByteBuffer.allocate(2 + topic.length + 4)
                    .putShort((short) topic.length)
                    .put(topic)
                    .putInt(partition.partition())
                    .array();
        }

        byte[] value() {
            return ByteBuffer.allocate(16).putLong(upstream).putLong(downstream).array();
        }
    }
}
