package io.kmirror.replication;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
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
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * One source partition's transactional writer: a KafkaProducer whose transactional.id is stable for (state topic,
 * flow, source topic, partition), so any other writer of the same partition (a zombie task, an old driver, an
 * executor declared lost but alive) is fenced by initTransactions.
 *
 * Init: the committed offset of the remote partition in the flow's group on the target is read first without
 * requireStable (a newer generation there: the lane stops for good before fencing anyone), then initTransactions,
 * then read again with requireStable (no transaction of the previous producer is pending any more). The offset is
 * the next source offset to write; its metadata (LaneMark) says which deployment generation, which source topic
 * id and which lane instance committed it. A newer generation there: this job was superseded, it stops for good
 * (SupersededException) instead of fencing back. Another topic id: the source topic was deleted and created
 * again, the position starts over. Then the lane claims the partition: an empty transaction commits the position
 * with this lane's mark, so a stale lane elsewhere can tell it lost the partition.
 *
 * A transaction holds records in source order and ends with sendOffsetsToTransaction({remote partition: next
 * source offset, mark}). A transaction is due once it is transaction.interval.ms old (counted from its first row);
 * the row that finds it due, or the timer when no row comes, hands its commit to a pool thread (one commit at a
 * time per lane: one slow flush holds back no other lane), and the Spark task's end commits what is left. The task
 * never waits for a commit: a row that comes while its lane commits is queued, and the lane sends the queue, in
 * source order, as the first rows of its next transaction as soon as the commit is done. So with a small interval
 * a lane commits back to back, each transaction holding the rows that came during the previous commit (MM2's
 * transaction.boundary=poll, per source partition): the commit's own time, not a timer, sets the latency.
 *
 * Lanes are cached per JVM within one run of the query (the `run` setting: a new one at each query start, so a
 * restarted query never reuses a lane, nor its cached position). A task that takes a cached lane first checks that
 * the committed mark is still the lane's own (else another writer took the partition since: the lane is rebuilt,
 * nothing having been sent through it in this task).
 *
 * Any error drops the lane: its producer is closed, its open transaction aborted. A lane is never replaced under
 * a task that used it: that task fails (ExactlyOnceWriter), and Spark's retry replays the rows from the batch's
 * start; the new lane reads the committed position and re-sends everything the aborted transaction held.
 *
 * Offset-syncs (MM2's rule, OffsetSyncRule) come from the offsets the records landed at: with the syncs topic
 * on the target they are sent in the transaction after a flush, so data and translation commit together;
 * otherwise they go through one plain producer per JVM after the commit (SourceSyncs).
 */
final class TransactionalLane {
    private static final ConcurrentHashMap<String, TransactionalLane> LANES = new ConcurrentHashMap<>();
    private static final ConcurrentHashMap<String, Object> INITS = new ConcurrentHashMap<>();
    private static final ConcurrentHashMap<String, Admin> ADMINS = new ConcurrentHashMap<>();
    private static final AtomicLong SYNCS_SENT = new AtomicLong();
    private static final AtomicLong FENCED = new AtomicLong();
    private static final AtomicLong QUEUED = new AtomicLong();
    private static final AtomicLong RESETS = new AtomicLong();
    /**
     * Per flow (its group), the newest generation seen above this JVM's: a flow's, not the JVM's, since an
     * application's driver runs several flows' writers, and a flow whose query restarts there has a newer generation
     * than the one its stopped query saw.
     */
    private static final ConcurrentHashMap<String, Long> SUPERSEDED_BY = new ConcurrentHashMap<>();
    private static final long CLOSE_TIMEOUT_MS = 5_000L;
    private static final long ADMIN_TIMEOUT_S = 60L;
    /** Bytes queued per lane during a commit before the task waits for it (bounds what a slow commit holds). */
    private static final long MAX_QUEUED_BYTES = 4L << 20;
    private static volatile ScheduledExecutorService timer;
    private static volatile ExecutorService committers;

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(TransactionalLane::shutdown, "kmirror-eos-exit"));
    }

    final String sourceTopic;
    final int partition;
    final String run;
    private final String transactionalId;
    private final TopicPartition remote;
    private final ConsumerGroupMetadata group;
    private final long generation;
    private final String nonce = UUID.randomUUID().toString();
    private final long intervalMs;
    private final String syncsTopic;
    private final boolean syncsInTransaction;
    private final long flushMs;
    private final TopicPartition source;
    private final Map<String, String> settings;
    private final ReentrantLock lock = new ReentrantLock();
    private final AtomicBoolean committing = new AtomicBoolean();
    /** Rows a task handed over while the lane was committing (guarded by itself), sent first once it is done. */
    private final ArrayDeque<Pending> queued = new ArrayDeque<>();
    private long queuedBytes;
    private final SourceSyncs sourceSyncs;
    private KafkaProducer<byte[], byte[]> producer;
    /** Translates schema ids (flows with sync.schemas; see SchemaIds); null: records are copied unchanged. */
    private SchemaIds schemaIds;
    private volatile boolean dropped;
    private RuntimeException failure;
    /** The source topic's id when the lane started (null: not known; no re-creation check). */
    private String topicId;
    /** Next source offset to write; -1 while the group has none (nothing is skipped then). */
    private long next = -1L;
    private volatile boolean open;
    private volatile long openedAt;
    /** Rows sent in the open transaction (LaneCommitStats). */
    private long txnRows;
    private final List<long[]> pendingOffsets = new ArrayList<>();
    private final List<Future<RecordMetadata>> pendingAcks = new ArrayList<>();
    private final OffsetSyncRule rule;
    private long[] held;
    private long heldPromotedAt = System.currentTimeMillis();

    private TransactionalLane(Map<String, String> settings, String sourceTopic, int partition, String remoteTopic) {
        this.settings = settings;
        this.sourceTopic = sourceTopic;
        this.partition = partition;
        this.run = settings.getOrDefault("run", "");
        this.transactionalId = transactionalId(settings, sourceTopic, partition);
        this.remote = new TopicPartition(remoteTopic, partition);
        this.source = new TopicPartition(sourceTopic, partition);
        this.group = new ConsumerGroupMetadata(settings.get("group"));
        this.generation = Long.parseLong(settings.getOrDefault("generation", "0"));
        this.intervalMs = Long.parseLong(settings.getOrDefault("transaction.interval.ms", "10"));
        String topic = settings.get("syncs.topic");
        this.syncsTopic = topic == null || topic.isEmpty() ? null : topic;
        this.syncsInTransaction = Boolean.parseBoolean(settings.getOrDefault("syncs.in.transaction", "false"));
        this.flushMs = Long.parseLong(settings.getOrDefault("syncs.flush.ms", "5000"));
        this.rule = new OffsetSyncRule(Long.parseLong(settings.getOrDefault("offset.lag.max", "100")));
        this.sourceSyncs = syncsTopic == null || syncsInTransaction ? null : SourceSyncs.of(settings, syncsTopic);
    }

    /** PREFIX + sourceTopic + "/" + partition: no topic name holds a '/', so no two partitions share an id. */
    static String transactionalId(Map<String, String> settings, String sourceTopic, int partition) {
        return settings.get("transactional.id.prefix") + sourceTopic + "/" + partition;
    }

    /**
     * The lane of a source partition for a task that has not used it yet: the cached one of this query run if
     * the partition's committed mark is still its own, else a new one (producer initialised, position read,
     * partition claimed). Throws SupersededException once a newer generation of the flow was seen.
     */
    static TransactionalLane acquire(Map<String, String> settings, String sourceTopic, int partition, String remoteTopic) {
        checkSuperseded(settings);
        String id = transactionalId(settings, sourceTopic, partition);
        TransactionalLane lane = LANES.get(id);
        if (lane != null && lane.usable(settings) && lane.stillOwned()) {
            return lane;
        }
        synchronized (INITS.computeIfAbsent(id, k -> new Object())) { // lanes of other partitions init meanwhile
            TransactionalLane current = LANES.get(id);
            if (current != null && current != lane && current.usable(settings)) {
                return current; // another task of this run built it meanwhile
            }
            if (current != null) {
                current.drop("replaced by a new lane of " + id);
            }
            TransactionalLane fresh = new TransactionalLane(settings, sourceTopic, partition, remoteTopic);
            long began = System.nanoTime();
            fresh.init();
            LaneCommitStats.start(began, System.nanoTime());
            LANES.put(id, fresh);
            startTimer(fresh.intervalMs);
            return fresh;
        }
    }

    private boolean usable(Map<String, String> settings) {
        return !dropped && run.equals(settings.getOrDefault("run", ""));
    }

    boolean isDropped() {
        return dropped;
    }

    long next() {
        return next;
    }

    private void init() {
        Properties props = producerProperties(settings);
        props.put("transactional.id", transactionalId);
        schemaIds = SchemaIds.shared(props);
        LaneMark before = readMark(false);
        if (before != null && before.generation > generation) {
            throw supersede(settings, before.generation); // before initTransactions: the newer writer is not fenced
        }
        producer = new KafkaProducer<>(props);
        try {
            producer.initTransactions(); // fences every older producer of this id and ends its transaction
            try (PartitionLeaders leaders = new PartitionLeaders(props, transactionalId + "-leaders")) {
                leaders.await(remote); // a new remote partition: see PartitionLeaders
            }
            LaneMark mark = readMark(true);
            if (mark != null && mark.generation > generation) {
                throw supersede(settings, mark.generation);
            }
            topicId = sourceTopicId();
            long position = mark == null ? -1L : mark.offset;
            if (mark != null && mark.topicId != null && topicId != null && !mark.topicId.equals(topicId)) {
                report(source + " was deleted and created again (topic id " + mark.topicId + " -> " + topicId
                        + "): copying it from its start, not from the old topic's position " + mark.offset);
                RESETS.incrementAndGet();
                position = -1L;
            }
            // Claim the partition: the committed mark becomes this lane's (a stale lane elsewhere sees it).
            producer.beginTransaction();
            producer.sendOffsetsToTransaction(
                    Collections.singletonMap(remote, new OffsetAndMetadata(Math.max(position, 0L), mark())), group);
            producer.commitTransaction();
            next = position;
        } catch (RuntimeException e) {
            closeQuietly();
            throw e;
        }
    }

    private String mark() {
        return LaneMark.format(generation, topicId, nonce);
    }

    /** Still this lane's partition: the committed mark is its own and the source topic is the one it started on. */
    private boolean stillOwned() {
        LaneMark mark;
        try {
            mark = readMark(true);
        } catch (RuntimeException e) {
            return false; // the new lane's init tells what is wrong
        }
        if (mark == null || !nonce.equals(mark.nonce)) {
            return false; // another writer took the partition (or the group's offsets were deleted)
        }
        return topicId == null || topicId.equals(sourceTopicId());
    }

    /**
     * A row below the position after a row at or above it in the same task: a replay never goes back, so the
     * source topic may have been deleted and created again. Resets the position if its id changed.
     */
    void sourceWentBack() {
        lock.lock();
        try {
            check();
            try {
                drainLocked(); // the rows before this one go first, as they would have without a commit running
            } catch (RuntimeException e) {
                fail(e);
                throw e;
            }
            String now = sourceTopicId();
            if (topicId != null && now != null && !topicId.equals(now)) {
                report(source + " was deleted and created again while the job ran (topic id " + topicId + " -> "
                        + now + "): copying it from its start");
                RESETS.incrementAndGet();
                topicId = now;
                next = -1L;
            }
        } finally {
            release(true);
        }
    }

    /** The committed offset of the remote partition in the flow's group with its mark (null: none). */
    private LaneMark readMark(boolean stable) {
        Admin admin = admin("target", settings, "producer.");
        ListConsumerGroupOffsetsSpec spec =
                new ListConsumerGroupOffsetsSpec().topicPartitions(Collections.singletonList(remote));
        try {
            Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(
                            Collections.singletonMap(group.groupId(), spec),
                            new ListConsumerGroupOffsetsOptions().requireStable(stable))
                    .partitionsToOffsetAndMetadata(group.groupId())
                    .get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            OffsetAndMetadata committed = offsets.get(remote);
            return committed == null ? null : LaneMark.parse(committed.offset(), committed.metadata());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new org.apache.kafka.common.errors.InterruptException(e);
        } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
            throw new KafkaException("cannot read the committed position of " + remote + " in group "
                    + group.groupId(), e);
        }
    }

    /** The source topic's id (null when the settings name no source cluster, or it cannot be read now). */
    private String sourceTopicId() {
        if (!settings.containsKey("source.bootstrap.servers")) {
            return null;
        }
        try {
            return admin("source", settings, "source.").describeTopics(Collections.singletonList(sourceTopic))
                    .allTopicNames().get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS).get(sourceTopic).topicId().toString();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new org.apache.kafka.common.errors.InterruptException(e);
        } catch (ExecutionException | java.util.concurrent.TimeoutException | RuntimeException e) {
            return null; // the topic is gone for the moment: the next check tells
        }
    }

    /** One admin client per flow and cluster per JVM (the lanes' position reads and topic lookups). */
    static Admin admin(String side, Map<String, String> settings, String prefix) {
        String key = side + "\u0000" + settings.get("group") + "\u0000" + settings.get(prefix + "bootstrap.servers");
        return ADMINS.computeIfAbsent(key, k -> {
            Properties admin = PartitionLeaders.adminProperties(clientProperties(settings, prefix));
            admin.put("client.id", "kmirror-eos-" + side);
            return Admin.create(admin);
        });
    }

    /** The settings under `prefix` (e.g. "producer."), the prefix taken off: a Kafka client's properties. */
    static Properties clientProperties(Map<String, String> settings, String prefix) {
        Properties props = new Properties();
        for (Map.Entry<String, String> e : settings.entrySet()) {
            if (e.getKey().startsWith(prefix)) {
                props.put(e.getKey().substring(prefix.length()), e.getValue());
            }
        }
        return props;
    }

    static Properties producerProperties(Map<String, String> settings) {
        Properties props = clientProperties(settings, "producer.");
        props.put("enable.idempotence", "true");
        props.put("acks", "all");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        props.remove("interceptor.classes");
        return props;
    }

    /**
     * One row: skipped when the target already has it, else sent in the open transaction. The task thread never
     * waits for a commit: while the lane's commit runs (on a pool thread), the row is queued and the lane sends it,
     * in source order, in its next transaction as soon as the commit is done. A transaction is due once it is
     * transaction.interval.ms old; the write that finds it due hands its commit to the pool.
     */
    void write(long sourceOffset, long timestamp, byte[] key, byte[] value, List<Header> headers) {
        check();
        // While a commit is due or running the task leaves the lock to it (no barging ahead of the committer).
        if (committing.get() || !lock.tryLock()) {
            if (queue(new Pending(sourceOffset, timestamp, key, value, headers))) {
                if (!committing.get()) {
                    release(false); // the commit ended meanwhile: send the queue now if the lane is free
                }
                return;
            }
            lock.lock(); // the queue is full (a commit that takes long): the task waits for it
        }
        try {
            check();
            try {
                drainLocked();
                sendLocked(sourceOffset, timestamp, key, value, headers, System.currentTimeMillis());
            } catch (RuntimeException e) {
                fail(e);
                throw e;
            }
        } finally {
            release(true);
        }
        if (open && System.currentTimeMillis() - openedAt >= intervalMs) {
            commitSoon();
        }
    }

    private boolean queue(Pending row) {
        synchronized (queued) {
            if (queuedBytes >= MAX_QUEUED_BYTES) {
                return false;
            }
            queued.add(row);
            queuedBytes += row.bytes();
        }
        QUEUED.incrementAndGet();
        return true;
    }

    private boolean hasQueued() {
        synchronized (queued) {
            return !queued.isEmpty();
        }
    }

    /** Sends the queued rows, in order, before anything newer (the lock is held). */
    private void drainLocked() {
        while (true) {
            Pending row;
            synchronized (queued) {
                row = queued.poll();
                queuedBytes = row == null ? 0L : queuedBytes - row.bytes();
            }
            if (row == null) {
                return;
            }
            if (dropped) {
                continue; // the lane failed: the task fails, its retry re-sends them
            }
            sendLocked(row.offset, row.timestamp, row.key, row.value, row.headers, row.at);
        }
    }

    /**
     * Unlocks (when held), then sends what a task queued while the lock was held: every holder checks the queue
     * after unlocking and every writer tries the lock after queueing, so no row waits for a later event.
     */
    private void release(boolean held) {
        if (held) {
            lock.unlock();
        }
        while (hasQueued() && lock.tryLock()) {
            try {
                if (!dropped) {
                    drainLocked();
                } else {
                    synchronized (queued) {
                        queued.clear();
                        queuedBytes = 0L;
                    }
                }
            } catch (RuntimeException e) {
                report(transactionalId + ": a queued record was not sent; the task that wrote it fails and its "
                        + "retry re-sends it: " + e);
                fail(e);
            } finally {
                lock.unlock();
            }
        }
    }

    private void sendLocked(long sourceOffset, long timestamp, byte[] key, byte[] value, List<Header> headers, long at) {
        if (sourceOffset < next) {
            return; // in a committed transaction already (or sent in this one): Spark replays it
        }
        if (!open) {
            producer.beginTransaction();
            open = true;
            openedAt = at;
        }
        Long ts = timestamp >= 0 ? timestamp : null;
        if (schemaIds != null) {
            schemaIds.translate(remote.topic(), key, value);
        }
        Future<RecordMetadata> ack = producer.send(new ProducerRecord<>(remote.topic(), partition, ts, key, value, headers));
        txnRows++;
        if (syncsTopic != null) {
            pendingOffsets.add(new long[] {sourceOffset});
            pendingAcks.add(ack);
        }
        next = sourceOffset + 1;
    }

    /** Commit the open transaction (the task ended). Throws if the lane failed. */
    void commit() {
        lock.lock();
        try {
            check();
            try {
                drainLocked();
                commitLocked();
            } catch (RuntimeException e) {
                fail(e);
                throw e;
            }
        } finally {
            release(true);
        }
    }

    /** The task failed: abort the open transaction and drop the lane (the retry starts from the target). */
    void abort(Throwable cause) {
        lock.lock();
        try {
            if (!dropped) {
                fail(new KafkaException("the Spark task failed", cause));
            }
        } finally {
            lock.unlock();
        }
    }

    private void drop(String why) {
        lock.lock();
        try {
            if (!dropped) {
                fail(new IllegalStateException(why));
            }
        } finally {
            lock.unlock();
        }
    }

    private void check() {
        if (dropped) {
            throw failure instanceof KafkaException
                    ? new KafkaException(transactionalId + " failed: the task fails and its retry re-sends what "
                            + "was not committed", failure)
                    : new IllegalStateException(transactionalId + " was closed", failure);
        }
    }

    private void commitLocked() {
        if (!open) {
            return;
        }
        long age = System.currentTimeMillis() - openedAt;
        long began = System.nanoTime();
        List<long[]> syncs = Collections.emptyList();
        if (syncsInTransaction) {
            syncs = syncsFromAcks(); // after a flush: every record's offset is known before the commit
            for (long[] s : syncs) {
                producer.send(new ProducerRecord<>(syncsTopic, 0, syncKey(source), syncValue(s[0], s[1])));
            }
        }
        long flushed = System.nanoTime();
        producer.sendOffsetsToTransaction(
                Collections.singletonMap(remote, new OffsetAndMetadata(next, mark())), group);
        long offsetsSent = System.nanoTime();
        producer.commitTransaction();
        LaneCommitStats.commit(txnRows, age * 1_000_000L, flushed - began, offsetsSent - flushed,
                System.nanoTime() - offsetsSent);
        txnRows = 0;
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
                throw new KafkaException("a record was not written", e.getCause());
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
        if (fenced(cause)) {
            FENCED.incrementAndGet();
            report(transactionalId + " was fenced by another writer of the flow (a stray task, or an older "
                    + "deployment still alive); this task fails and its retry takes the partition back");
        }
        if (open) {
            try {
                producer.abortTransaction();
            } catch (RuntimeException ignored) {
                // fenced or broken: the next producer of this id aborts it when it initialises
            }
        }
        open = false;
        txnRows = 0;
        pendingAcks.clear();
        pendingOffsets.clear();
        synchronized (queued) {
            queued.clear();
            queuedBytes = 0L;
        }
        closeQuietly();
    }

    private static boolean fenced(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof ProducerFencedException || t instanceof InvalidProducerEpochException) {
                return true;
            }
        }
        return false;
    }

    private void closeQuietly() {
        try {
            if (producer != null) {
                producer.close(Duration.ofMillis(CLOSE_TIMEOUT_MS));
            }
        } catch (RuntimeException ignored) {
            // closing a fenced producer may throw; it is gone either way
        }
    }

    /** The timer's pass: a due transaction no row came to commit (the last rows of a burst, a quiet partition). */
    private void tick() {
        if (!dropped && open && System.currentTimeMillis() - openedAt >= intervalMs) {
            commitSoon();
        }
    }

    /** Hands the lane's commit to a pool thread, one at a time per lane: a slow flush holds back only this lane. */
    private void commitSoon() {
        if (!committing.compareAndSet(false, true)) {
            return; // its last commit is still running: the rows meanwhile go in the next transaction
        }
        try {
            committers.execute(this::commitDue);
        } catch (RuntimeException e) {
            committing.set(false);
        }
    }

    private void commitDue() {
        try {
            lock.lock(); // a task holds it for one row at a time, never for a commit
            try {
                if (!dropped) {
                    drainLocked();
                }
                if (!dropped && open && System.currentTimeMillis() - openedAt >= intervalMs) {
                    commitLocked();
                }
            } catch (RuntimeException e) {
                report(transactionalId + ": commit failed; the task that wrote it fails and its retry "
                        + "re-sends the aborted records: " + e);
                fail(e);
            } finally {
                release(true); // what the task queued during the commit opens the next transaction now
            }
        } finally {
            committing.set(false);
        }
        release(false); // rows queued after the last look above, while `committing` still kept the task out
        if (!dropped && open && System.currentTimeMillis() - openedAt >= intervalMs) {
            commitSoon(); // the queued rows were older than the interval already
        }
    }

    private static synchronized void startTimer(long intervalMs) {
        if (timer != null) {
            return;
        }
        committers = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "kmirror-eos-commit");
            t.setDaemon(true);
            return t;
        });
        timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "kmirror-eos-commits");
            t.setDaemon(true);
            return t;
        });
        long period = Math.max(2L, Math.min(50L, intervalMs / 2));
        timer.scheduleWithFixedDelay(() -> {
            for (TransactionalLane lane : LANES.values()) {
                try {
                    lane.tick();
                } catch (RuntimeException e) {
                    report("timer: " + e);
                }
            }
            LaneCommitStats.maybeLog();
        }, period, period, TimeUnit.MILLISECONDS);
    }

    static void flushAll() {
        for (TransactionalLane lane : LANES.values()) {
            if (lane.lock.tryLock()) {
                try {
                    if (!lane.dropped) {
                        lane.drainLocked();
                    }
                    if (!lane.dropped && lane.open) {
                        lane.commitLocked();
                    }
                } catch (RuntimeException e) {
                    lane.fail(e);
                } finally {
                    lane.release(true);
                }
            }
        }
        SourceSyncs.flushAll();
    }

    static long syncsSent() {
        return SYNCS_SENT.get();
    }

    static long queuedRows() {
        return QUEUED.get();
    }

    static long fencedCount() {
        return FENCED.get();
    }

    static long resets() {
        return RESETS.get();
    }

    static long supersededBy() {
        return SUPERSEDED_BY.values().stream().mapToLong(Long::longValue).max().orElse(0L);
    }

    /** See ExactlyOnceWriter.fenceOnStart. */
    static long fenceOnStart(
            Map<String, String> settings, List<String> sourceTopics, List<String> remoteTopics, List<Integer> partitions) {
        long generation = Long.parseLong(settings.getOrDefault("generation", "0"));
        String groupId = settings.get("group");
        Admin admin = admin("target", settings, "producer.");
        Map<TopicPartition, OffsetAndMetadata> committed;
        try {
            committed = admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata()
                    .get(ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new org.apache.kafka.common.errors.InterruptException(e);
        } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
            throw new KafkaException("cannot read the positions of group " + groupId, e);
        }
        long newest = 0L;
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : committed.entrySet()) {
            if (e.getValue() != null) {
                newest = Math.max(newest, LaneMark.parse(e.getValue().offset(), e.getValue().metadata()).generation);
            }
        }
        if (newest > generation) {
            markSuperseded(settings, newest);
            return newest;
        }
        String legacy = settings.get("legacy.transactional.id.prefix");
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < partitions.size(); i++) {
            ids.add(transactionalId(settings, sourceTopics.get(i), partitions.get(i)));
            OffsetAndMetadata old = committed.get(new TopicPartition(remoteTopics.get(i), partitions.get(i)));
            String metadata = old == null ? null : old.metadata();
            if (legacy != null && old != null && (metadata == null || !metadata.startsWith(LaneMark.PREFIX))) {
                ids.add(legacy + sourceTopics.get(i) + "." + partitions.get(i));
            }
        }
        if (!ids.isEmpty()) {
            try {
                // One call per id, all sent at once: one call with all ids took ~0.8 s per id (19-20 s for 24 ids
                // against the test brokers, kafka-clients 3.9.1), 24 one-id calls at once 0.2-0.3 s in all.
                List<KafkaFuture<Void>> fences = new ArrayList<>(ids.size());
                for (String id : ids) {
                    fences.add(admin.fenceProducers(Collections.singletonList(id)).all());
                }
                KafkaFuture.allOf(fences.toArray(new KafkaFuture<?>[0])).get(2 * ADMIN_TIMEOUT_S, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new org.apache.kafka.common.errors.InterruptException(e);
            } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
                // Each lane fences its own id when it starts: only the early abort of open transactions is lost.
                report("the writers of the flow's " + ids.size() + " partitions were not fenced at the start (" + e
                        + "); each is fenced when its partition's first record comes");
            }
        }
        return 0L;
    }

    private static SupersededException supersede(Map<String, String> settings, long newer) {
        markSuperseded(settings, newer);
        return new SupersededException(newer);
    }

    private static void checkSuperseded(Map<String, String> settings) {
        long newer = SUPERSEDED_BY.getOrDefault(String.valueOf(settings.get("group")), 0L);
        if (newer > Long.parseLong(settings.getOrDefault("generation", "0"))) {
            throw new SupersededException(newer);
        }
    }

    /** Marks the flow's writers in this JVM superseded (the driver found a newer generation before starting its query). */
    static void markSuperseded(Map<String, String> settings, long newer) {
        SUPERSEDED_BY.merge(String.valueOf(settings.get("group")), newer, Math::max);
    }

    /** JVM exit: abort what is open (nothing of it is committed, so Spark's replay writes it), close, flush syncs. */
    private static void shutdown() {
        Thread closer = new Thread(() -> {
            if (timer != null) {
                timer.shutdownNow();
            }
            for (TransactionalLane lane : LANES.values()) {
                lane.drop("the JVM is exiting");
            }
            SourceSyncs.flushAll();
            for (Admin admin : ADMINS.values()) {
                try {
                    admin.close(Duration.ofMillis(1_000L));
                } catch (RuntimeException ignored) {
                    // exiting
                }
            }
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

    /**
     * A row queued while its lane committed (or, in ExactlyOnceWriter, held while its lane starts); `at` is when it
     * came (the transaction's age counts from it).
     */
    static final class Pending {
        final long offset;
        final long timestamp;
        final byte[] key;
        final byte[] value;
        final List<Header> headers;
        final long at = System.currentTimeMillis();

        Pending(long offset, long timestamp, byte[] key, byte[] value, List<Header> headers) {
            this.offset = offset;
            this.timestamp = timestamp;
            this.key = key;
            this.value = value;
            this.headers = headers;
        }

        long bytes() {
            return 64L + (key == null ? 0 : key.length) + (value == null ? 0 : value.length);
        }
    }

    /** A newer deployment of the flow writes its partitions: this writer stops for good, fencing nobody. */
    static final class SupersededException extends KafkaException {
        private static final long serialVersionUID = 1L;

        SupersededException(long newer) {
            super("kmirror: this job was superseded by generation " + newer + " of the flow (a newer deployment "
                    + "writes its partitions): it stops for good instead of fencing the newer one");
        }
    }

    /**
     * The metadata of a committed position: "kmirror:g=GENERATION,t=TOPIC_ID,l=LANE". Older versions committed
     * none (generation 0, no topic id, no lane).
     */
    static final class LaneMark {
        static final String PREFIX = "kmirror:";
        final long offset;
        final long generation;
        final String topicId;
        final String nonce;

        private LaneMark(long offset, long generation, String topicId, String nonce) {
            this.offset = offset;
            this.generation = generation;
            this.topicId = topicId;
            this.nonce = nonce;
        }

        static String format(long generation, String topicId, String nonce) {
            return PREFIX + "g=" + generation + ",t=" + (topicId == null ? "" : topicId) + ",l=" + nonce;
        }

        static LaneMark parse(long offset, String metadata) {
            long generation = 0L;
            String topicId = null;
            String nonce = null;
            if (metadata != null && metadata.startsWith(PREFIX)) {
                for (String field : metadata.substring(PREFIX.length()).split(",")) {
                    int eq = field.indexOf('=');
                    if (eq <= 0) {
                        continue;
                    }
                    String name = field.substring(0, eq);
                    String value = field.substring(eq + 1);
                    if (name.equals("g")) {
                        try {
                            generation = Long.parseLong(value);
                        } catch (NumberFormatException ignored) {
                            // an unknown mark counts as the oldest generation
                        }
                    } else if (name.equals("t") && !value.isEmpty()) {
                        topicId = value;
                    } else if (name.equals("l") && !value.isEmpty()) {
                        nonce = value;
                    }
                }
            }
            return new LaneMark(offset, generation, topicId, nonce);
        }
    }

    /** Offset-syncs to the source cluster, after the transactions commit: one plain producer per JVM and topic. */
    static final class SourceSyncs {
        private static final ConcurrentHashMap<String, SourceSyncs> ALL = new ConcurrentHashMap<>();
        private final String topic;
        private final KafkaProducer<byte[], byte[]> producer;
        private final AtomicLong failed = new AtomicLong();

        private SourceSyncs(Map<String, String> settings, String topic) {
            this.topic = topic;
            Properties props = clientProperties(settings, "syncs.client.");
            props.put("client.id", "kmirror-eos-offset-syncs");
            props.put("key.serializer", ByteArraySerializer.class.getName());
            props.put("value.serializer", ByteArraySerializer.class.getName());
            props.put("acks", "all");
            props.put("enable.idempotence", "true");
            props.put("linger.ms", "5");
            props.put("max.block.ms", "10000");
            producer = new KafkaProducer<>(props);
        }

        /**
         * One producer per (source cluster, topic): in an application, two flows from different source clusters
         * that name the same target alias write `mm2-offset-syncs.<target>.internal` on their own cluster each, so
         * the topic's name alone must not pick the producer. The key holds every syncs.client.* setting (it never
         * leaves this map: no log, no message).
         */
        static SourceSyncs of(Map<String, String> settings, String topic) {
            String key = topic + "\u0000" + new TreeMap<>(clientProperties(settings, "syncs.client."));
            return ALL.computeIfAbsent(key, k -> new SourceSyncs(settings, topic));
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
