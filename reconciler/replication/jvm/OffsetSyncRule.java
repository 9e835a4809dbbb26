package io.kmirror.replication;

/**
 * MM2's offset-sync emission rule for one source partition: OffsetSyncWriter.PartitionState.update followed
 * by reset (apache/kafka connect/mirror), fed with every replicated record in order.
 *
 * A sync is due at once when it is the first of this rule's lifetime, when translating the latest record
 * from the last sync would lag by offset.lag.max or more downstream offsets, when upstream offsets were
 * skipped (compacted, aborted or control records) or went backwards, or when the downstream offset went
 * backwards. Otherwise the pair is held as the partition's delayed sync (see ReplicationInterceptor).
 * The same rule in Python is reconciler/core/offsets/emitter.py (decide_sync); tests check they agree.
 *
 * Not thread-safe: the interceptor calls it under the partition's lock.
 */
public final class OffsetSyncRule {
    private final long maxOffsetLag;
    private long previousUpstream = -1L;
    private long previousDownstream = -1L;
    private long lastSyncDownstream = -1L;

    public OffsetSyncRule(long maxOffsetLag) {
        this.maxOffsetLag = maxOffsetLag;
    }

    /** Observe one replicated record; true when its sync is due now. */
    public boolean update(long upstream, long downstream) {
        boolean first = lastSyncDownstream == -1L;
        // Translation lands one past a sync, hence the + 1 (as in MM2).
        boolean stale = downstream - (lastSyncDownstream + 1) >= maxOffsetLag;
        boolean skipped = upstream - previousUpstream != 1L;
        boolean truncated = downstream < previousDownstream;
        boolean due = first || stale || skipped || truncated;
        if (due) {
            lastSyncDownstream = downstream;
        }
        previousUpstream = upstream;
        previousDownstream = downstream;
        return due;
    }

    /**
     * For the cross-check test: reads "upstream downstream" lines from stdin and prints 1 or 0 per line,
     * with offset.lag.max from the first argument.
     */
    public static void main(String[] args) throws java.io.IOException {
        OffsetSyncRule rule = new OffsetSyncRule(Long.parseLong(args[0]));
        java.io.BufferedReader in =
                new java.io.BufferedReader(new java.io.InputStreamReader(System.in, java.nio.charset.StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            String[] parts = line.trim().split("\\s+");
            out.append(rule.update(Long.parseLong(parts[0]), Long.parseLong(parts[1])) ? '1' : '0').append('\n');
        }
        System.out.print(out);
        System.out.flush();
    }
}
