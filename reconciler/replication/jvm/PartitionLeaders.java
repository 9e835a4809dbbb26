package io.kmirror.replication;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RetriableException;

/**
 * Holds the first write to a target partition until its leader serves it.
 *
 * A broker publishes a new topic (or new partitions) in its metadata a moment before it has made itself their
 * leader. An idempotent producer that writes at once can have its first request refused
 * (NOT_LEADER_OR_FOLLOWER) while its next request, sent before that answer, is appended; the broker then refuses
 * every retry of the first one as OUT_OF_ORDER_SEQUENCE_NUMBER until delivery.timeout.ms expires it (KAFKA-14359,
 * KAFKA-15591; brokers before 4.5 accept any first sequence). For the job that is a partition stalled for two
 * minutes, a failed batch and its records written again. So before the first record to a partition, the
 * partition's leader is asked for its end offset (ListOffsets is answered only by the partition's leader), for
 * every partition of the topic at once; a partition that answered is written to without asking again.
 *
 * A partition whose leader does not answer within the producer's max.block.ms (or that the client may not
 * describe) is let through: the producer's own timeouts then apply, as without this gate (a target that is down
 * fails the batch no later than before).
 *
 * Asked topic by topic, a job whose first records go to many topics waits for one round of requests per topic
 * before the first record of the next (10 topics: about 0.4 s on 2 cores), because tasks sharing a producer share
 * its gate. So the driver asks ahead (`confirmAhead`), before the query starts, for every partition of every
 * remote topic the job writes to, in one round; the gates of this JVM on that cluster take its answers and only
 * ask themselves for a topic it does not cover, or a partition it could not confirm.
 */
public final class PartitionLeaders implements AutoCloseable {
    /** The latest ahead-of-time confirmation per target cluster (its bootstrap.servers), for the gates of this JVM. */
    private static final ConcurrentHashMap<String, Ahead> AHEAD = new ConcurrentHashMap<>();
    /** How long the driver's ahead-of-time confirmation keeps asking for partitions whose leaders do not answer. */
    private static final long AHEAD_MS = 60_000L;

    private final String cluster;
    private final Properties adminProps;
    /** Longest wait for a partition's leader: the producer's max.block.ms, its own bound on waiting for metadata. */
    private final long waitMs;
    private final Set<TopicPartition> served = ConcurrentHashMap.newKeySet();
    private Admin admin;

    /** `clientConfigs`: the producer's settings (see adminProperties). */
    PartitionLeaders(Map<?, ?> clientConfigs, String clientId) {
        adminProps = adminProperties(clientConfigs);
        adminProps.put(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
        cluster = clusterKey(clientConfigs);
        Object maxBlock = clientConfigs.get("max.block.ms");
        waitMs = maxBlock == null ? 60_000L : Long.parseLong(maxBlock.toString().trim());
    }

    /**
     * The settings of an admin client on a producer's cluster: those of `producerConfigs` an admin client knows
     * (connection, security, timeouts), but not the producer's retry count.
     */
    static Properties adminProperties(Map<?, ?> producerConfigs) {
        Properties props = new Properties();
        Set<String> known = AdminClientConfig.configNames();
        for (Map.Entry<?, ?> e : producerConfigs.entrySet()) {
            String key = String.valueOf(e.getKey());
            if (e.getValue() != null && known.contains(key) && !key.equals(AdminClientConfig.RETRIES_CONFIG)) {
                props.put(key, e.getValue());
            }
        }
        return props;
    }

    /**
     * Starts asking, on a daemon thread, for the leaders of every partition of `topics` on the cluster whose client
     * properties are `clusterProps` (they hold secrets; they stay in this JVM). Replaces the previous one for that
     * cluster: the driver calls this as each query starts, with the remote topics as they are then.
     */
    public static void confirmAhead(Map<String, String> clusterProps, List<String> topics) {
        Properties props = adminProperties(clusterProps);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "kmirror-leaders-ahead");
        Ahead ahead = new Ahead(new HashSet<>(topics));
        AHEAD.put(clusterKey(clusterProps), ahead);
        Thread thread = new Thread(() -> ahead.run(props), "kmirror-leaders-ahead");
        thread.setDaemon(true);
        thread.start();
    }

    private static String clusterKey(Map<?, ?> clientConfigs) {
        Object servers = clientConfigs.get(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG);
        return servers == null ? "" : servers.toString().trim();
    }

    /** Whether records to `tp` go through without waiting: its leader served it, or the wait for it is over. */
    boolean serves(TopicPartition tp) {
        return tp.partition() >= 0 && served.contains(tp);
    }

    /** Returns once the leader of `tp` serves it (at once when it did before), or when the wait is over. */
    void await(TopicPartition tp) {
        if (tp.partition() < 0 || served.contains(tp)) {
            return;
        }
        long deadline = System.currentTimeMillis() + waitMs;
        Ahead ahead = AHEAD.get(cluster);
        if (ahead != null && ahead.topics.contains(tp.topic()) && ahead.confirms(tp, deadline)) {
            served.add(tp);
            return;
        }
        synchronized (this) { // tasks sharing the producer ask once for the topic
            if (served.contains(tp)) {
                return;
            }
            String why = waitFor(tp, deadline);
            if (why != null && !Thread.currentThread().isInterrupted()) {
                served.add(tp); // not asked again: the producer's own timeouts apply
                ReplicationInterceptor.report("writing to " + tp + " without its leader's answer: " + why);
            }
        }
    }

    /** null once `tp` is served; else why it was not within the deadline. */
    private String waitFor(TopicPartition tp, long deadline) {
        long pause = 50L;
        String why = "no answer";
        while (true) {
            try {
                Map<String, Throwable> failed = new HashMap<>();
                List<TopicPartition> partitions = partitionsOf(admin(), List.of(tp.topic()), deadline, failed);
                Throwable cause = failed.get(tp.topic());
                if (cause == null) {
                    served.addAll(answered(admin(), partitions, served, deadline));
                    if (served.contains(tp)) {
                        return null;
                    }
                    why = "the leader does not serve it yet";
                } else if (cause instanceof TimeoutException) {
                    why = "no answer";
                } else if (!(cause instanceof RetriableException)) {
                    return cause.toString(); // not authorized, or the topic is gone for good
                } else {
                    why = cause.toString();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return "interrupted";
            }
            if (System.currentTimeMillis() + pause > deadline) {
                return why;
            }
            try {
                Thread.sleep(pause);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return "interrupted";
            }
            pause = Math.min(pause * 2, 1_000L);
        }
    }

    /**
     * The partitions of `topics` (one DescribeTopics); a topic not described by the deadline is put in `failed`
     * with why (the cause the cluster gave, or a TimeoutException), and has no partitions in the list.
     */
    private static List<TopicPartition> partitionsOf(
            Admin admin, Collection<String> topics, long deadline, Map<String, Throwable> failed)
            throws InterruptedException {
        List<TopicPartition> out = new ArrayList<>();
        Map<String, KafkaFuture<TopicDescription>> described = admin.describeTopics(topics).topicNameValues();
        for (String topic : topics) {
            try {
                described.get(topic).get(left(deadline), TimeUnit.MILLISECONDS).partitions()
                        .forEach(p -> out.add(new TopicPartition(topic, p.partition())));
            } catch (ExecutionException e) {
                failed.put(topic, e.getCause());
            } catch (TimeoutException e) {
                failed.put(topic, e);
            }
        }
        return out;
    }

    /** Those of `partitions` not in `served` whose leader answered ListOffsets. */
    private static List<TopicPartition> answered(
            Admin admin, Collection<TopicPartition> partitions, Set<TopicPartition> served, long deadline)
            throws InterruptedException {
        Map<TopicPartition, OffsetSpec> ask = new HashMap<>();
        for (TopicPartition tp : partitions) {
            if (!served.contains(tp)) {
                ask.put(tp, OffsetSpec.latest());
            }
        }
        List<TopicPartition> out = new ArrayList<>();
        if (ask.isEmpty()) {
            return out;
        }
        var result = admin.listOffsets(ask);
        for (TopicPartition tp : ask.keySet()) {
            try {
                result.partitionResult(tp).get(left(deadline), TimeUnit.MILLISECONDS);
                out.add(tp);
            } catch (ExecutionException | TimeoutException e) {
                // not served yet: asked again
            }
        }
        return out;
    }

    private static long left(long deadline) {
        return Math.max(1L, deadline - System.currentTimeMillis());
    }

    private Admin admin() {
        if (admin == null) {
            admin = Admin.create(adminProps);
        }
        return admin;
    }

    /** One ahead-of-time confirmation: the partitions of `topics` whose leaders answered so far. */
    private static final class Ahead {
        final Set<String> topics;
        final Set<TopicPartition> served = ConcurrentHashMap.newKeySet();
        /** Topics still asked for: not every partition answered yet, and the time is not up. */
        private final Set<String> pending = ConcurrentHashMap.newKeySet();

        Ahead(Set<String> topics) {
            this.topics = topics;
            pending.addAll(topics);
        }

        /** Whether `tp` is confirmed by `deadline`; false as soon as its topic is no longer asked for without it. */
        synchronized boolean confirms(TopicPartition tp, long deadline) {
            try {
                while (!served.contains(tp) && pending.contains(tp.topic()) && System.currentTimeMillis() < deadline) {
                    wait(left(deadline));
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return served.contains(tp);
        }

        /** Asks in rounds (all topics, then all their partitions) until every partition answered or time is up. */
        void run(Properties props) {
            long deadline = System.currentTimeMillis() + AHEAD_MS;
            long pause = 50L;
            try (Admin admin = Admin.create(props)) {
                while (!pending.isEmpty() && System.currentTimeMillis() + pause < deadline) {
                    Map<String, Throwable> failed = new HashMap<>();
                    List<TopicPartition> partitions = partitionsOf(admin, pending, deadline, failed);
                    // Topics every partition of which answered; one not authorized, or gone, is left to its gate.
                    Set<String> complete = new HashSet<>(pending);
                    failed.forEach((topic, cause) -> {
                        if (cause instanceof RetriableException || cause instanceof TimeoutException) {
                            complete.remove(topic); // asked again in the next round
                        }
                    });
                    served.addAll(answered(admin, partitions, served, deadline));
                    partitions.forEach(tp -> {
                        if (!served.contains(tp)) {
                            complete.remove(tp.topic());
                        }
                    });
                    pending.removeAll(complete);
                    synchronized (this) {
                        notifyAll();
                    }
                    if (!pending.isEmpty()) {
                        Thread.sleep(pause);
                        pause = Math.min(pause * 2, 1_000L);
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (RuntimeException e) {
                // e.g. settings an admin client refuses: every gate asks for itself, as without this
            } finally {
                synchronized (this) {
                    pending.clear();
                    notifyAll();
                }
            }
        }
    }

    @Override
    public synchronized void close() {
        if (admin != null) {
            admin.close(java.time.Duration.ofSeconds(5));
            admin = null;
        }
    }
}
