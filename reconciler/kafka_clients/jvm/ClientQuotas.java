package io.kmirror.quotas;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.clients.admin.DescribeClientQuotasOptions;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

/**
 * Reads or sets Kafka client quotas (KIP-546) for kmirror, whose Python client (librdkafka) has no such call.
 *
 * Reads ONE JSON request on stdin, so that the cluster's client properties (secrets included) never appear on a
 * command line or in a file:
 *   {"properties": {"bootstrap.servers": "...", ...}, "timeout_ms": 30000, "op": "describe",
 *    "client_ids": ["a", "b"]}
 *   {"properties": {...}, "timeout_ms": 30000, "op": "alter",
 *    "alterations": {"a": {"consumer_byte_rate": 1.0E7, "producer_byte_rate": null}}}
 * and prints ONE JSON answer on stdout:
 *   describe: {"quotas": {"a": {"consumer_byte_rate": 1.0E7}}}  (ids without quotas left out)
 *   alter:    {"results": {"a": {"ok": true}, "b": {"ok": false, "error": "...", "transient": false}}}
 *   either, when the whole call failed: {"error": "...", "transient": true|false}
 * Exit 0 when an answer was printed (per-id failures included), 2 on a request it cannot read.
 *
 * Must not: print a property value, a stack trace or anything but the one answer on stdout; depend on anything but
 * kafka-clients (the JSON is read and written here by hand).
 */
public final class ClientQuotas {
    private static final String CLIENT_ID = ClientQuotaEntity.CLIENT_ID;

    private ClientQuotas() {}

    public static void main(String[] args) throws IOException {
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        System.setOut(new PrintStream(new ByteArrayOutputStream())); // nothing else may write to the answer
        Map<String, Object> request;
        try {
            Object parsed = new Json(readAll(System.in)).document();
            if (!(parsed instanceof Map)) {
                throw new IllegalArgumentException("the request is not a JSON object");
            }
            request = asMap(parsed, "request");
        } catch (IllegalArgumentException e) {
            out.println(failure("bad request: " + e.getMessage(), false));
            System.exit(2);
            return;
        }
        String answer;
        try {
            answer = run(request);
        } catch (IllegalArgumentException e) {
            out.println(failure("bad request: " + e.getMessage(), false));
            System.exit(2);
            return;
        }
        out.println(answer);
        out.flush();
        System.exit(0); // the admin's threads are closed, but a stray non-daemon thread must not keep the JVM up
    }

    static String run(Map<String, Object> request) {
        Map<String, Object> properties = asMap(request.get("properties"), "properties");
        Object timeoutValue = request.get("timeout_ms");
        int timeoutMs = timeoutValue instanceof Double ? (int) (double) (Double) timeoutValue : 30000;
        String op = String.valueOf(request.get("op"));
        Properties props = new Properties();
        for (Map.Entry<String, Object> e : properties.entrySet()) {
            if (!(e.getValue() instanceof String)) {
                throw new IllegalArgumentException("property " + e.getKey() + " is not a string");
            }
            props.put(e.getKey(), e.getValue());
        }
        props.put("request.timeout.ms", String.valueOf(timeoutMs));
        props.put("default.api.timeout.ms", String.valueOf(timeoutMs));
        props.putIfAbsent("client.id", "kmirror-quotas");
        if ("describe".equals(op)) {
            List<String> ids = new ArrayList<>();
            for (Object id : asList(request.get("client_ids"), "client_ids")) {
                ids.add(asString(id, "client_ids[]"));
            }
            return withAdmin(props, admin -> describe(admin, ids, timeoutMs));
        }
        if ("alter".equals(op)) {
            Map<String, Object> alterations = asMap(request.get("alterations"), "alterations");
            List<ClientQuotaAlteration> batch = new ArrayList<>();
            for (Map.Entry<String, Object> e : alterations.entrySet()) {
                List<ClientQuotaAlteration.Op> ops = new ArrayList<>();
                for (Map.Entry<String, Object> q : asMap(e.getValue(), "alterations." + e.getKey()).entrySet()) {
                    Object v = q.getValue();
                    if (v != null && !(v instanceof Double)) {
                        throw new IllegalArgumentException(q.getKey() + " of " + e.getKey() + " is not a number");
                    }
                    ops.add(new ClientQuotaAlteration.Op(q.getKey(), (Double) v));
                }
                batch.add(new ClientQuotaAlteration(entity(e.getKey()), ops));
            }
            return withAdmin(props, admin -> alter(admin, batch, timeoutMs));
        }
        throw new IllegalArgumentException("op must be describe or alter, not " + op);
    }

    interface Call {
        String apply(Admin admin) throws Exception;
    }

    private static String withAdmin(Properties props, Call call) {
        try (Admin admin = Admin.create(props)) {
            return call.apply(admin);
        } catch (Exception e) {
            Throwable cause = unwrap(e);
            return failure(describe(cause), cause instanceof RetriableException
                    || cause instanceof java.util.concurrent.TimeoutException);
        }
    }

    private static String describe(Admin admin, List<String> ids, int timeoutMs) throws Exception {
        ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(
                List.of(ClientQuotaFilterComponent.ofEntityType(CLIENT_ID)));
        Map<ClientQuotaEntity, Map<String, Double>> all = admin
                .describeClientQuotas(filter, new DescribeClientQuotasOptions().timeoutMs(timeoutMs))
                .entities()
                .get(timeoutMs + 5000L, TimeUnit.MILLISECONDS);
        StringBuilder json = new StringBuilder("{\"quotas\": {");
        boolean first = true;
        for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : all.entrySet()) {
            String id = e.getKey().entries().get(CLIENT_ID);
            if (id == null || e.getKey().entries().size() != 1 || !ids.contains(id) || e.getValue().isEmpty()) {
                continue;
            }
            json.append(first ? "" : ", ").append(quote(id)).append(": {");
            first = false;
            boolean firstQuota = true;
            for (Map.Entry<String, Double> q : e.getValue().entrySet()) {
                json.append(firstQuota ? "" : ", ").append(quote(q.getKey())).append(": ").append(number(q.getValue()));
                firstQuota = false;
            }
            json.append("}");
        }
        return json.append("}}").toString();
    }

    private static String alter(Admin admin, List<ClientQuotaAlteration> batch, int timeoutMs) {
        Map<ClientQuotaEntity, KafkaFuture<Void>> futures = admin
                .alterClientQuotas(batch, new AlterClientQuotasOptions().timeoutMs(timeoutMs))
                .values();
        StringBuilder json = new StringBuilder("{\"results\": {");
        boolean first = true;
        for (ClientQuotaAlteration alteration : batch) {
            String id = alteration.entity().entries().get(CLIENT_ID);
            json.append(first ? "" : ", ").append(quote(id)).append(": ");
            first = false;
            try {
                futures.get(alteration.entity()).get(timeoutMs + 5000L, TimeUnit.MILLISECONDS);
                json.append("{\"ok\": true}");
            } catch (Exception e) {
                Throwable cause = unwrap(e);
                boolean transientError = cause instanceof RetriableException
                        || cause instanceof java.util.concurrent.TimeoutException;
                json.append("{\"ok\": false, \"error\": ").append(quote(describe(cause)))
                        .append(", \"transient\": ").append(transientError).append("}");
            }
        }
        return json.append("}}").toString();
    }

    private static ClientQuotaEntity entity(String clientId) {
        Map<String, String> entries = new LinkedHashMap<>();
        entries.put(CLIENT_ID, clientId);
        return new ClientQuotaEntity(entries);
    }

    private static Throwable unwrap(Throwable e) {
        Throwable t = e;
        while ((t instanceof ExecutionException || t instanceof java.util.concurrent.CompletionException)
                && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    /** The error's class and message, one line: what the broker or the client said, never a stack trace. */
    private static String describe(Throwable t) {
        if (t instanceof java.util.concurrent.TimeoutException) {
            return "TimeoutException: no answer within the timeout";
        }
        String message = t.getMessage() == null ? "" : ": " + t.getMessage().replace('\n', ' ');
        return t.getClass().getSimpleName() + message;
    }

    static String failure(String message, boolean transientError) {
        return "{\"error\": " + quote(message) + ", \"transient\": " + transientError + "}";
    }

    private static String number(Double value) {
        if (value == null || value.isNaN() || value.isInfinite()) {
            return "null";
        }
        return value.toString();
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }

    private static String readAll(InputStream in) throws IOException {
        return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> asMap(Object value, String where) {
        if (!(value instanceof Map)) {
            throw new IllegalArgumentException(where + " must be a JSON object");
        }
        return (Map<String, Object>) value;
    }

    @SuppressWarnings("unchecked")
    private static Collection<Object> asList(Object value, String where) {
        if (!(value instanceof List)) {
            throw new IllegalArgumentException(where + " must be a JSON array");
        }
        return (List<Object>) value;
    }

    private static String asString(Object value, String where) {
        if (!(value instanceof String)) {
            throw new IllegalArgumentException(where + " must be a string");
        }
        return (String) value;
    }

    /** The JSON subset the request uses: objects, arrays, strings, numbers (as Double), true, false, null. */
    static final class Json {
        private final String s;
        private int i;

        Json(String s) {
            this.s = s;
        }

        Object document() {
            Object v = value();
            space();
            if (i != s.length()) {
                throw error("trailing characters");
            }
            return v;
        }

        private Object value() {
            space();
            if (i >= s.length()) {
                throw error("unexpected end");
            }
            char c = s.charAt(i);
            if (c == '{') {
                return object();
            }
            if (c == '[') {
                return array();
            }
            if (c == '"') {
                return string();
            }
            if (s.startsWith("true", i)) {
                i += 4;
                return Boolean.TRUE;
            }
            if (s.startsWith("false", i)) {
                i += 5;
                return Boolean.FALSE;
            }
            if (s.startsWith("null", i)) {
                i += 4;
                return null;
            }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            if (start == i) {
                throw error("unexpected character");
            }
            try {
                return Double.valueOf(s.substring(start, i));
            } catch (NumberFormatException e) {
                throw error("bad number");
            }
        }

        private Map<String, Object> object() {
            Map<String, Object> map = new LinkedHashMap<>();
            i++;
            space();
            if (peek() == '}') {
                i++;
                return map;
            }
            while (true) {
                space();
                if (peek() != '"') {
                    throw error("expected a key");
                }
                String key = string();
                space();
                expect(':');
                map.put(key, value());
                space();
                if (peek() == ',') {
                    i++;
                } else {
                    expect('}');
                    return map;
                }
            }
        }

        private List<Object> array() {
            List<Object> list = new ArrayList<>();
            i++;
            space();
            if (peek() == ']') {
                i++;
                return list;
            }
            while (true) {
                list.add(value());
                space();
                if (peek() == ',') {
                    i++;
                } else {
                    expect(']');
                    return list;
                }
            }
        }

        private String string() {
            i++; // the opening quote
            StringBuilder b = new StringBuilder();
            while (i < s.length()) {
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                if (i >= s.length()) {
                    break;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': b.append('\n'); break;
                    case 'r': b.append('\r'); break;
                    case 't': b.append('\t'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'u':
                        if (i + 4 > s.length()) {
                            throw error("bad \\u escape");
                        }
                        try {
                            b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        } catch (NumberFormatException ex) {
                            throw error("bad \\u escape");
                        }
                        i += 4;
                        break;
                    default: b.append(e); // \" \\ \/
                }
            }
            throw error("unterminated string");
        }

        private char peek() {
            return i < s.length() ? s.charAt(i) : '\0';
        }

        private void expect(char c) {
            if (peek() != c) {
                throw error("expected '" + c + "'");
            }
            i++;
        }

        private void space() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        /** Names only the position: the request holds secrets, so no part of it goes into a message. */
        private IllegalArgumentException error(String what) {
            return new IllegalArgumentException("invalid JSON at character " + i + " (" + what + ")");
        }
    }
}
