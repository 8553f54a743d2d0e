package io.pushrelay.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URL;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.SecureRandom;
import java.security.cert.CertificateFactory;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

import org.json.JSONArray;
import org.json.JSONObject;

/**
 * The relay the tests run against, started by scripts/test/android-client.sh: a debug
 * {@code push-relay serve} on an embedded PostgreSQL delivering to {@code push-relay sandbox}.
 * App {@code support} sends full pushes, app {@code secure} encrypted ones; both take user JWTs.
 * Where they are comes from the environment the script sets.
 */
final class Relay {
    static final String URL = environment("PUSH_RELAY_TEST_URL");
    static final String ADMIN_KEY = environment("PUSH_RELAY_TEST_ADMIN_KEY");
    static final String WEBHOOK_SECRET = environment("PUSH_RELAY_TEST_WEBHOOK_SECRET");
    static final String SANDBOX_URL = environment("PUSH_RELAY_TEST_SANDBOX_URL");
    static final String SANDBOX_CA = environment("PUSH_RELAY_TEST_SANDBOX_CA");

    private Relay() {}

    private static String environment(String name) {
        String value = System.getenv(name);
        if (value == null || value.isEmpty()) {
            throw new IllegalStateException(name + " is not set: run the tests with scripts/test/android-client.sh");
        }
        return value;
    }

    /** The HS256 key of an app's user JWTs (its {@code user_tokens} file, trimmed). */
    static byte[] userTokenKey(String app) {
        try {
            String file = environment("PUSH_RELAY_TEST_USER_TOKEN_KEY_" + app.toUpperCase());
            return Files.readString(Path.of(file)).trim().getBytes(StandardCharsets.UTF_8);
        } catch (IOException error) {
            throw new IllegalStateException(error);
        }
    }

    /** A name no other test uses. */
    static String unique(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().substring(0, 12);
    }

    /** A made-up FCM registration token. */
    static String fcmToken() {
        return unique("fcm") + ":APA91b" + UUID.randomUUID().toString().replace("-", "");
    }

    /** A client of {@code app} whose callbacks run on {@code callbacks}. */
    static PushRelayClient client(String app, ExecutorService callbacks, PushKeyStore keys) {
        return new PushRelayClient(configuration(app, keys), callbacks);
    }

    static PushRelayClient.Configuration configuration(String app, PushKeyStore keys) {
        return PushRelayClient.Configuration.builder(URL, app)
            .requestTimeout(30, TimeUnit.SECONDS)
            .streamIdleTimeout(10, TimeUnit.SECONDS)
            .pushKeys(keys)
            .locale("en-GB")
            .build();
    }

    /** The app's "main thread": one thread, as Android's. */
    static ExecutorService mainThread() {
        return Executors.newSingleThreadExecutor(work -> {
            Thread thread = new Thread(work, "test-main");
            thread.setDaemon(true);
            return thread;
        });
    }

    /** One HTTP answer. */
    record Answer(int status, String body, Map<String, String> headers) {
        JSONObject json() throws Exception {
            return new JSONObject(body);
        }
    }

    /** A request to the relay as the helpdesk or an operator makes it ({@code credential} may be null). */
    static Answer request(String method, String path, String credential, String body) {
        return request(method, path, credential, body, Map.of());
    }

    /** {@link #request(String, String, String, String)} with more request headers. */
    static Answer request(String method, String path, String credential, String body, Map<String, String> headers) {
        try {
            HttpURLConnection connection = (HttpURLConnection) new URL(URL + path).openConnection();
            connection.setRequestMethod(method);
            connection.setConnectTimeout(30000);
            connection.setReadTimeout(60000);
            if (credential != null) connection.setRequestProperty("Authorization", "Bearer " + credential);
            headers.forEach(connection::setRequestProperty);
            if (body != null) {
                connection.setDoOutput(true);
                connection.setRequestProperty("Content-Type", "application/json");
                connection.getOutputStream().write(body.getBytes(StandardCharsets.UTF_8));
            }
            int status = connection.getResponseCode();
            var input = status >= 400 ? connection.getErrorStream() : connection.getInputStream();
            String text = input == null ? "" : new String(input.readAllBytes(), StandardCharsets.UTF_8);
            Map<String, String> answerHeaders = new HashMap<>();
            connection.getHeaderFields().forEach((name, values) -> {
                if (name != null) answerHeaders.put(name.toLowerCase(), values.get(0));
            });
            return new Answer(status, text, answerHeaders);
        } catch (IOException error) {
            throw new AssertionError(method + " " + path + ": " + error, error);
        }
    }

    /** The helpdesk's webhook: a reply on {@code ticket} to Android {@code tokens}; the notification id. */
    static long reply(String app, String ticket, String... tokens) throws Exception {
        JSONArray devices = new JSONArray();
        for (String token : tokens) devices.put(new JSONObject().put("identifier", token).put("type", "android"));
        JSONObject notification = new JSONObject().put("title", "Agent replied").put("body", "Reply on " + ticket).put("ticket_id", ticket);
        Answer answer = request("POST", "/v1/webhooks/zendesk/" + app + "/" + WEBHOOK_SECRET, null,
            new JSONObject().put("devices", devices).put("notification", notification).toString());
        assertEquals(202, answer.status(), answer.body());
        return answer.json().getLong("notification_id");
    }

    /**
     * {@link #reply}, returning once the relay's polls show it. The relay answers an unchanged poll
     * 304 from the ETag it kept for the user until the change's announcement (pg_notify) comes back
     * to it, a moment after the webhook's 202 (docs/architecture.md): a test whose next step is one
     * poll waits for that, here by polling with the ETag of the counts before the reply until it
     * is no longer answered 304.
     */
    static long replySeenByPolls(String app, String ticket, String user, TokenIssuer issuer, String... tokens) throws Exception {
        String path = "/v1/apps/" + app + "/users/" + Transport.encodeSegment(user) + "/unread";
        Answer before = request("GET", path, issuer.token(user, 600), null);  // without If-None-Match: read from the database
        assertEquals(200, before.status(), before.body());
        String etag = before.headers().get("etag");
        long notification = reply(app, ticket, tokens);
        Eventually.eventually("a poll of " + user + " with the ETag before the reply is answered 200", () -> {
            try {
                Answer answer = request("GET", path, issuer.token(user, 600), null, Map.of("If-None-Match", etag));
                assertTrue(answer.status() == 200 || answer.status() == 304, answer.status() + " " + answer.body());
                return answer.status() == 200;
            } catch (Exception error) {
                throw new AssertionError(error);
            }
        });
        return notification;
    }

    /** The device as the relay's admin API shows it, or null (404). */
    static JSONObject device(String app, String token) throws Exception {
        Answer answer = request("GET", "/v1/apps/" + app + "/devices/" + Transport.encodeSegment(token), ADMIN_KEY, null);
        if (answer.status() == 404) return null;
        assertEquals(200, answer.status(), answer.body());
        return answer.json();
    }

    /** The user a device is registered to; null when none or when the device is not registered. */
    static String owner(String app, String token) throws Exception {
        JSONObject device = device(app, token);
        return device == null || device.isNull("user_id") ? null : device.getString("user_id");
    }

    /** {@code push_relay_unread_polls_total} of {@code app}, by answer. */
    static Map<String, Integer> polls(String app) {
        Map<String, Integer> counts = new HashMap<>();
        for (String line : request("GET", "/metrics", null, null).body().split("\n")) {
            if (!line.startsWith("push_relay_unread_polls_total{") || !line.contains("app=\"" + app + "\"")) continue;
            int start = line.indexOf("answer=\"") + 8;
            String answer = line.substring(start, line.indexOf('"', start));
            counts.put(answer, (int) Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1)));
        }
        return counts;
    }

    /** Unchanged polls the relay answered 304 from its kept ETag. */
    static int notModifiedPolls(String app) {
        Map<String, Integer> counts = polls(app);
        return counts.getOrDefault("cached", 0) + counts.getOrDefault("cached_routed", 0);
    }

    /** Polls the relay answered, any way. */
    static int allPolls(String app) {
        return polls(app).values().stream().mapToInt(Integer::intValue).sum();
    }

    private static HttpClient sandboxClient;

    /** An HTTPS client trusting the sandbox's CA (the sandbox speaks HTTP/2). */
    private static synchronized HttpClient sandbox() throws Exception {
        if (sandboxClient == null) {
            KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
            trust.load(null, null);
            byte[] pem = Files.readAllBytes(Path.of(SANDBOX_CA));
            trust.setCertificateEntry("sandbox", CertificateFactory.getInstance("X.509").generateCertificate(new ByteArrayInputStream(pem)));
            TrustManagerFactory factory = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            factory.init(trust);
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(null, factory.getTrustManagers(), new SecureRandom());
            sandboxClient = HttpClient.newBuilder().sslContext(context).build();
        }
        return sandboxClient;
    }

    /** The FCM messages the sandbox received for {@code token}: each one's data map, oldest first. */
    static List<Map<String, String>> fcmPushes(String token) {
        try {
            HttpResponse<String> response = sandbox().send(
                HttpRequest.newBuilder(URI.create(SANDBOX_URL + "/sandbox/received?service=fcm")).GET().build(),
                HttpResponse.BodyHandlers.ofString());
            assertEquals(200, response.statusCode(), response.body());
            List<Map<String, String>> pushes = new ArrayList<>();
            JSONArray requests = new JSONObject(response.body()).getJSONArray("requests");
            for (int index = 0; index < requests.length(); index++) {
                JSONObject message = new JSONObject(requests.getJSONObject(index).getString("body")).getJSONObject("message");
                if (!token.equals(message.optString("token", null))) continue;
                JSONObject data = message.getJSONObject("data");
                Map<String, String> map = new HashMap<>();
                for (var names = data.keys(); names.hasNext();) {
                    String name = names.next();
                    map.put(name, data.getString(name));
                }
                pushes.add(map);
            }
            return pushes;
        } catch (Exception error) {
            throw new AssertionError("reading the sandbox: " + error, error);
        }
    }
}
