package io.kmirror.replication;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.spark.sql.ForeachWriter;
import org.apache.spark.sql.Row;

/**
 * The Spark sink of a flow with replication.delivery exactly_once (micro-batch and real-time mode alike):
 * each projected row goes to the transactional lane of its SOURCE partition (TransactionalLane), which writes
 * it to the remote topic in a Kafka transaction together with the source position, committed to the target
 * as a consumer-group offset. A lane skips the rows its group already has, whatever Spark's checkpoint
 * replays, so a record is in exactly one committed transaction.
 *
 * Row columns, in order (reconciler/replication/exactly_once.py builds them): topic (the remote topic),
 * partition, key, value, headers (array of (key, value)), sourceTopic, sourceOffset, timestampMs.
 *
 * Settings (the map the constructor takes; it holds client secrets: never log it):
 *   producer.NAME                  the target's client properties and the flow's producer settings
 *   source.NAME                    the source's client properties (the lanes look up the source topics' ids)
 *   transactional.id.prefix        a lane's transactional.id is PREFIX + sourceTopic + "/" + partition
 *   legacy.transactional.id.prefix the ids of kmirror versions before 2026-11-27 (PREFIX + topic + "." + p),
 *                                  fenced at the query's start where the group's positions were written by them
 *   group                          the group the source positions are committed to on the target
 *   generation                     the deployment's generation (the state records it): a newer one in a committed
 *                                  position stops this job for good
 *   run                            one run of the query (new at each start): lanes are never reused across runs
 *   transaction.interval.ms        a transaction older than this is committed (at the next row, or by a timer)
 *   syncs.topic                    where offset-syncs go (absent: none)
 *   syncs.in.transaction           true: the syncs topic is on the target and syncs go in the transactions
 *   syncs.client.NAME              client properties of the syncs topic's cluster (when not in the transaction)
 *   offset.lag.max, syncs.flush.ms MM2's offset.lag.max; how often a held sync is written
 *
 * A task keeps the lanes it used. Once it has used a lane, it never takes another for that partition: if the lane
 * fails (a commit by the timer fenced, timed out or failed to flush; a sibling task aborting it), the task fails
 * at its next row for that partition or when it ends, and Spark's retry replays the batch from its start onto a
 * new lane, which reads the committed position: what the aborted transaction held is sent again, nothing skipped.
 *
 * A task's lanes start together: the first row of a partition hands that lane's start (initTransactions, the
 * position read with requireStable, the claim; see TransactionalLane) to a pool thread and the task goes on with
 * its next rows; the partition's rows are held, in order, until its lane has started (at most 4 MB per partition:
 * then the task waits for that start), and the pool thread writes them through the lane as soon as it has. So a
 * task that owns 24 partitions waits for about one lane start, not 24 one after another (an exactly-once job's
 * first record came ~50 s after an at-least-once one's). A start that fails (fenced, superseded, a broker down)
 * fails the task at its next row for that partition or when it ends, as it did when the task started it itself.
 */
public final class ExactlyOnceWriter extends ForeachWriter<Row> {
    private static final long serialVersionUID = 1L;

    /** Rows held per partition while its lane starts, before the task waits for the start. */
    private static final long MAX_HELD_BYTES = 4L << 20;
    private static volatile ExecutorService starters;

    private final HashMap<String, String> settings;
    /** This task's lanes by source partition ("topic/partition"), and the offset each last saw. */
    private transient Map<String, TransactionalLane> used;
    private transient Map<TransactionalLane, long[]> lastOffsets;
    /** This task's partitions whose lanes are starting (or started, not yet taken by the task thread). */
    private transient Map<String, Start> starting;
    private transient TransactionalLane last;
    private transient long[] lastOffset;

    public ExactlyOnceWriter(Map<String, String> settings) {
        this.settings = new HashMap<>(settings);
    }

    @Override
    public boolean open(long partitionId, long epochId) {
        used = new LinkedHashMap<>();
        lastOffsets = new HashMap<>();
        starting = new LinkedHashMap<>();
        last = null;
        lastOffset = null;
        return true;
    }

    @Override
    public void process(Row row) {
        String sourceTopic = row.getString(5);
        int partition = row.getInt(1);
        TransactionalLane lane = last;
        if (lane == null || lane.partition != partition || !lane.sourceTopic.equals(sourceTopic)) {
            String key = sourceTopic + "/" + partition;
            lane = used.get(key);
            if (lane == null) { // its lane is starting: held (or written) by the start, or this task waits for it
                Start start = starting.get(key);
                if (start == null) { // first row of this partition in this task: a cached lane or a new one
                    start = new Start(key);
                    starting.put(key, start);
                    start.begin(settings, sourceTopic, partition, row.getString(0));
                }
                if (start.offer(row)) {
                    return;
                }
                lane = start.lane; // started, with every held row written: the task writes on by itself
                starting.remove(key);
                used.put(key, lane);
                lastOffsets.put(lane, start.last);
            }
            last = lane;
            lastOffset = lastOffsets.get(lane);
        }
        write(lane, lastOffset, row.getLong(6), row.isNullAt(7) ? -1L : row.getLong(7),
                row.isNullAt(2) ? null : (byte[]) row.get(2),
                row.isNullAt(3) ? null : (byte[]) row.get(3),
                headers(row));
    }

    private static void write(
            TransactionalLane lane, long[] lastOffset, long offset, long timestamp, byte[] key, byte[] value,
            List<Header> headers) {
        if (offset < lastOffset[0]) {
            lane.sourceWentBack(); // a replay never goes back within a task: a re-created source topic may
        }
        lastOffset[0] = offset;
        // throws once the lane failed: the task fails and its retry re-sends from the batch's start
        lane.write(offset, timestamp, key, value, headers);
    }

    @Override
    public void close(Throwable errorOrNull) {
        if (used == null) {
            return;
        }
        RuntimeException failure = null;
        for (Start start : starting.values()) { // their held rows are written (or their start failed)
            try {
                TransactionalLane lane = start.await();
                used.put(start.key, lane);
            } catch (RuntimeException e) {
                failure = failure == null ? e : failure;
            }
        }
        starting = null;
        // A start that failed fails the task as a failed row would have: every lane's transaction is aborted.
        Throwable error = errorOrNull == null ? failure : errorOrNull;
        for (TransactionalLane lane : used.values()) {
            if (error == null) {
                try {
                    lane.commit();
                } catch (RuntimeException e) {
                    failure = failure == null ? e : failure;
                }
            } else {
                lane.abort(error);
            }
        }
        used = null;
        lastOffsets = null;
        last = null;
        lastOffset = null;
        if (failure != null && errorOrNull == null) {
            throw failure; // the task fails; Spark retries it and the lanes start again from the target's positions
        }
    }

    /** Transactions of every lane of this JVM that are due, and the held offset-syncs (job stop, tests). */
    public static void flushAll() {
        TransactionalLane.flushAll();
    }

    /** Offset-syncs written by the lanes of this JVM (for the job's status). */
    public static long syncsSent() {
        return TransactionalLane.syncsSent();
    }

    /** Rows a task handed to a lane while the lane committed (sent first in its next transaction; tests). */
    public static long queuedRows() {
        return TransactionalLane.queuedRows();
    }

    /** Times a lane of this JVM was fenced by another writer of its partition (a stray task, an older job). */
    public static long fencedCount() {
        return TransactionalLane.fencedCount();
    }

    /** Partitions whose position started over because their source topic was deleted and created again. */
    public static long topicResets() {
        return TransactionalLane.resets();
    }

    /** Transactions this JVM's lanes committed, rows each, and where a commit's time went (LaneCommitStats). */
    public static String commitStats() {
        return LaneCommitStats.summary();
    }

    /** The newer generation that superseded this JVM's writers (0: none). */
    public static long supersededBy() {
        return TransactionalLane.supersededBy();
    }

    /**
     * The driver, before the query starts: a newer generation in any committed position of the flow's group
     * (returned: the job must stop for good, fencing nobody); else every partition's transactional id is fenced
     * (Admin.fenceProducers, as MM2 fences its tasks' ids at reconfiguration), so the open transactions of a
     * dead or stray writer are aborted at once, not after transaction.timeout.ms, and a live one is stopped.
     * Legacy ids are fenced for partitions whose position an older kmirror wrote. Returns 0 when it may start.
     */
    public static long fenceOnStart(
            Map<String, String> settings, List<String> sourceTopics, List<String> remoteTopics, List<Integer> partitions) {
        return TransactionalLane.fenceOnStart(new HashMap<>(settings), sourceTopics, remoteTopics, partitions);
    }

    private static ExecutorService starters() {
        ExecutorService pool = starters;
        if (pool == null) {
            synchronized (ExactlyOnceWriter.class) {
                if (starters == null) {
                    starters = Executors.newCachedThreadPool(r -> {
                        Thread t = new Thread(r, "kmirror-eos-start");
                        t.setDaemon(true);
                        return t;
                    });
                }
                pool = starters;
            }
        }
        return pool;
    }

    /**
     * One partition's lane while it starts on a pool thread: the task's rows of that partition are held here, in
     * order, and written by the pool thread once the lane has started; the task thread takes the lane after that.
     */
    private static final class Start {
        final String key;
        /** The offset the partition's last written row had (the task's sourceWentBack check goes on with it). */
        final long[] last = {-1L};
        private final List<TransactionalLane.Pending> held = new ArrayList<>();
        private long heldBytes;
        /** Set (guarded by this) once the lane started and every held row was handed to it. */
        private TransactionalLane lane;
        private RuntimeException failure;

        Start(String key) {
            this.key = key;
        }

        void begin(Map<String, String> settings, String sourceTopic, int partition, String remoteTopic) {
            starters().execute(() -> {
                TransactionalLane started;
                try {
                    started = TransactionalLane.acquire(settings, sourceTopic, partition, remoteTopic);
                } catch (RuntimeException e) {
                    done(null, e);
                    return;
                } catch (Error e) {
                    done(null, new IllegalStateException("the lane of " + key + " did not start", e));
                    throw e;
                }
                done(started, null);
            });
        }

        private synchronized void done(TransactionalLane started, RuntimeException error) {
            RuntimeException failed = error;
            if (started != null) {
                try { // rows the task gave meanwhile, in order, before it writes any newer one
                    for (TransactionalLane.Pending row : held) {
                        write(started, last, row.offset, row.timestamp, row.key, row.value, row.headers);
                    }
                } catch (RuntimeException e) {
                    failed = e; // a used lane failed: the task fails (its retry re-sends what was aborted)
                }
            }
            held.clear();
            heldBytes = 0L;
            lane = started;
            failure = failed;
            notifyAll();
        }

        /**
         * Holds the row while the lane starts (true); false once the lane has started and every held row was
         * written: the caller writes this row itself. Waits for the start when the held rows are too many.
         */
        synchronized boolean offer(Row row) {
            if (lane == null && failure == null && heldBytes < MAX_HELD_BYTES) {
                TransactionalLane.Pending h = new TransactionalLane.Pending(
                        row.getLong(6), row.isNullAt(7) ? -1L : row.getLong(7),
                        row.isNullAt(2) ? null : (byte[]) row.get(2),
                        row.isNullAt(3) ? null : (byte[]) row.get(3),
                        headers(row));
                held.add(h);
                heldBytes += h.bytes();
                return true;
            }
            await();
            return false;
        }

        /** Waits for the start; the started lane, every held row written, or the start's (or a write's) error. */
        synchronized TransactionalLane await() {
            while (lane == null && failure == null) {
                try {
                    wait();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new org.apache.kafka.common.errors.InterruptException(e);
                }
            }
            if (failure != null) {
                throw failure;
            }
            return lane;
        }
    }

    private static List<Header> headers(Row row) {
        if (row.isNullAt(4)) {
            return new ArrayList<>(0);
        }
        List<Row> list = row.getList(4);
        List<Header> out = new ArrayList<>(list.size());
        for (Row h : list) {
            out.add(new RecordHeader(h.getString(0), h.isNullAt(1) ? null : (byte[]) h.get(1)));
        }
        return out;
    }
}
