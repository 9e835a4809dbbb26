package io.kmirror.replication;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Warms the driver JVM's Kafka clients while the job's query is still being analysed, on a daemon thread.
 *
 * The first batch's offsets come from an admin client the Kafka source creates on the query's own thread; on a
 * cold JVM its first request took 0.46 s (JFR, 2 cores), most of it the clients' one-time class initialisation
 * and interpreted code, and the tasks' first consumers and producer pay the same for theirs. Here one admin
 * client lists the source's topics (the request the source makes first) and a consumer and a producer are built
 * and closed unused, so the query finds that work done. The source is asked nothing the job does not ask
 * anyway; nothing is written. Any failure is ignored: the job's own clients report real problems.
 */
public final class ClientWarmup {
    private static final long TIMEOUT_MS = 15_000;

    private ClientWarmup() {}

    /** Starts the warm-up; `source` and `target` are the clusters' Java client properties (they hold secrets). */
    public static void start(Map<String, String> source, Map<String, String> target) {
        Thread thread = new Thread(() -> warm(source, target), "kmirror-client-warmup");
        thread.setDaemon(true);
        thread.start();
    }

    /** A cluster's client properties for a warm-up client: no JMX, as the job's own, and a name of its own. */
    private static Map<String, Object> props(Map<String, String> cluster) {
        Map<String, Object> props = new HashMap<>(cluster);
        props.put("auto.include.jmx.reporter", "false");
        props.put("client.id", "kmirror-warmup");
        return props;
    }

    private static void warm(Map<String, String> source, Map<String, String> target) {
        Map<String, Object> admin = props(source);
        admin.put("default.api.timeout.ms", Long.toString(TIMEOUT_MS));
        admin.put("request.timeout.ms", Long.toString(TIMEOUT_MS));
        try (Admin client = Admin.create(admin)) {
            client.listTopics().names().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (Exception | LinkageError ignored) {
            // the source's own admin client will say what is wrong
        }
        Map<String, Object> consumer = props(source);
        consumer.put("enable.auto.commit", "false");
        try (KafkaConsumer<byte[], byte[]> client =
                new KafkaConsumer<>(consumer, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            client.assignment(); // built, never connected
        } catch (Exception | LinkageError ignored) {
            // as above
        }
        Map<String, Object> producer = props(target);
        producer.put("enable.idempotence", "false"); // an idempotent one would ask the target for a producer id
        producer.put("acks", "1");
        try (KafkaProducer<byte[], byte[]> client =
                new KafkaProducer<>(producer, new ByteArraySerializer(), new ByteArraySerializer())) {
            client.metrics(); // built, never sent anything
        } catch (Exception | LinkageError ignored) {
            // as above
        }
    }
}
