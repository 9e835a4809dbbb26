import io.kmirror.replication.ExactlyOnceWriter;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.RowFactory;

/**
 * One executor of an exactly-once job, driven from stdin: each line `FROM TO` is one real-time task of source
 * partition 0 writing the rows of source offsets FROM..TO-1 through ExactlyOnceWriter (open, process, close), as
 * a Spark task does; it prints `TASK ok FROM TO` or `TASK failed FROM TO <error>` (log lines may come between).
 * Lanes are cached per JVM and run, so two of these processes with the same settings are two executors of one
 * query run: a task of the partition on one, then on the other, then on the first again is a partition that moved
 * between executors and came back.
 *
 * Arguments: target bootstrap servers, remote topic, source topic, transactional id prefix, group, run id.
 */
public class PartitionMoves {
    public static void main(String[] args) throws Exception {
        Map<String, String> settings = new HashMap<>();
        settings.put("producer.bootstrap.servers", args[0]);
        settings.put("producer.transaction.timeout.ms", "60000");
        settings.put("transactional.id.prefix", args[3]);
        settings.put("group", args[4]);
        settings.put("run", args[5]);
        settings.put("generation", "1");
        settings.put("transaction.interval.ms", "100000"); // commits only at the task's end: deterministic
        settings.put("offset.lag.max", "100");
        String remote = args[1];
        String source = args[2];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        long epoch = 0;
        while ((line = in.readLine()) != null) {
            String[] range = line.trim().split(" ");
            long from = Long.parseLong(range[0]);
            long to = Long.parseLong(range[1]);
            ExactlyOnceWriter writer = new ExactlyOnceWriter(settings);
            try {
                writer.open(0, epoch++);
                for (long offset = from; offset < to; offset++) {
                    byte[] value = ("r" + offset).getBytes(StandardCharsets.UTF_8);
                    writer.process(RowFactory.create(remote, 0, null, value, null, source,
                            offset, System.currentTimeMillis()));
                }
                writer.close(null);
                System.out.println("TASK ok " + from + " " + to);
            } catch (RuntimeException e) {
                try {
                    writer.close(e);
                } catch (RuntimeException ignored) {
                    // the lane is dropped either way
                }
                System.out.println("TASK failed " + from + " " + to + " " + e);
            }
            System.out.flush();
        }
        System.exit(0);
    }
}
