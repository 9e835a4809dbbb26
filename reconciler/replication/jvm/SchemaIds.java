package io.kmirror.replication;

import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * Translates the schema id of records written with a Confluent serializer (Avro, JSON Schema, Protobuf: magic byte
 * 0, then the 4-byte big-endian id) from the source registry's id to the target registry's, in place, in the key
 * and in the value. A record without the magic byte costs a null check, a length check and one byte compare.
 *
 * The mapping starts from the ids the plan recorded (kmirror.schemas.ids, "source:target,..."); an id it does not
 * hold (a schema registered on the source while the job runs) is looked up on the source registry
 * (GET /schemas/ids/ID) and registered on the target under the record's TopicNameStrategy subject
 * (POST /subjects/TOPIC-key|value/versions, which returns the existing id when the target already holds the
 * schema), before the record is sent, so a new schema reaches the target registry before its first record. Each id
 * is resolved once per JVM (cached; reads are lock-free: the map is copied on write, which is rare).
 *
 * A registry that does not answer is retried for kmirror.schemas.retry.ms (default 60 s); then the send fails with
 * SchemaSyncError, an Error, so that the producer's interceptor chain (which logs and swallows Exceptions) cannot
 * send the record with an id that means nothing (or another schema) on the target: the task fails and Spark
 * retries it.
 *
 * Settings (producer configuration; values of header settings are credentials: never logged here):
 *   kmirror.schemas.source.url / kmirror.schemas.target.url       the registries' Confluent REST roots
 *   kmirror.schemas.source.auth.token / ...target.auth.token     the Authorization header's value ("Basic ..",
 *                                                                 "Bearer .."): named *token* so Spark redacts it
 *   kmirror.schemas.source.ssl.ca.pem / ...target.ssl.ca.pem     PEM CA certificates to trust (default: the JVM's)
 *   kmirror.schemas.ids                                           the plan's map, "source:target,..."
 *   kmirror.schemas.retry.ms                                      how long an unanswered registry is retried
 */
public final class SchemaIds {
    public static final String PREFIX = "kmirror.schemas.";
    static final byte MAGIC = 0;

    /** A send that cannot be translated: fails the task instead of writing a record with a foreign id. */
    public static final class SchemaSyncError extends Error {
        private static final long serialVersionUID = 1L;

        SchemaSyncError(String message) {
            super(message);
        }
    }

    /** What the translator asks the registries: HTTP in production, a fake in tests. */
    public interface Registries {
        /** The source's schema of `id` as the JSON body of GET /schemas/ids/ID. */
        String sourceSchema(int id) throws Exception;

        /** Register `body` (a POST /subjects/S/versions body) on the target under `subject`; the target's id. */
        int register(String subject, String body) throws Exception;
    }

    private final Registries registries;
    private final long retryMs;
    /** Sorted source ids and their target ids; replaced as a whole on write. */
    private volatile int[][] table = {new int[0], new int[0]};
    private long lookups;

    public SchemaIds(Registries registries, Map<Integer, Integer> initial, long retryMs) {
        this.registries = registries;
        this.retryMs = retryMs;
        for (Map.Entry<Integer, Integer> e : initial.entrySet()) {
            put(e.getKey(), e.getValue());
        }
    }

    /** One translator per registry pair in this JVM: every producer and exactly-once lane of a job shares it. */
    private static final java.util.concurrent.ConcurrentHashMap<String, SchemaIds> SHARED =
            new java.util.concurrent.ConcurrentHashMap<>();

    /**
     * The translator the producer configuration asks for (shared by every producer of this JVM with the same
     * registries), or null when it names no registries.
     */
    public static SchemaIds shared(Map<?, ?> configs) {
        Object source = configs.get(PREFIX + "source.url");
        Object target = configs.get(PREFIX + "target.url");
        if (source == null || target == null) {
            return null;
        }
        Map<String, Object> settings = new java.util.HashMap<>();
        for (Map.Entry<?, ?> e : configs.entrySet()) {
            settings.put(e.getKey().toString(), e.getValue());
        }
        return SHARED.computeIfAbsent(source + "|" + target, k -> fromConfig(settings));
    }

    /** A new translator for the producer configuration, or null when it names no registries. */
    public static SchemaIds fromConfig(Map<String, ?> configs) {
        Object source = configs.get(PREFIX + "source.url");
        Object target = configs.get(PREFIX + "target.url");
        if (source == null || target == null) {
            return null;
        }
        Map<String, String> sourceHeaders = new java.util.HashMap<>();
        Map<String, String> targetHeaders = new java.util.HashMap<>();
        for (Map.Entry<String, ?> e : configs.entrySet()) {
            if (e.getValue() == null) {
                continue;
            }
            if (e.getKey().equals(PREFIX + "source.auth.token")) {
                sourceHeaders.put("Authorization", e.getValue().toString());
            } else if (e.getKey().equals(PREFIX + "target.auth.token")) {
                targetHeaders.put("Authorization", e.getValue().toString());
            }
        }
        Map<Integer, Integer> initial = new java.util.HashMap<>();
        Object ids = configs.get(PREFIX + "ids");
        if (ids != null && !ids.toString().isEmpty()) {
            for (String pair : ids.toString().split(",")) {
                String[] parts = pair.split(":");
                initial.put(Integer.parseInt(parts[0].trim()), Integer.parseInt(parts[1].trim()));
            }
        }
        Object retry = configs.get(PREFIX + "retry.ms");
        long retryMs = retry == null ? 60_000L : Long.parseLong(retry.toString());
        Http http = new Http(source.toString(), sourceHeaders,
                client(source.toString(), configs.get(PREFIX + "source.ssl.ca.pem")), target.toString(), targetHeaders,
                client(target.toString(), configs.get(PREFIX + "target.ssl.ca.pem")));
        return new SchemaIds(http, initial, retryMs);
    }

    /** Rewrite the schema id of `key` and `value` (either may be null) of a record to `topic`, in place. */
    public void translate(String topic, byte[] key, byte[] value) {
        if (key != null && key.length >= 5 && key[0] == MAGIC) {
            rewrite(topic, true, key);
        }
        if (value != null && value.length >= 5 && value[0] == MAGIC) {
            rewrite(topic, false, value);
        }
    }

    private void rewrite(String topic, boolean isKey, byte[] bytes) {
        int source = ((bytes[1] & 0xff) << 24) | ((bytes[2] & 0xff) << 16) | ((bytes[3] & 0xff) << 8) | (bytes[4] & 0xff);
        int target = lookup(source);
        if (target == Integer.MIN_VALUE) {
            target = resolve(topic + (isKey ? "-key" : "-value"), source);
        }
        bytes[1] = (byte) (target >>> 24);
        bytes[2] = (byte) (target >>> 16);
        bytes[3] = (byte) (target >>> 8);
        bytes[4] = (byte) target;
    }

    /** The target id of `source`, or Integer.MIN_VALUE when not known yet. */
    int lookup(int source) {
        int[][] t = table;
        int i = Arrays.binarySearch(t[0], source);
        return i >= 0 ? t[1][i] : Integer.MIN_VALUE;
    }

    private synchronized void put(int source, int target) {
        int[][] t = table;
        int i = Arrays.binarySearch(t[0], source);
        if (i >= 0) {
            int[] values = t[1].clone();
            values[i] = target;
            table = new int[][] {t[0], values};
            return;
        }
        int at = -i - 1;
        int[] keys = new int[t[0].length + 1];
        int[] values = new int[keys.length];
        System.arraycopy(t[0], 0, keys, 0, at);
        System.arraycopy(t[1], 0, values, 0, at);
        keys[at] = source;
        values[at] = target;
        System.arraycopy(t[0], at, keys, at + 1, t[0].length - at);
        System.arraycopy(t[1], at, values, at + 1, t[1].length - at);
        table = new int[][] {keys, values};
    }

    /** Ids resolved through the registries by this translator (not from the plan's map). */
    public synchronized long lookups() {
        return lookups;
    }

    private synchronized int resolve(String subject, int source) {
        int known = lookup(source); // another thread may have resolved it while this one waited
        if (known != Integer.MIN_VALUE) {
            return known;
        }
        long deadline = System.currentTimeMillis() + retryMs;
        long backoff = 100L;
        String problem;
        while (true) {
            try {
                String schema = registries.sourceSchema(source);
                int target = registries.register(subject, registerBody(schema));
                put(source, target);
                lookups++;
                return target;
            } catch (Exception e) {
                problem = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
            }
            if (System.currentTimeMillis() + backoff > deadline) {
                throw new SchemaSyncError("schema id " + source + " of a record to " + subject.replaceAll("-(key|value)$", "")
                        + " could not be synced to the target registry (subject " + subject + "): " + problem);
            }
            try {
                Thread.sleep(backoff);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new SchemaSyncError("interrupted while syncing schema id " + source);
            }
            backoff = Math.min(backoff * 2, 5_000L);
        }
    }

    /** The POST /subjects/S/versions body for a GET /schemas/ids/ID answer: its schema, schemaType, references. */
    static String registerBody(String answer) {
        Map<String, String> fields = topLevel(answer);
        StringBuilder body = new StringBuilder("{\"schema\":").append(fields.get("schema"));
        if (fields.containsKey("schemaType")) {
            body.append(",\"schemaType\":").append(fields.get("schemaType"));
        }
        String references = fields.get("references");
        if (references != null && !references.replaceAll("\\s", "").equals("[]")) {
            body.append(",\"references\":").append(references);
        }
        return body.append('}').toString();
    }

    /** The raw JSON text of each top-level member of a JSON object (strings keep their quotes and escapes). */
    static Map<String, String> topLevel(String json) {
        Map<String, String> out = new java.util.HashMap<>();
        int i = skipSpace(json, 0);
        if (i >= json.length() || json.charAt(i) != '{') {
            throw new IllegalArgumentException("not a JSON object: " + abbreviate(json));
        }
        i = skipSpace(json, i + 1);
        while (i < json.length() && json.charAt(i) != '}') {
            int keyEnd = skipValue(json, i);
            String key = json.substring(i + 1, keyEnd - 1);
            i = skipSpace(json, keyEnd);
            i = skipSpace(json, i + 1); // the colon
            int end = skipValue(json, i);
            out.put(key, json.substring(i, end));
            i = skipSpace(json, end);
            if (i < json.length() && json.charAt(i) == ',') {
                i = skipSpace(json, i + 1);
            }
        }
        if (!out.containsKey("schema")) {
            throw new IllegalArgumentException("no schema in the registry's answer: " + abbreviate(json));
        }
        return out;
    }

    private static int skipSpace(String s, int i) {
        while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
            i++;
        }
        return i;
    }

    /** The index just after the JSON value starting at `i`. */
    private static int skipValue(String s, int i) {
        char c = s.charAt(i);
        if (c == '"') {
            int j = i + 1;
            while (s.charAt(j) != '"') {
                j += s.charAt(j) == '\\' ? 2 : 1;
            }
            return j + 1;
        }
        if (c == '{' || c == '[') {
            int depth = 0;
            int j = i;
            do {
                char d = s.charAt(j);
                if (d == '"') {
                    j = skipValue(s, j);
                    continue;
                }
                if (d == '{' || d == '[') {
                    depth++;
                } else if (d == '}' || d == ']') {
                    depth--;
                }
                j++;
            } while (depth > 0);
            return j;
        }
        int j = i;
        while (j < s.length() && ",}] \t\r\n".indexOf(s.charAt(j)) < 0) {
            j++;
        }
        return j;
    }

    private static String abbreviate(String s) {
        return s.length() <= 200 ? s : s.substring(0, 200) + "...";
    }

    /**
     * An HTTP/1.1 client for `url` trusting the PEM certificates `caPem` (null: the JVM's default trust store).
     *
     * HTTP/1.1 because registries speak it: the JDK client's default (HTTP/2) offers an h2c upgrade on every plain
     * request and builds its HPACK tables. A plain http:// registry gets a TLS context that never loads a trust
     * store: the JDK client otherwise loads the JVM's default one (parsing every CA certificate of cacerts) when it
     * is built, about 0.3 s of CPU and a few hundred methods for the JIT in every job JVM that translates, for a
     * context it never uses.
     */
    static HttpClient client(String url, Object caPem) {
        HttpClient.Builder builder = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10))
                .version(HttpClient.Version.HTTP_1_1);
        boolean plain = url.regionMatches(true, 0, "http://", 0, 7);
        if (plain && (caPem == null || caPem.toString().isBlank())) {
            try {
                javax.net.ssl.SSLContext unused = javax.net.ssl.SSLContext.getInstance("TLS");
                unused.init(new javax.net.ssl.KeyManager[0], new javax.net.ssl.TrustManager[0], null);
                return builder.sslContext(unused).sslParameters(new javax.net.ssl.SSLParameters()).build();
            } catch (java.security.GeneralSecurityException e) {
                return builder.build(); // the default context, as before
            }
        }
        if (caPem == null || caPem.toString().isBlank()) {
            return builder.build();
        }
        try {
            java.security.cert.CertificateFactory factory = java.security.cert.CertificateFactory.getInstance("X.509");
            java.security.KeyStore trust = java.security.KeyStore.getInstance(java.security.KeyStore.getDefaultType());
            trust.load(null, null);
            int n = 0;
            for (java.security.cert.Certificate cert : factory.generateCertificates(
                    new java.io.ByteArrayInputStream(caPem.toString().getBytes(StandardCharsets.US_ASCII)))) {
                trust.setCertificateEntry("ca-" + n++, cert);
            }
            javax.net.ssl.TrustManagerFactory tmf =
                    javax.net.ssl.TrustManagerFactory.getInstance(javax.net.ssl.TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(trust);
            javax.net.ssl.SSLContext context = javax.net.ssl.SSLContext.getInstance("TLS");
            context.init(null, tmf.getTrustManagers(), null);
            return builder.sslContext(context).build();
        } catch (Exception e) {
            throw new IllegalArgumentException("the schema registry's CA certificates could not be read: " + e);
        }
    }

    /** The registries over HTTP (java.net.http), with a 10 s timeout per request. */
    static final class Http implements Registries {
        private final HttpClient sourceClient;
        private final HttpClient targetClient;
        private final String sourceUrl;
        private final String targetUrl;
        private final List<String> sourceHeaders;
        private final List<String> targetHeaders;

        Http(String sourceUrl, Map<String, String> sourceHeaders, HttpClient sourceClient, String targetUrl,
                Map<String, String> targetHeaders, HttpClient targetClient) {
            this.sourceClient = sourceClient;
            this.targetClient = targetClient;
            this.sourceUrl = trim(sourceUrl);
            this.targetUrl = trim(targetUrl);
            this.sourceHeaders = flat(sourceHeaders);
            this.targetHeaders = flat(targetHeaders);
        }

        private static String trim(String url) {
            return url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
        }

        private static List<String> flat(Map<String, String> headers) {
            List<String> out = new ArrayList<>();
            out.add("Accept");
            out.add("application/vnd.schemaregistry.v1+json");
            for (Map.Entry<String, String> e : headers.entrySet()) {
                out.add(e.getKey());
                out.add(e.getValue());
            }
            return out;
        }

        private static String send(HttpClient client, HttpRequest.Builder request, List<String> headers, String what)
                throws Exception {
            request.timeout(Duration.ofSeconds(10)).headers(headers.toArray(new String[0]));
            HttpResponse<String> response = client.send(request.build(), HttpResponse.BodyHandlers.ofString());
            if (response.statusCode() != 200) {
                throw new IllegalStateException(what + ": HTTP " + response.statusCode() + ": " + abbreviate(response.body()));
            }
            return response.body();
        }

        @Override
        public String sourceSchema(int id) throws Exception {
            return send(sourceClient, HttpRequest.newBuilder(URI.create(sourceUrl + "/schemas/ids/" + id)).GET(), sourceHeaders,
                    "GET /schemas/ids/" + id + " on the source registry");
        }

        @Override
        public int register(String subject, String body) throws Exception {
            String path = "/subjects/" + URLEncoder.encode(subject, StandardCharsets.UTF_8) + "/versions";
            String answer = send(targetClient, HttpRequest.newBuilder(URI.create(targetUrl + path))
                    .header("Content-Type", "application/vnd.schemaregistry.v1+json")
                    .POST(HttpRequest.BodyPublishers.ofString(body)), targetHeaders,
                    "POST " + path + " on the target registry");
            return Integer.parseInt(topLevelId(answer));
        }

        /** N of the target's answer {"id": N} (Confluent's and Apicurio's ccompat answer). */
        private static String topLevelId(String answer) {
            int at = answer.indexOf("\"id\"");
            int colon = at < 0 ? -1 : answer.indexOf(':', at);
            if (colon < 0) {
                throw new IllegalStateException("no id in the target registry's answer: " + abbreviate(answer));
            }
            int i = skipSpace(answer, colon + 1);
            int j = i < answer.length() && answer.charAt(i) == '-' ? i + 1 : i;
            while (j < answer.length() && Character.isDigit(answer.charAt(j))) {
                j++;
            }
            return answer.substring(i, j);
        }
    }

    /**
     * For tests: `SchemaIds SOURCE_URL TARGET_URL [IDS]` translates stdin's records, one a line ("TOPIC KEYHEX
     * VALUEHEX", "-" for null), printing "KEYHEX VALUEHEX" and, last, "lookups N"; `SchemaIds bench N` prints the
     * nanoseconds per 1 KB record of translate() without the magic byte and with a known id ("plain NS magic NS").
     */
    public static void main(String[] args) throws Exception {
        if (args.length == 2 && args[0].equals("bench")) {
            bench(Integer.parseInt(args[1]));
            return;
        }
        Map<String, Object> configs = new java.util.HashMap<>();
        configs.put(PREFIX + "source.url", args[0]);
        configs.put(PREFIX + "target.url", args[1]);
        configs.put(PREFIX + "retry.ms", "2000");
        if (args.length > 2) {
            configs.put(PREFIX + "ids", args[2]);
        }
        SchemaIds ids = fromConfig(configs);
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null;) {
            if (line.isBlank()) {
                continue;
            }
            String[] parts = line.trim().split(" ");
            byte[] key = unhex(parts[1]);
            byte[] value = unhex(parts[2]);
            try {
                ids.translate(parts[0], key, value);
                out.append(hex(key)).append(' ').append(hex(value)).append('\n');
            } catch (SchemaSyncError e) {
                out.append("error ").append(e.getMessage()).append('\n');
            }
        }
        out.append("lookups ").append(ids.lookups()).append('\n');
        System.out.print(out);
    }

    private static void bench(int n) {
        Registries none = new Registries() {
            public String sourceSchema(int id) {
                throw new IllegalStateException("no registry in the benchmark");
            }

            public int register(String subject, String body) {
                throw new IllegalStateException("no registry in the benchmark");
            }
        };
        SchemaIds ids = new SchemaIds(none, Map.of(1, 2, 2, 1), 0);
        byte[][] plain = new byte[1024][];
        byte[][] magic = new byte[1024][];
        for (int i = 0; i < plain.length; i++) {
            plain[i] = new byte[1024];
            plain[i][0] = (byte) ('{' + (i & 1));
            magic[i] = new byte[1024];
            magic[i][4] = 1; // id 1 -> 2 -> 1 ... flips on every pass
        }
        long sink = 0;
        for (int round = 0; round < 3; round++) { // the last round is measured, the others warm the JIT
            long t0 = System.nanoTime();
            for (int i = 0; i < n; i++) {
                ids.translate("t", null, plain[i & 1023]);
            }
            long t1 = System.nanoTime();
            for (int i = 0; i < n; i++) {
                ids.translate("t", null, magic[i & 1023]);
            }
            long t2 = System.nanoTime();
            for (byte[] b : magic) {
                sink += b[4];
            }
            if (round == 2) {
                System.out.printf("plain %.2f magic %.2f (%d)%n", (t1 - t0) / (double) n, (t2 - t1) / (double) n, sink & 1);
            }
        }
    }

    private static byte[] unhex(String s) {
        if (s.equals("-")) {
            return null;
        }
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    private static String hex(byte[] b) {
        if (b == null) {
            return "-";
        }
        StringBuilder s = new StringBuilder();
        for (byte x : b) {
            s.append(String.format("%02x", x & 0xff));
        }
        return s.toString();
    }
}
