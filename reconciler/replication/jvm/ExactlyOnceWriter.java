package io.kmirror.replication;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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
 */
public final class ExactlyOnceWriter extends ForeachWriter<Row> {
    private static final long serialVersionUID = 1L;

    private final HashMap<String, String> settings;
    /** This task's lanes by source partition ("topic/partition"), and the offset each last saw. */
    private transient Map<String, TransactionalLane> used;
    private transient Map<TransactionalLane, long[]> lastOffsets;
    private transient TransactionalLane last;
    private transient long[] lastOffset;

    public ExactlyOnceWriter(Map<String, String> settings) {
        this.settings = new HashMap<>(settings);
    }

    @Override
    public boolean open(long partitionId, long epochId) {
        used = new LinkedHashMap<>();
        lastOffsets = new HashMap<>();
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
            if (lane == null) { // first row of this partition in this task: a cached lane or a new one
                lane = TransactionalLane.acquire(settings, sourceTopic, partition, row.getString(0));
                used.put(key, lane);
                lastOffsets.put(lane, new long[] {-1L});
            }
            last = lane;
            lastOffset = lastOffsets.get(lane);
        }
        long offset = row.getLong(6);
        if (offset < lastOffset[0]) {
            lane.sourceWentBack(); // a replay never goes back within a task: a re-created source topic may
        }
        lastOffset[0] = offset;
        long timestamp = row.isNullAt(7) ? -1L : row.getLong(7);
        lane.write( // throws once the lane failed: the task fails and its retry re-sends from the batch's start
                offset,
                timestamp,
                row.isNullAt(2) ? null : (byte[]) row.get(2),
                row.isNullAt(3) ? null : (byte[]) row.get(3),
                headers(row));
    }

    @Override
    public void close(Throwable errorOrNull) {
        if (used == null) {
            return;
        }
        RuntimeException failure = null;
        for (TransactionalLane lane : used.values()) {
            if (errorOrNull == null) {
                try {
                    lane.commit();
                } catch (RuntimeException e) {
                    failure = failure == null ? e : failure;
                }
            } else {
                lane.abort(errorOrNull);
            }
        }
        used = null;
        lastOffsets = null;
        last = null;
        lastOffset = null;
        if (failure != null) {
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
