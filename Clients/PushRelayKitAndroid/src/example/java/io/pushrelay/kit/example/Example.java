package io.pushrelay.kit.example;

import io.pushrelay.kit.PushRelayClient;
import io.pushrelay.kit.PushRelayException;
import io.pushrelay.kit.UnreadCount;
import io.pushrelay.kit.UnreadListener;
import io.pushrelay.kit.UserTokenProvider;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.SecureRandom;
import java.util.Base64;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

import org.json.JSONArray;
import org.json.JSONObject;

/**
 * PushRelayKit for Android end to end against a running relay, on the JVM: alice's phone in the
 * foreground (live stream) and her tablet in the background (polling), two replies, a read on the
 * phone that the tablet follows, bob taking over the tablet, and a read-all. It plays the app (two
 * {@link PushRelayClient}s), the app's backend (it signs the user JWTs) and the helpdesk (it posts
 * the webhooks). Exits 1 when a step does not happen within --timeout seconds.
 */
public final class Example {
    private static final String USAGE = String.join("\n",
        "usage: Example --app APP --webhook-secret SECRET --user-token-key-file FILE",
        "               [--relay URL] [--delay SECONDS] [--token-lifetime SECONDS] [--timeout SECONDS]",
        "",
        "Runs PushRelayKit for Android against a relay: two devices, replies, a read, a user switch.",
        "  --relay URL                  the relay's base URL (http://127.0.0.1:8080)",
        "  --app APP                    the app's id in the relay's configuration",
        "  --webhook-secret SECRET      the app's webhook secret (the helpdesk's URL holds it)",
        "  --user-token-key-file FILE   the app's user_tokens key file: this example signs the user JWTs",
        "                               as the app's backend does",
        "  --delay SECONDS              seconds between the tablet's polls (1)",
        "  --token-lifetime SECONDS     lifetime of the user JWTs (600)",
        "  --timeout SECONDS            seconds to wait for each step (20)");

    private Example() {}

    public static void main(String[] arguments) throws Exception {
        String relay = "http://127.0.0.1:8080";
        String app = null;
        String secret = null;
        String keyFile = null;
        long delay = 1;
        long lifetime = 600;
        long timeout = 20;
        for (int index = 0; index < arguments.length; index++) {
            String name = arguments[index];
            if (name.equals("--help") || name.equals("-h")) {
                System.out.println(USAGE);
                return;
            }
            if (index + 1 >= arguments.length) fail("missing a value after " + name + "\n" + USAGE, 2);
            String value = arguments[++index];
            switch (name) {
                case "--relay": relay = value; break;
                case "--app": app = value; break;
                case "--webhook-secret": secret = value; break;
                case "--user-token-key-file": keyFile = value; break;
                case "--delay": delay = Long.parseLong(value); break;
                case "--token-lifetime": lifetime = Long.parseLong(value); break;
                case "--timeout": timeout = Long.parseLong(value); break;
                default: fail("unknown option " + name + "\n" + USAGE, 2);
            }
        }
        if (app == null || secret == null || keyFile == null) fail("--app, --webhook-secret and --user-token-key-file are required\n" + USAGE, 2);

        Backend backend = new Backend(new String(Files.readAllBytes(Paths.get(keyFile)), StandardCharsets.UTF_8).trim(), lifetime);
        Helpdesk helpdesk = new Helpdesk(relay + "/v1/webhooks/zendesk/" + app + "/" + secret);
        // The app's main thread: every callback of both clients runs here, one at a time.
        ExecutorService mainThread = Executors.newSingleThreadExecutor(work -> new Thread(work, "main-thread"));
        PushRelayClient.Configuration configuration = PushRelayClient.Configuration.builder(relay, app).build();
        System.out.println("PushRelayKit for Android example: relay " + relay + ", app " + app);
        Device phone = new Device("phone", new PushRelayClient(configuration, mainThread), timeout);
        Device tablet = new Device("tablet", new PushRelayClient(configuration, mainThread), timeout);
        try {
            phone.launch("alice", backend, true, 0);
            tablet.launch("alice", backend, false, delay);
            phone.expect(0);
            tablet.expect(0);

            helpdesk.reply("5", "to alice's phone and tablet", phone.token, tablet.token);
            phone.expect(1);
            tablet.expect(1);
            long latest = helpdesk.reply("7", "to alice's phone and tablet", phone.token, tablet.token);
            phone.expect(2);
            tablet.expect(2);

            phone.say("alice opens ticket 5: markRead(\"5\")");
            phone.client.getUnread().markRead("5").get();
            phone.expect(1);
            tablet.expect(1);

            tablet.say("alice signs out, bob signs in");
            tablet.client.deauthorize().get();
            tablet.client.authorize("bob", backend).get();
            tablet.expect(0);
            helpdesk.reply("9", "to bob's tablet", tablet.token);
            tablet.expect(1);
            UnreadCount phoneCount = phone.client.getUnread().getUnreadMessagesCount().get();
            phone.say("getUnreadMessagesCount() = " + phoneCount.getTotal() + ": bob's reply is not alice's");
            if (phoneCount.getTotal() != 1) fail("alice's count changed to " + phoneCount.getTotal() + " on bob's reply", 1);

            phone.say("markAllRead(" + latest + ")");
            phone.client.getUnread().markAllRead(latest).get();
            phone.expect(0);
            phone.client.deauthorize().get();
            tablet.client.deauthorize().get();
            System.out.println("done: 2 devices, 1 user switch, " + (phone.callbacks.get() + tablet.callbacks.get()) + " listener callbacks, "
                + backend.issued.get() + " user tokens signed");
        } catch (ExecutionException error) {
            fail("a call failed: " + error.getCause(), 1);
        } finally {
            phone.client.close();
            tablet.client.close();
            mainThread.shutdown();
        }
    }

    private static void fail(String message, int status) {
        System.err.println("Example: " + message);
        System.exit(status);
    }

    /** One device running the app: a client and a listener that prints what it is told. */
    private static final class Device implements UnreadListener {
        final String name;
        final PushRelayClient client;
        final long timeout;
        final String token = "fcm-example-" + Long.toHexString(new SecureRandom().nextLong()) + ":APA91b";
        final AtomicInteger callbacks = new AtomicInteger();
        private volatile UnreadCount count;

        Device(String name, PushRelayClient client, long timeout) {
            this.name = name;
            this.client = client;
            this.timeout = timeout;
            client.getUnread().addListener(this);
        }

        void say(String text) {
            System.out.println(String.format("%-9s%s", "[" + name + "]", text));
        }

        void launch(String user, UserTokenProvider backend, boolean foreground, long delay) throws Exception {
            // FirebaseMessagingService.onNewToken: kept until a user signs in.
            client.setDeviceToken(token).get();
            say("FCM token " + token.substring(0, 16) + "… set, no user yet: registered later");
            client.authorize(user, backend).get();
            client.getUnread().setUnreadMessageCountDelay(delay, TimeUnit.SECONDS);
            if (foreground) client.getUnread().enterForeground();
            say(user + " signed in, device registered: " + client.isRegistered() + "; "
                + (foreground ? "foreground: live stream" : "background: polling every " + delay + " s"));
        }

        @Override
        public void onUnreadChanged(UnreadCount count) {
            callbacks.incrementAndGet();
            this.count = count;
            String badge = count.badgeText();
            say("unread " + count + ", " + (badge == null ? "no badge" : "badge \"" + badge + "\""));
        }

        @Override
        public void onNetworkError(PushRelayException error) {
            callbacks.incrementAndGet();
            say("network error: " + error);
        }

        /** Waits until the listener was told {@code total}. */
        void expect(int total) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeout);
            while (count == null || count.getTotal() != total) {
                if (System.nanoTime() > deadline) {
                    fail(name + ": the count did not become " + total + " within " + timeout + " s (it is "
                        + (count == null ? "unknown" : count.getTotal()) + ")", 1);
                }
                Thread.sleep(20);
            }
        }
    }

    /** The app's backend: signs a user JWT (HS256, sub, exp) with the app's user-token key. */
    private static final class Backend implements UserTokenProvider {
        private final byte[] key;
        private final long lifetime;
        final AtomicInteger issued = new AtomicInteger();

        Backend(String key, long lifetime) {
            this.key = key.getBytes(StandardCharsets.UTF_8);
            this.lifetime = lifetime;
        }

        @Override
        public String userToken(String userId) throws Exception {
            issued.incrementAndGet();
            Base64.Encoder base64url = Base64.getUrlEncoder().withoutPadding();
            String header = base64url.encodeToString("{\"alg\":\"HS256\",\"typ\":\"JWT\"}".getBytes(StandardCharsets.UTF_8));
            JSONObject claims = new JSONObject().put("sub", userId).put("exp", System.currentTimeMillis() / 1000 + lifetime);
            String input = header + "." + base64url.encodeToString(claims.toString().getBytes(StandardCharsets.UTF_8));
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            return input + "." + base64url.encodeToString(mac.doFinal(input.getBytes(StandardCharsets.US_ASCII)));
        }
    }

    /** The helpdesk: posts the Zendesk Support SDK webhook for a reply. */
    private static final class Helpdesk {
        private final String url;

        Helpdesk(String url) {
            this.url = url;
        }

        long reply(String ticket, String note, String... tokens) throws Exception {
            JSONArray devices = new JSONArray();
            for (String token : tokens) devices.put(new JSONObject().put("identifier", token).put("type", "android"));
            JSONObject body = new JSONObject().put("devices", devices)
                .put("notification", new JSONObject().put("title", "Agent replied").put("body", "Hello").put("ticket_id", ticket));
            HttpURLConnection connection = (HttpURLConnection) new URL(url).openConnection();
            connection.setRequestMethod("POST");
            connection.setDoOutput(true);
            connection.setRequestProperty("Content-Type", "application/json");
            try (OutputStream output = connection.getOutputStream()) {
                output.write(body.toString().getBytes(StandardCharsets.UTF_8));
            }
            int status = connection.getResponseCode();
            String answer = read(status >= 400 ? connection.getErrorStream() : connection.getInputStream());
            if (status != 202) fail("the webhook was answered " + status + ": " + answer, 1);
            long id = new JSONObject(answer).getLong("notification_id");
            System.out.println("[helpdesk] agent replied on ticket " + ticket + ", " + note + ": notification " + id);
            return id;
        }

        private static String read(InputStream input) throws IOException {
            if (input == null) return "";
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buffer = new byte[4096];
            int count;
            while ((count = input.read(buffer)) > 0) out.write(buffer, 0, count);
            return new String(out.toByteArray(), StandardCharsets.UTF_8);
        }
    }
}
