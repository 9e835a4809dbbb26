package io.kmirror.replication;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAccumulator;

/**
 * Where a transactional lane's commit time goes (TransactionalLane.commitLocked), for this JVM: how many
 * transactions, how many rows each, how old a transaction was when its commit began, and the time of each part of
 * the commit (the offset-syncs flush, sendOffsetsToTransaction, commitTransaction). Logged (stderr, the job's log)
 * once per LOG_EVERY_MS while lanes commit, and readable as one line (ExactlyOnceWriter.commitStats).
 *
 * Must not: hold anything of a record, or slow a commit (a few atomic adds per transaction).
 */
final class LaneCommitStats {
    static final long LOG_EVERY_MS = 10_000L;
    private static final AtomicLong COMMITS = new AtomicLong();
    private static final AtomicLong ROWS = new AtomicLong();
    private static final AtomicLong AGE_NS = new AtomicLong();
    private static final AtomicLong FLUSH_NS = new AtomicLong();
    private static final AtomicLong OFFSETS_NS = new AtomicLong();
    private static final AtomicLong END_NS = new AtomicLong();
    private static final LongAccumulator MAX_COMMIT_NS = new LongAccumulator(Math::max, 0L);
    private static final AtomicLong STARTS = new AtomicLong();
    private static final AtomicLong START_NS = new AtomicLong();
    private static final LongAccumulator MAX_START_NS = new LongAccumulator(Math::max, 0L);
    private static final LongAccumulator FIRST_START = new LongAccumulator(Math::min, Long.MAX_VALUE);
    private static final LongAccumulator LAST_START_END = new LongAccumulator(Math::max, Long.MIN_VALUE);
    private static volatile long windowStart = System.nanoTime();
    private static volatile long[] windowBase = new long[6];

    private LaneCommitStats() {}

    /** One commit: its rows, its age when the commit began, and the nanoseconds of each part. */
    static void commit(long rows, long ageNs, long flushNs, long offsetsNs, long endNs) {
        COMMITS.incrementAndGet();
        ROWS.addAndGet(rows);
        AGE_NS.addAndGet(Math.max(0L, ageNs));
        FLUSH_NS.addAndGet(flushNs);
        OFFSETS_NS.addAndGet(offsetsNs);
        END_NS.addAndGet(endNs);
        MAX_COMMIT_NS.accumulate(flushNs + offsetsNs + endNs);
    }

    /** One lane start (producer, initTransactions, position read, claim), from System.nanoTime() to another. */
    static void start(long began, long ended) {
        STARTS.incrementAndGet();
        START_NS.addAndGet(ended - began);
        MAX_START_NS.accumulate(ended - began);
        FIRST_START.accumulate(began);
        LAST_START_END.accumulate(ended);
    }

    private static long[] totals() {
        return new long[] {COMMITS.get(), ROWS.get(), AGE_NS.get(), FLUSH_NS.get(), OFFSETS_NS.get(), END_NS.get()};
    }

    /** Since the JVM started: the totals and averages as one line. */
    static String summary() {
        return describe(totals(), new long[6], -1L);
    }

    /** The timer's pass: logs the last window's figures once it is LOG_EVERY_MS old and lanes committed in it. */
    static synchronized void maybeLog() {
        long now = System.nanoTime();
        if (now - windowStart < LOG_EVERY_MS * 1_000_000L) {
            return;
        }
        long[] t = totals();
        if (t[0] > windowBase[0]) {
            TransactionalLane.report("commits in the last " + (now - windowStart) / 1_000_000_000L + " s: "
                    + describe(t, windowBase, now - windowStart));
        }
        windowBase = t;
        windowStart = now;
    }

    private static String describe(long[] t, long[] base, long windowNs) {
        long commits = t[0] - base[0];
        if (commits == 0) {
            return "no transactions; " + starts();
        }
        String rate = windowNs > 0 ? String.format("%.0f/s, ", commits * 1e9 / windowNs) : "";
        return String.format("%d transactions (%s%.1f rows each); age when the commit began %.2f ms; flush for "
                        + "offset-syncs %.2f ms, sendOffsetsToTransaction %.2f ms, commitTransaction %.2f ms (averages; "
                        + "longest commit %.1f ms since start); %s",
                commits, rate, (t[1] - base[1]) / (double) commits, ms(t[2] - base[2], commits),
                ms(t[3] - base[3], commits), ms(t[4] - base[4], commits), ms(t[5] - base[5], commits),
                MAX_COMMIT_NS.get() / 1e6, starts());
    }

    private static String starts() {
        long n = STARTS.get();
        // The span from the first start to the end of the last: about the longest one when lanes start together.
        return n == 0 ? "no lane started" : String.format("%d lane starts, %.0f ms each on average, longest %.0f ms, "
                        + "%.0f ms from the first one's beginning to the last one's end", n, START_NS.get() / 1e6 / n,
                MAX_START_NS.get() / 1e6, (LAST_START_END.get() - FIRST_START.get()) / 1e6);
    }

    private static double ms(long ns, long n) {
        return ns / 1e6 / n;
    }
}
