package io.kmirror.replication;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
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
 */
final class PartitionLeaders implements AutoCloseable {
    private final Properties adminProps;
    /** Longest wait for a partition's leader: the producer's max.block.ms, its own bound on waiting for metadata. */
    private final long waitMs;
    private final Set<TopicPartition> served = ConcurrentHashMap.newKeySet();
    private Admin admin;

    /** `clientConfigs`: the producer's settings (see adminProperties). */
    PartitionLeaders(Map<?, ?> clientConfigs, String clientId) {
        adminProps = adminProperties(clientConfigs);
        adminProps.put(AdminClientConfig.CLIENT_ID_CONFIG, clientId);
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

    /** Returns once the leader of `tp` serves it (at once when it did before), or when the wait is over. */
    void await(TopicPartition tp) {
        if (tp.partition() < 0 || served.contains(tp)) {
            return;
        }
        synchronized (this) { // tasks sharing the producer ask once for the topic
            if (served.contains(tp)) {
                return;
            }
            long deadline = System.currentTimeMillis() + waitMs;
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
                List<TopicPartition> partitions = partitionsOf(tp.topic(), deadline);
                served.addAll(answered(partitions, deadline));
                if (served.contains(tp)) {
                    return null;
                }
                why = "the leader does not serve it yet";
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof RetriableException)) {
                    return e.getCause().toString(); // not authorized, or the topic is gone for good
                }
                why = e.getCause().toString();
            } catch (TimeoutException e) {
                why = "no answer";
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

    private List<TopicPartition> partitionsOf(String topic, long deadline)
            throws ExecutionException, InterruptedException, TimeoutException {
        TopicDescription description = admin().describeTopics(Collections.singletonList(topic))
                .allTopicNames()
                .get(left(deadline), TimeUnit.MILLISECONDS)
                .get(topic);
        List<TopicPartition> out = new ArrayList<>();
        description.partitions().forEach(p -> out.add(new TopicPartition(topic, p.partition())));
        return out;
    }

    /** Those of `partitions` not served before whose leader answered ListOffsets. */
    private List<TopicPartition> answered(Collection<TopicPartition> partitions, long deadline)
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
        var result = admin().listOffsets(ask);
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

    @Override
    public synchronized void close() {
        if (admin != null) {
            admin.close(java.time.Duration.ofSeconds(5));
            admin = null;
        }
    }
}
