package io.pushrelay.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.io.File;
import java.nio.file.Files;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ExecutorService;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Pushes as the sandbox received them from the relay, read and decrypted by the library. */
class PushTest {
    private final ExecutorService main = Relay.mainThread();
    private PushRelayClient client;

    @AfterEach
    void close() {
        if (client != null) client.close();
        main.shutdownNow();
    }

    /** A device of a new user of {@code app} registered with {@code keys}; its token. */
    private String register(String app, PushKeyStore keys) throws Exception {
        client = Relay.client(app, main, keys);
        String token = Relay.fcmToken();
        Futures.await(client.setDeviceToken(token));
        Futures.await(client.authorize(Relay.unique("user"), new TokenIssuer(app)));
        return token;
    }

    private static Map<String, String> onlyPush(String token) {
        Eventually.eventually("the push to " + token, () -> !Relay.fcmPushes(token).isEmpty());
        return Relay.fcmPushes(token).get(0);
    }

    @Test
    void aFullReplyIsReadFromItsDataMap() throws Exception {
        String token = register("support", null);
        long notification = Relay.reply("support", "5", token);
        PushRelayMessage push = PushRelayMessage.fromData(onlyPush(token));
        assertNotNull(push);
        assertEquals("5", push.getTicketId());
        assertEquals("Agent replied", push.getTitle());
        assertEquals("Reply on 5", push.getBody());
        assertEquals(1, push.getUnreadCount());
        assertEquals(notification, push.getNotificationId());
        assertEquals(PushRelayMessage.Content.FULL, push.getContent());
        assertFalse(push.isBadgeSync());
        assertNull(new PushRelayDecryptor(new InMemoryPushKeyStore()).decrypt(push), "not encrypted");
    }

    @Test
    void anEncryptedReplyDecryptsWithTheRegisteredKeyAndFallsBackOnAnyChange(@TempDir File folder) throws Exception {
        FilePushKeyStore keys = new FilePushKeyStore(new File(folder, "keys.json"));
        String token = register("secure", keys);
        long notification = Relay.reply("secure", "8", token);
        Map<String, String> data = onlyPush(token);
        PushRelayMessage push = PushRelayMessage.fromData(data);
        assertEquals(PushRelayMessage.Content.ENCRYPTED, push.getContent());
        assertEquals(keys.currentKey().getId(), push.getKeyId());
        assertEquals(notification, push.getNotificationId());
        assertFalse(data.containsValue("Reply on 8"), "the reply's text travels encrypted only");

        // The messaging service's decryptor reads the same file.
        PushRelayDecryptor decryptor = new PushRelayDecryptor(new FilePushKeyStore(keys.getFile()));
        assertEquals(new PushRelayDecryptor.ReplyText("Agent replied", "Reply on 8"), decryptor.decrypt(data));
        assertEquals("Reply on 8", decryptor.textToShow(push).getBody());

        // After a rotation the old key still opens pushes on their way.
        Futures.await(client.rotatePushKey());
        assertEquals("Reply on 8", decryptor.decrypt(data).getBody());

        // A wrong key, a changed byte, another notification id: the generic text.
        String generic = push.getBody();
        PushRelayDecryptor stranger = new PushRelayDecryptor(new InMemoryPushKeyStore(PushKey.generate(push.getKeyId())));
        assertNull(stranger.decrypt(data));
        assertEquals(generic, stranger.textToShow(push).getBody());
        byte[] sealed = push.getCiphertext();
        for (int index : new int[] {0, 12, sealed.length - 1}) {
            byte[] changed = sealed.clone();
            changed[index] ^= 1;
            Map<String, String> tampered = new HashMap<>(data);
            tampered.put("push_relay_ciphertext", java.util.Base64.getEncoder().encodeToString(changed));
            assertNull(decryptor.decrypt(tampered), "byte " + index + " changed");
        }
        Map<String, String> moved = new HashMap<>(data);
        moved.put("push_relay_notification_id", String.valueOf(notification + 1));
        assertNull(decryptor.decrypt(moved), "a ciphertext moved to another push");
        Map<String, String> unknownKey = new HashMap<>(data);
        unknownKey.put("push_relay_key_id", "not-a-kept-key");
        assertNull(decryptor.decrypt(unknownKey));
        Map<String, String> notBase64 = new HashMap<>(data);
        notBase64.put("push_relay_ciphertext", "%%%");
        assertNull(decryptor.decrypt(notBase64));
        assertFalse(Files.readString(keys.getFile().toPath()).isEmpty());
    }
}
