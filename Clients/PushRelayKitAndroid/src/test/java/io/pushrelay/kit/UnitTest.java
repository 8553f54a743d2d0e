package io.pushrelay.kit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The library's parts that need no relay. */
class UnitTest {
    @Test
    void base64AgreesWithTheJdkAndRefusesWhatIsNotStandardBase64() {
        Random random = new Random(42);
        for (int length = 0; length < 70; length++) {
            byte[] data = new byte[length];
            random.nextBytes(data);
            String text = Base64.getEncoder().encodeToString(data);
            assertEquals(text, Base64Codec.encode(data));
            assertArrayEquals(data, Base64Codec.decode(text));
        }
        for (String bad : new String[] {"A", "AB=", "A===", "AB*D", "AB-_", "QR==", "QUI=A===", "ab c", "Zg=a"}) {
            assertNull(Base64Codec.decode(bad), bad);
        }
    }

    /** The test vector of docs/http-api.md's "Encrypted pushes". */
    @Test
    void theDocumentedTestVectorDecrypts() throws Exception {
        byte[] key = new byte[32];
        for (int index = 0; index < 32; index++) key[index] = (byte) index;
        PushKey pushKey = PushKey.fromBase64("k1", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
        assertArrayEquals(key, pushKey.getKey());
        Map<String, String> data = new HashMap<>();
        data.put("zendesk_sdk_request_id", "5");
        data.put("push_relay_notification_id", "42");
        data.put("push_relay_content", "encrypted");
        data.put("push_relay_key_id", "k1");
        data.put("title", "New reply");
        data.put("body", "You have a new reply to your request.");
        data.put("push_relay_ciphertext", "AAECAwQFBgcICQoLPCC0dKGc4CGvCfLn3YZaQaGi7kCcHn1GGiaC4HMdIMBkYMKVyqUw5V9BTusytjlnTdTJOaUs57A=");
        PushRelayDecryptor decryptor = new PushRelayDecryptor(new InMemoryPushKeyStore(pushKey));
        assertEquals(new PushRelayDecryptor.ReplyText("Agent replied", "Hello"), decryptor.decrypt(data));
        data.put("push_relay_notification_id", "43");
        assertNull(decryptor.decrypt(data));
        assertEquals("You have a new reply to your request.", decryptor.textToShow(PushRelayMessage.fromData(data)).getBody());
    }

    @Test
    void pushesAreReadFromTheDataMap() {
        Map<String, String> reply = new HashMap<>();
        reply.put("zendesk_sdk_request_id", "5");
        reply.put("title", "Agent replied");
        reply.put("body", "Hello");
        reply.put("unread_count", "3");
        reply.put("push_relay_notification_id", "42");
        reply.put("thread_id", "5");
        PushRelayMessage push = PushRelayMessage.fromData(reply);
        assertEquals("5", push.getTicketId());
        assertEquals(3, push.getUnreadCount());
        assertEquals(42L, push.getNotificationId());
        assertEquals("5", push.getThreadId());
        assertEquals(PushRelayMessage.Content.FULL, push.getContent());
        assertFalse(push.toString().contains("Hello"), "no notification text in toString");

        Map<String, String> sync = new HashMap<>();
        sync.put("zendesk_sdk_event", "read_sync");
        sync.put("unread_count", "0");
        PushRelayMessage badge = PushRelayMessage.fromData(sync);
        assertTrue(badge.isBadgeSync());
        assertNull(badge.getTicketId());
        assertEquals(0, badge.getUnreadCount());

        Map<String, String> generic = new HashMap<>(reply);
        generic.put("push_relay_content", "something-new");
        assertEquals(PushRelayMessage.Content.GENERIC, PushRelayMessage.fromData(generic).getContent());
        Map<String, String> odd = new HashMap<>(reply);
        odd.put("unread_count", "many");
        odd.put("push_relay_notification_id", "");
        assertNull(PushRelayMessage.fromData(odd).getUnreadCount());
        assertNull(PushRelayMessage.fromData(odd).getNotificationId());

        Map<String, String> other = new HashMap<>();
        other.put("title", "Someone else's push");
        assertNull(PushRelayMessage.fromData(other));
    }

    @Test
    void unreadCountsParseAndShowTheBadgeRule() throws Exception {
        UnreadCount count = UnreadCount.parse(
            "{\"total\":150,\"tickets\":[{\"ticket_id\":\"5\",\"unread\":100},{\"ticket_id\":\"7\",\"unread\":50}]}");
        assertEquals(150, count.getTotal());
        assertEquals(100, count.unread("5"));
        assertEquals(0, count.unread("9"));
        assertEquals("99+", count.badgeText());
        assertEquals("150", count.badgeText(0));
        assertEquals("150", count.badgeText(150));
        assertEquals("99", new UnreadCount(99, Map.of()).badgeText());
        assertNull(UnreadCount.ZERO.badgeText());
        assertEquals("150 (ticket 5: 100, ticket 7: 50)", count.toString());
        assertThrows(UnsupportedOperationException.class, () -> count.getTickets().put("8", 1));
        assertThrows(org.json.JSONException.class, () -> UnreadCount.parse("{\"tickets\":[]}"));
        assertThrows(org.json.JSONException.class, () -> UnreadCount.parse("{\"total\":1,\"tickets\":[{\"ticket_id\":5,\"unread\":1}]}"));
        assertEquals(new UnreadCount(1, Map.of()), new UnreadCount(1, Map.of("5", 0)), "tickets at 0 are left out");
    }

    @Test
    void theEventStreamParserTakesAnySplitAndEveryLineEnding() {
        String stream = ": heartbeat\r\nevent: unread\r\ndata: {\"total\":1,\r\ndata: \"tickets\":[]}\r\n\r\n"
            + "event: unread\ndata:{\"total\":2}\n\n: heartbeat\r\revent: other\rdata: x\r\r";
        byte[] bytes = stream.getBytes(StandardCharsets.UTF_8);
        for (int split = 1; split <= bytes.length; split++) {
            EventStreamParser parser = new EventStreamParser();
            List<EventStreamParser.Event> events = new ArrayList<>();
            for (int offset = 0; offset < bytes.length; offset += split) {
                int count = Math.min(split, bytes.length - offset);
                byte[] chunk = new byte[count];
                System.arraycopy(bytes, offset, chunk, 0, count);
                events.addAll(parser.feed(chunk, count));
            }
            assertEquals(3, events.size(), "split every " + split + " bytes");
            assertEquals("unread", events.get(0).name);
            assertEquals("{\"total\":1,\n\"tickets\":[]}", events.get(0).data);
            assertEquals("{\"total\":2}", events.get(1).data);
            assertEquals("other", events.get(2).name);
        }
    }

    @Test
    void pathSegmentsArePercentEncodedAndMaxAgeIsRead() {
        assertEquals("a%2Fb%3Fc%23d%25e%20%C3%A9-._~", Transport.encodeSegment("a/b?c#d%e é-._~"));
        assertEquals("http://relay/p/v1/apps/sup%2Fport/users/u%3A1/unread",
            new Transport("http://relay/p/", "sup/port", 1000).url(List.of("users", "u:1", "unread")).toString());
        assertEquals(10000L, UnreadCounter.maxAgeMillis("private, max-age=10"));
        assertEquals(1500L, UnreadCounter.maxAgeMillis("MAX-AGE=1.5"));
        assertNull(UnreadCounter.maxAgeMillis("no-cache"));
        assertNull(UnreadCounter.maxAgeMillis(null));
    }

    @Test
    void backoffDoublesToThirtySecondsWithinTwentyPercentAndResets() {
        Backoff backoff = new Backoff(new Random(3));
        long[] bases = {1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000};
        for (long base : bases) {
            long delay = backoff.next();
            assertTrue(delay >= base * 0.8 && delay <= base * 1.2, base + ": " + delay);
        }
        backoff.reset();
        long delay = backoff.next();
        assertTrue(delay >= 800 && delay <= 1200, "after a reset: " + delay);
    }

    @Test
    void callbacksRunOneAtATimeInOrderOnAnyExecutor() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(4);
        SerialDispatcher dispatcher = new SerialDispatcher(pool);
        List<Integer> seen = new ArrayList<>();
        int[] running = {0};
        boolean[] overlapped = {false};
        for (int index = 0; index < 2000; index++) {
            int value = index;
            dispatcher.post(() -> {
                synchronized (running) {
                    if (running[0]++ > 0) overlapped[0] = true;
                }
                seen.add(value);
                synchronized (running) {
                    running[0]--;
                }
            });
        }
        pool.shutdown();
        Eventually.eventually("every callback ran", () -> {
            synchronized (running) {
                return seen.size() == 2000;
            }
        });
        assertTrue(pool.awaitTermination(Eventually.HANG_SECONDS, TimeUnit.SECONDS));
        assertFalse(overlapped[0]);
        for (int index = 0; index < 2000; index++) assertEquals(index, seen.get(index));
    }

    @Test
    void theFileStoreIsOwnerOnlyKeepsThreeKeysAndCanBeSealed(@TempDir File folder) throws Exception {
        File file = new File(folder, "deeper/keys.json");
        FilePushKeyStore store = new FilePushKeyStore(file);
        assertNull(store.currentKey());
        List<PushKey> saved = new ArrayList<>();
        for (int index = 0; index < 4; index++) {
            PushKey key = PushKey.generate();
            store.save(key);
            saved.add(key);
        }
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file.toPath())));
        assertEquals(saved.get(3), store.currentKey());
        assertNull(store.key(saved.get(0).getId()), "the oldest of four went");
        assertEquals(saved.get(1), new FilePushKeyStore(file).key(saved.get(1).getId()));
        assertEquals(1, folder.toPath().resolve("deeper").toFile().list().length, "no temporary file left");
        assertFalse(saved.get(3).toString().contains(saved.get(3).getBase64()));
        // The same file format as PushRelayKit for Apple platforms.
        assertEquals(saved.subList(1, 4), reversed(PushKeyRing.decode(Files.readString(file.toPath()))));

        // Sealed: the key is not in the file, and a store without the sealer cannot read it.
        FilePushKeyStore.Sealer sealer = new TestSealer();
        File sealedFile = new File(folder, "sealed");
        FilePushKeyStore sealed = new FilePushKeyStore(sealedFile, sealer);
        PushKey key = PushKey.generate();
        sealed.save(key);
        assertEquals(key, sealed.currentKey());
        assertFalse(new String(Files.readAllBytes(sealedFile.toPath()), StandardCharsets.ISO_8859_1).contains(key.getBase64()));
        assertThrows(IOException.class, () -> new FilePushKeyStore(sealedFile).currentKey());
        assertThrows(IllegalArgumentException.class, () -> PushKey.generate("not a valid id"));
        assertNotNull(PushKey.fromBase64("ok.id-1_x", key.getBase64()));
        assertNull(PushKey.fromBase64("ok", "c2hvcnQ="));
    }

    private static List<PushKey> reversed(List<PushKey> keys) {
        List<PushKey> copy = new ArrayList<>(keys);
        java.util.Collections.reverse(copy);
        return copy;
    }

    /** AES-GCM with a fixed key, as a Keystore-backed sealer would do with a hardware key. */
    private static final class TestSealer implements FilePushKeyStore.Sealer {
        private final SecretKeySpec key = new SecretKeySpec(new byte[32], "AES");
        private final Random random = new Random(9);

        @Override
        public byte[] seal(byte[] plaintext) throws GeneralSecurityException {
            byte[] nonce = new byte[12];
            random.nextBytes(nonce);
            Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
            cipher.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(128, nonce));
            byte[] sealed = cipher.doFinal(plaintext);
            byte[] out = new byte[12 + sealed.length];
            System.arraycopy(nonce, 0, out, 0, 12);
            System.arraycopy(sealed, 0, out, 12, sealed.length);
            return out;
        }

        @Override
        public byte[] open(byte[] sealed) throws GeneralSecurityException {
            Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
            cipher.init(Cipher.DECRYPT_MODE, key, new GCMParameterSpec(128, sealed, 0, 12));
            return cipher.doFinal(sealed, 12, sealed.length - 12);
        }
    }
}
