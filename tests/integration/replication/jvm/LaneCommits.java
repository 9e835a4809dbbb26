import io.kmirror.replication.ExactlyOnceWriter;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.spark.sql.RowFactory;

/**
 * One long real-time task of an exactly-once job writing PARTITIONS source partitions round-robin through
 * ExactlyOnceWriter, with a transaction interval of 1 ms: the lanes commit on their pool threads all the time, so
 * most rows come while their lane is committing and go through its queue. Before the task ends, a read_committed
 * consumer counts what is visible (the commits happen while the task runs, not at its end); then the task ends.
 *
 * Prints `VISIBLE n` (records a read_committed reader saw before the task ended), `QUEUED n` (rows handed over
 * while their lane committed), `STATS <the lanes' commit figures>`, `TASK ok` or `TASK failed <error>`.
 *
 * Arguments: target bootstrap servers, remote topic, source topic, transactional id prefix, group, run id,
 * partitions, rows per partition.
 */
public class LaneCommits {
    public static void main(String[] args) throws Exception {
        Map<String, String> settings = new HashMap<>();
        settings.put("producer.bootstrap.servers", args[0]);
        settings.put("producer.transaction.timeout.ms", "60000");
        settings.put("producer.linger.ms", "0");
        settings.put("transactional.id.prefix", args[3]);
        settings.put("group", args[4]);
        settings.put("run", args[5]);
        settings.put("generation", "1");
        settings.put("transaction.interval.ms", "1");
        settings.put("offset.lag.max", "100");
        String remote = args[1];
        String source = args[2];
        int partitions = Integer.parseInt(args[6]);
        int rows = Integer.parseInt(args[7]);
        ExactlyOnceWriter writer = new ExactlyOnceWriter(settings);
        try {
            writer.open(0, 0);
            for (long offset = 0; offset < rows; offset++) {
                for (int p = 0; p < partitions; p++) {
                    byte[] value = ("r" + offset).getBytes(StandardCharsets.UTF_8);
                    writer.process(RowFactory.create(remote, p, null, value, null, source, offset,
                            System.currentTimeMillis()));
                }
                if (offset % 50 == 49) {
                    Thread.sleep(1); // a real-time task's rows come as the source's fetches do
                }
            }
            System.out.println("VISIBLE " + visible(args[0], remote, partitions, (long) rows * partitions));
            System.out.println("QUEUED " + ExactlyOnceWriter.queuedRows());
            writer.close(null);
            System.out.println("STATS " + ExactlyOnceWriter.commitStats());
            System.out.println("TASK ok");
        } catch (RuntimeException e) {
            System.out.println("TASK failed " + e);
        }
        System.out.flush();
        System.exit(0);
    }

    /** Records of the remote topic a read_committed consumer sees within 30 s (stops once it has them all). */
    private static long visible(String bootstrap, String topic, int partitions, long expected) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("isolation.level", "read_committed");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long seen = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            java.util.List<TopicPartition> tps = new java.util.ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 30_000L;
            while (seen < expected && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> got = consumer.poll(Duration.ofMillis(200));
                seen += got.count();
            }
        }
        return seen;
    }
}
