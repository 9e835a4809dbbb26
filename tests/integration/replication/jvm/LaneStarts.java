import io.kmirror.replication.ExactlyOnceWriter;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.spark.sql.RowFactory;

/**
 * The start of a real-time task of an exactly-once job that owns PARTITIONS source partitions: the driver's
 * fenceOnStart, then one task through ExactlyOnceWriter whose first rows are one per partition, then ROWS more per
 * partition. Times how long the task took until every partition's first row was handed over and until every
 * record was visible to a read_committed reader, before the task ends (the lanes' timers commit).
 *
 * Prints `FENCE ms` (the driver's fencing of every partition's id, the JVM's first admin call), `FENCE2 ms` (the
 * same again, warm), `HANDED ms` (every first row handed to the writer), `VISIBLE n ms` (records a read_committed
 * reader saw before the task ended, and when it had them all), `TASK ok` or `TASK failed <error>`.
 *
 * Arguments: target bootstrap servers, source bootstrap servers, remote topic, source topic, transactional id
 * prefix, group, run id, partitions, rows per partition.
 */
public class LaneStarts {
    public static void main(String[] args) throws Exception {
        Map<String, String> settings = new HashMap<>();
        settings.put("producer.bootstrap.servers", args[0]);
        settings.put("producer.transaction.timeout.ms", "60000");
        settings.put("producer.linger.ms", "0");
        settings.put("source.bootstrap.servers", args[1]);
        settings.put("transactional.id.prefix", args[4]);
        settings.put("group", args[5]);
        settings.put("run", args[6]);
        settings.put("generation", "1");
        settings.put("transaction.interval.ms", "10");
        settings.put("offset.lag.max", "100");
        String remote = args[2];
        String source = args[3];
        int partitions = Integer.parseInt(args[7]);
        int rows = Integer.parseInt(args[8]);
        List<String> sources = new ArrayList<>();
        List<String> remotes = new ArrayList<>();
        List<Integer> parts = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            sources.add(source);
            remotes.add(remote);
            parts.add(p);
        }
        long t0 = System.nanoTime();
        ExactlyOnceWriter.fenceOnStart(settings, sources, remotes, parts);
        System.out.println("FENCE " + (System.nanoTime() - t0) / 1_000_000);
        t0 = System.nanoTime();
        ExactlyOnceWriter.fenceOnStart(settings, sources, remotes, parts);
        System.out.println("FENCE2 " + (System.nanoTime() - t0) / 1_000_000);
        ExactlyOnceWriter writer = new ExactlyOnceWriter(settings);
        try {
            long start = System.nanoTime();
            writer.open(0, 0);
            for (long offset = 0; offset <= rows; offset++) {
                for (int p = 0; p < partitions; p++) {
                    byte[] value = ("r" + offset).getBytes(StandardCharsets.UTF_8);
                    writer.process(RowFactory.create(remote, p, null, value, null, source, offset,
                            System.currentTimeMillis()));
                }
                if (offset == 0) {
                    System.out.println("HANDED " + (System.nanoTime() - start) / 1_000_000);
                }
            }
            long expected = (long) (rows + 1) * partitions;
            long seen = visible(args[0], remote, partitions, expected);
            System.out.println("VISIBLE " + seen + " " + (System.nanoTime() - start) / 1_000_000);
            writer.close(null);
            System.out.println("TASK ok");
        } catch (RuntimeException e) {
            System.out.println("TASK failed " + e);
        }
        System.out.flush();
        System.exit(0);
    }

    /** Records of the remote topic a read_committed consumer sees within 120 s (stops once it has them all). */
    private static long visible(String bootstrap, String topic, int partitions, long expected) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("isolation.level", "read_committed");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long seen = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 120_000L;
            while (seen < expected && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> got = consumer.poll(Duration.ofMillis(100));
                seen += got.count();
            }
        }
        return seen;
    }
}
