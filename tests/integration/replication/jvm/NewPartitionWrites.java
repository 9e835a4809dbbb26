import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import io.kmirror.replication.PartitionLeaders;

/**
 * Creates topics one after the other and writes to each at once, the way the job's sink meets a remote topic its
 * keeper has just created: an idempotent producer with the job's interceptor (or, given "none", without it),
 * several batches in flight per partition. Prints "acknowledged=N failed=N".
 *
 * With "ahead" the leaders of all the topics are asked for ahead, as the job's driver does for the remote topics as
 * a query starts (PartitionLeaders.confirmAhead), here from before the topics exist: each is written to the moment
 * it is created, while that asking goes on.
 *
 * Args: bootstrap, topic prefix, topics, partitions, records per partition, interceptor class or "none",
 * "each" or "ahead".
 */
public final class NewPartitionWrites {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        int topics = Integer.parseInt(args[2]);
        int partitions = Integer.parseInt(args[3]);
        int perPartition = Integer.parseInt(args[4]);
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        props.put("enable.idempotence", "true");
        props.put("acks", "all");
        props.put("linger.ms", "5");
        props.put("batch.size", "16384");
        props.put("delivery.timeout.ms", "20000"); // a stuck batch fails in 20 s, not the default 120
        props.put("request.timeout.ms", "10000");
        if (!args[5].equals("none")) {
            props.put("interceptor.classes", args[5]);
        }
        boolean ahead = args[6].equals("ahead");
        AtomicLong acknowledged = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        byte[] value = new byte[1000];
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", (Object) bootstrap));
                KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            if (ahead) {
                List<String> names = new ArrayList<>();
                for (int t = 0; t < topics; t++) {
                    names.add(prefix + t);
                }
                PartitionLeaders.confirmAhead(Map.of("bootstrap.servers", bootstrap), names);
            }
            for (int t = 0; t < topics; t++) {
                String topic = prefix + t;
                admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get();
                for (int i = 0; i < partitions * perPartition; i++) {
                    producer.send(new ProducerRecord<>(topic, i % partitions, null, value), (metadata, e) -> {
                        (e == null ? acknowledged : failed).incrementAndGet();
                    });
                }
            }
            producer.flush();
        }
        System.out.println("acknowledged=" + acknowledged.get() + " failed=" + failed.get());
    }
}
