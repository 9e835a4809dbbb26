package io.kmirror.replication;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
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
 *   transactional.id.prefix        a lane's transactional.id is PREFIX + sourceTopic + "." + partition
 *   group                          the group the source positions are committed to on the target
 *   transaction.interval.ms        a transaction older than this is committed (at the next row, or by a timer)
 *   syncs.topic                    where offset-syncs go (absent: none)
 *   syncs.in.transaction           true: the syncs topic is on the target and syncs go in the transactions
 *   syncs.client.NAME              client properties of the syncs topic's cluster (when not in the transaction)
 *   offset.lag.max, syncs.flush.ms MM2's offset.lag.max; how often a held sync is written
 *
 * A task that fails (a fenced producer, a broker error) aborts and drops its lanes; Spark retries it and the
 * new lane reads the committed position again.
 */
public final class ExactlyOnceWriter extends ForeachWriter<Row> {
    private static final long serialVersionUID = 1L;

    private final HashMap<String, String> settings;
    private transient Set<TransactionalLane> used;
    private transient TransactionalLane last;

    public ExactlyOnceWriter(Map<String, String> settings) {
        this.settings = new HashMap<>(settings);
    }

    @Override
    public boolean open(long partitionId, long epochId) {
        used = new LinkedHashSet<>();
        last = null;
        return true;
    }

    @Override
    public void process(Row row) {
        String sourceTopic = row.getString(5);
        int partition = row.getInt(1);
        TransactionalLane lane = last;
        if (lane == null || lane.partition != partition || !lane.sourceTopic.equals(sourceTopic) || lane.isDropped()) {
            lane = TransactionalLane.of(settings, sourceTopic, partition, row.getString(0));
            used.add(lane);
            last = lane;
        }
        long timestamp = row.isNullAt(7) ? -1L : row.getLong(7);
        lane.write(
                row.getLong(6),
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
        for (TransactionalLane lane : used) {
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
        last = null;
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
