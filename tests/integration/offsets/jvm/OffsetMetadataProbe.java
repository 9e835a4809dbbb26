import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.io.BufferedReader;
import java.io.InputStreamReader;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * Commits and reads consumer group offsets with their metadata through Kafka's Java Admin client, the way Java
 * consumers, Kafka Streams and MirrorMaker 2 do, with every metadata string given and printed as the hex of its
 * UTF-8 bytes (so a trailing NUL or an appended byte shows).
 *
 *   write BOOTSTRAP GROUP   stdin: one "TOPIC PARTITION OFFSET HEX" a line; commits them all in one call
 *   read BOOTSTRAP GROUP    stdout: one "TOPIC PARTITION OFFSET HEX CHARS" a line ("-" for null metadata)
 */
public final class OffsetMetadataProbe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        try (Admin admin = Admin.create(props)) {
            if (args[0].equals("write")) {
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                for (String line; (line = in.readLine()) != null; ) {
                    if (line.isBlank()) continue;
                    String[] f = line.trim().split(" ");
                    String meta = f.length > 3 ? new String(unhex(f[3]), StandardCharsets.UTF_8) : "";
                    offsets.put(new TopicPartition(f[0], Integer.parseInt(f[1])),
                            new OffsetAndMetadata(Long.parseLong(f[2]), meta));
                }
                admin.alterConsumerGroupOffsets(args[2], offsets).all().get(60, TimeUnit.SECONDS);
            } else {
                Map<TopicPartition, OffsetAndMetadata> got =
                        admin.listConsumerGroupOffsets(args[2]).partitionsToOffsetAndMetadata().get(60, TimeUnit.SECONDS);
                Map<String, String> lines = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : got.entrySet()) {
                    OffsetAndMetadata om = e.getValue();
                    String meta = om == null ? null : om.metadata();
                    String hex = meta == null ? "-" : hex(meta.getBytes(StandardCharsets.UTF_8));
                    String key = e.getKey().topic() + " " + e.getKey().partition();
                    lines.put(key, key + " " + (om == null ? -1 : om.offset()) + " " + (hex.isEmpty() ? "." : hex)
                            + " " + (meta == null ? -1 : meta.length()));
                }
                lines.values().forEach(System.out::println);
            }
        }
    }

    private static byte[] unhex(String s) {
        if (s.equals(".")) return new byte[0];
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    private static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) sb.append(String.format("%02x", x));
        return sb.toString();
    }
}
