package io.pushrelay.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;

import org.json.JSONObject;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** docs/client.md's registration and user-JWT rules, against the relay. */
class RegistrationTest {
    private final ExecutorService main = Relay.mainThread();
    private final List<PushRelayClient> clients = new ArrayList<>();

    private PushRelayClient client(String app, PushKeyStore keys) {
        PushRelayClient client = Relay.client(app, main, keys);
        clients.add(client);
        return client;
    }

    @AfterEach
    void close() {
        for (PushRelayClient client : clients) client.close();
        main.shutdownNow();
    }

    @Test
    void registersOnceTokenAndUserAreKnownInEitherOrder() throws Exception {
        TokenIssuer issuer = new TokenIssuer("support");
        String alice = Relay.unique("alice");

        PushRelayClient tokenFirst = client("support", null);
        String first = Relay.fcmToken();
        Futures.await(tokenFirst.setDeviceToken(first));
        assertNull(Relay.device("support", first), "registered without a user");
        assertFalse(tokenFirst.isRegistered());
        Futures.await(tokenFirst.authorize(alice, issuer));
        JSONObject device = Relay.device("support", first);
        assertEquals("android", device.getString("platform"));
        assertEquals(alice, device.getString("user_id"));
        assertEquals("en-GB", device.getString("locale"));
        assertFalse(device.getBoolean("push_key_set"));
        assertTrue(tokenFirst.isRegistered());

        PushRelayClient userFirst = client("support", null);
        String second = Relay.fcmToken();
        Futures.await(userFirst.authorize(alice, issuer));
        assertFalse(userFirst.isRegistered());
        Futures.await(userFirst.setDeviceToken(second));
        assertEquals(alice, Relay.owner("support", second));
        assertTrue(userFirst.isRegistered());
    }

    @Test
    void aNewTokenUnregistersTheOldOne() throws Exception {
        TokenIssuer issuer = new TokenIssuer("support");
        String user = Relay.unique("carol");
        PushRelayClient client = client("support", null);
        String old = Relay.fcmToken();
        Futures.await(client.setDeviceToken(old));
        Futures.await(client.authorize(user, issuer));
        assertEquals(user, Relay.owner("support", old));

        String replacement = Relay.fcmToken();
        Futures.await(client.setDeviceToken(replacement));
        assertNull(Relay.device("support", old), "the old token is still registered");
        assertEquals(user, Relay.owner("support", replacement));
        assertEquals(replacement, client.getDeviceToken());
    }

    @Test
    void anotherUserUnregistersThePreviousUsersDeviceFirst() throws Exception {
        TokenIssuer issuer = new TokenIssuer("support");
        String alice = Relay.unique("alice");
        String bob = Relay.unique("bob");
        PushRelayClient client = client("support", null);
        String token = Relay.fcmToken();
        Futures.await(client.setDeviceToken(token));
        Futures.await(client.authorize(alice, issuer));
        assertEquals(alice, Relay.owner("support", token));

        // The relay refuses bob's token for a device linked to alice (403): the client removes
        // alice's registration first.
        Futures.await(client.authorize(bob, issuer));
        assertEquals(bob, Relay.owner("support", token));
        assertEquals(bob, client.getUserId());
        Relay.Answer alicesDevices = Relay.request("GET", "/v1/apps/support/users/" + alice + "/devices", Relay.ADMIN_KEY, null);
        assertEquals(0, alicesDevices.json().getJSONArray("devices").length(), alicesDevices.body());
    }

    @Test
    void aFailedSignOutIsRetriedBeforeTheNextRegistration() throws Exception {
        TokenIssuer issuer = new TokenIssuer("support");
        String alice = Relay.unique("alice");
        String bob = Relay.unique("bob");
        PushRelayClient client = client("support", null);
        String token = Relay.fcmToken();
        Futures.await(client.setDeviceToken(token));
        // Alice's token expires soon, and her backend is then unreachable: the sign-out's DELETE
        // gets a 401 and cannot get a new token.
        issuer.setLifetimeSeconds(2);
        Futures.await(client.authorize(alice, issuer));
        assertEquals(alice, Relay.owner("support", token));
        String expiring = issuer.token(alice, 2);
        Eventually.eventually("alice's short-lived tokens expired", () ->
            Relay.request("GET", "/v1/apps/support/users/" + alice + "/unread", expiring, null).status() == 401);
        issuer.setFailing(true);

        PushRelayException signOut = Futures.failure(client.deauthorize());
        assertEquals(PushRelayException.Kind.TOKEN_PROVIDER, signOut.getKind());
        assertNull(client.getUserId(), "signed out anyway");
        assertEquals(alice, Relay.owner("support", token), "the registration could not be removed");

        // Bob's registration waits for alice's removal, which still fails.
        TokenIssuer bobs = new TokenIssuer("support");
        PushRelayException blocked = Futures.failure(client.authorize(bob, bobs));
        assertEquals(PushRelayException.Kind.TOKEN_PROVIDER, blocked.getKind());
        assertEquals(alice, Relay.owner("support", token));
        assertEquals(bob, client.getUserId(), "authorized, though not registered");
        assertFalse(client.isRegistered());

        // Alice's backend is back: the removal goes first, then bob's registration.
        issuer.setFailing(false);
        issuer.setLifetimeSeconds(600);
        Futures.await(client.registerDevice());
        assertEquals(bob, Relay.owner("support", token));
        assertTrue(client.isRegistered());
    }

    @Test
    void theUserTokenIsReusedAndRefreshedOnceOnA401() throws Exception {
        TokenIssuer issuer = new TokenIssuer("support");
        String user = Relay.unique("dave");
        PushRelayClient client = client("support", null);
        Futures.await(client.setDeviceToken(Relay.fcmToken()));
        Futures.await(client.authorize(user, issuer));
        Futures.await(client.getUnread().getUnreadMessagesCount());
        Futures.await(client.getUnread().markAllRead());
        Futures.await(client.getUnread().getUnreadMessagesCount());
        assertEquals(1, issuer.calls(), "one token for every request");

        // The held token is refused (signed with another key, as after a key rotation): one new
        // token, one retry.
        PushRelayClient other = client("support", null);
        TokenIssuer rotating = new TokenIssuer("support");
        rotating.signWithWrongKey(1);
        Futures.await(other.authorize(Relay.unique("erin"), rotating));
        Futures.await(other.getUnread().getUnreadMessagesCount());
        assertEquals(2, rotating.calls());

        // Refused twice: unauthorized, after exactly two provider calls.
        PushRelayClient refused = client("support", null);
        EventLog log = new EventLog();
        refused.getUnread().addListener(log);
        TokenIssuer wrong = new TokenIssuer("support");
        wrong.signWithWrongKey(Integer.MAX_VALUE);
        Futures.await(refused.authorize(Relay.unique("frank"), wrong));  // no device token yet: nothing to register
        // The counter's first load is refused too, and reported.
        Eventually.eventually("the load's error", () -> !log.errors().isEmpty());
        assertEquals(PushRelayException.Kind.UNAUTHORIZED, log.errors().get(0).getKind());
        int before = wrong.calls();
        PushRelayException error = Futures.failure(refused.getUnread().getUnreadMessagesCount());
        assertEquals(PushRelayException.Kind.UNAUTHORIZED, error.getKind());
        assertEquals(2, wrong.calls() - before, "the provider is asked once more after a 401, not again");
    }

    @Test
    void concurrentRequestsShareOneProviderCall() throws Exception {
        TokenIssuer issuer = new TokenIssuer("support");
        CountDownLatch release = issuer.hold();
        PushRelayClient client = client("support", null);
        Futures.await(client.authorize(Relay.unique("gina"), issuer));
        List<Future<UnreadCount>> calls = new ArrayList<>();
        for (int index = 0; index < 4; index++) calls.add(client.getUnread().getUnreadMessagesCount());
        Eventually.eventually("the provider was called", () -> issuer.calls() >= 1);
        release.countDown();
        for (Future<UnreadCount> call : calls) Futures.await(call);
        assertEquals(1, issuer.calls());
    }

    @Test
    void pushKeysAreRegisteredAndRotated() throws Exception {
        TokenIssuer issuer = new TokenIssuer("secure");
        InMemoryPushKeyStore keys = new InMemoryPushKeyStore();
        PushRelayClient client = client("secure", keys);
        String token = Relay.fcmToken();
        Futures.await(client.setDeviceToken(token));
        Futures.await(client.authorize(Relay.unique("hana"), issuer));
        PushKey first = keys.currentKey();
        JSONObject device = Relay.device("secure", token);
        assertTrue(device.getBoolean("push_key_set"), "a key was made and registered");
        assertEquals(first.getId(), device.getString("push_key_id"));

        // Registered already: nothing is sent.
        String updated = device.getString("updated_at");
        Futures.await(client.registerDevice());
        assertEquals(updated, Relay.device("secure", token).getString("updated_at"));

        Futures.await(client.rotatePushKey());
        Futures.await(client.rotatePushKey());
        Futures.await(client.rotatePushKey());
        PushKey current = keys.currentKey();
        assertNotEquals(first.getId(), current.getId());
        assertEquals(current.getId(), Relay.device("secure", token).getString("push_key_id"));
        assertNull(keys.key(first.getId()), "three keys are kept: the first is gone after three rotations");
    }

    @Test
    void aFailingKeyStoreSendsNothing() throws Exception {
        PushKeyStore broken = new PushKeyStore() {
            @Override
            public PushKey currentKey() throws java.io.IOException {
                throw new java.io.IOException("keystore locked");
            }

            @Override
            public PushKey key(String id) {
                return null;
            }

            @Override
            public void save(PushKey key) {}
        };
        PushRelayClient client = client("secure", broken);
        String token = Relay.fcmToken();
        Futures.await(client.setDeviceToken(token));
        PushRelayException error = Futures.failure(client.authorize(Relay.unique("ivan"), new TokenIssuer("secure")));
        assertEquals(PushRelayException.Kind.PUSH_KEY_STORE, error.getKind());
        assertNull(Relay.device("secure", token));
    }
}
