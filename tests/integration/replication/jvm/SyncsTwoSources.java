import io.kmirror.replication.ExactlyOnceWriter;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.RowFactory;

/**
 * Two exactly-once flows in one JVM (an application's driver or executor), from two source clusters, naming the
 * same target alias: each writes its offset-syncs to `SYNCS` on its own source cluster (MM2's syncs location
 * `source`, sent after each commit). Each flow writes ROWS rows of its source topic's partition 0.
 *
 * Prints `TASK ok` or `TASK failed <error>`.
 *
 * Arguments: target bootstrap servers, syncs topic, then per flow (twice): its source cluster's bootstrap servers,
 * its source topic, its remote topic, its transactional id prefix, its group; then rows.
 */
public class SyncsTwoSources {
    public static void main(String[] args) throws Exception {
        int rows = Integer.parseInt(args[12]);
        try {
            for (int flow = 0; flow < 2; flow++) {
                int at = 2 + flow * 5;
                Map<String, String> settings = new HashMap<>();
                settings.put("producer.bootstrap.servers", args[0]);
                settings.put("producer.transaction.timeout.ms", "60000");
                settings.put("syncs.topic", args[1]);
                settings.put("syncs.client.bootstrap.servers", args[at]);
                settings.put("transactional.id.prefix", args[at + 3]);
                settings.put("group", args[at + 4]);
                settings.put("run", "run-1");
                settings.put("generation", "1");
                settings.put("offset.lag.max", "100");
                ExactlyOnceWriter writer = new ExactlyOnceWriter(settings);
                writer.open(0, 0);
                for (long offset = 0; offset < rows; offset++) {
                    byte[] value = ("r" + offset).getBytes(StandardCharsets.UTF_8);
                    writer.process(RowFactory.create(args[at + 2], 0, null, value, null, args[at + 1], offset,
                            System.currentTimeMillis()));
                }
                writer.close(null);
            }
            ExactlyOnceWriter.flushAll();
            System.out.println("TASK ok");
        } catch (RuntimeException e) {
            System.out.println("TASK failed " + e);
        }
        System.out.flush();
        System.exit(0);
    }
}
