package io.pushrelay.kit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.ServerSocket;
import java.net.URL;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** docs/client.md's rules for the unread counter, against the relay. */
class UnreadCounterTest {
    private final ExecutorService main = Relay.mainThread();
    private final List<PushRelayClient> clients = new ArrayList<>();
    private final List<HttpURLConnection> blockers = new ArrayList<>();

    private PushRelayClient client(String app, Clock clock, Random random) {
        PushRelayClient client = new PushRelayClient(Relay.configuration(app, null), main, clock, random);
        clients.add(client);
        return client;
    }

    private PushRelayClient client() {
        return client("support", Clock.SYSTEM, new Random());
    }

    @AfterEach
    void close() {
        for (HttpURLConnection blocker : blockers) blocker.disconnect();
        for (PushRelayClient client : clients) client.close();
        main.shutdownNow();
    }

    /** A device of {@code user} with a new token, signed in; its counter's events go to {@code log}. */
    private static String signIn(PushRelayClient client, String user, TokenIssuer issuer, EventLog log) throws Exception {
        client.getUnread().addListener(log);
        String token = Relay.fcmToken();
        Futures.await(client.setDeviceToken(token));
        Futures.await(client.authorize(user, issuer));
        return token;
    }

    @Test
    void theLiveStreamReportsChangesOnTheCallbackExecutorInOrder() throws Exception {
        PushRelayClient phone = client();
        EventLog log = new EventLog();
        String token = signIn(phone, Relay.unique("alice"), new TokenIssuer("support"), log);
        phone.getUnread().enterForeground();
        log.awaitTotal(0);
        Relay.reply("support", "5", token);
        log.awaitTotal(1);
        Relay.reply("support", "7", token);
        Relay.reply("support", "7", token);
        log.awaitLast("tickets 5 and 7", count -> count.getTotal() == 3 && count.unread("5") == 1 && count.unread("7") == 2);
        List<UnreadCount> counts = log.counts();
        for (int index = 1; index < counts.size(); index++) {
            assertTrue(counts.get(index).getTotal() > counts.get(index - 1).getTotal(), "in order, each a change: " + counts);
        }
        for (String thread : log.threads()) assertEquals("test-main", thread);
        assertTrue(log.errors().isEmpty(), log.events().toString());
    }

    @Test
    void backgroundPollsAreConditionalAndWaitForTheLongerOfDelayAndHint() throws Exception {
        ManualClock clock = new ManualClock();
        PushRelayClient tablet = client("support", clock, new Random());
        EventLog log = new EventLog();
        String user = Relay.unique("bea");
        TokenIssuer issuer = new TokenIssuer("support");
        String token = signIn(tablet, user, issuer, log);
        log.awaitTotal(0);  // every authorization loads the count at once
        UnreadCounter counter = tablet.getUnread();

        // A delay below the relay's hint (max-age=1): the hint wins.
        counter.setUnreadMessageCountDelay(300, TimeUnit.MILLISECONDS);
        clock.awaitSleeperIn(1000);  // the next poll a hint after the last one
        int notModified = Relay.notModifiedPolls("support");
        clock.advance(1000);
        Eventually.eventually("a 304 from the kept ETag", () -> Relay.notModifiedPolls("support") == notModified + 1);
        clock.awaitSleeperIn(1000);

        // A delay above the hint: the delay.
        counter.setUnreadMessageCountDelay(5, TimeUnit.SECONDS);
        clock.awaitSleeperIn(5000);
        Relay.replySeenByPolls("support", "9", user, issuer, token);
        clock.advance(5000);
        log.awaitTotal(1);
        assertTrue(log.errors().isEmpty(), log.events().toString());
    }

    /** Opens one live stream of {@code user} that the test holds, to use up the user's places. */
    private void holdStream(String user, TokenIssuer issuer) throws Exception {
        HttpURLConnection connection = (HttpURLConnection) new URL(Relay.URL + "/v1/apps/support/users/" + user + "/unread/stream")
            .openConnection();
        connection.setRequestProperty("Authorization", "Bearer " + issuer.token(user, 600));
        connection.setRequestProperty("Accept", "text/event-stream");
        connection.setReadTimeout(60000);
        assertEquals(200, connection.getResponseCode());
        InputStream input = connection.getInputStream();
        assertTrue(input.read() >= 0, "the stream's first event");
        blockers.add(connection);
    }

    @Test
    void aRefusedStreamIsReportedPolledAroundAndRetriedWithBackoff() throws Exception {
        String user = Relay.unique("cleo");
        TokenIssuer issuer = new TokenIssuer("support");
        for (int index = 0; index < 4; index++) holdStream(user, issuer);  // unread.max_streams_per_owner
        ManualClock clock = new ManualClock();
        long seed = 20261205;
        Backoff expected = new Backoff(new Random(seed));
        PushRelayClient phone = client("support", clock, new Random(seed));
        EventLog log = new EventLog();
        String token = signIn(phone, user, issuer, log);
        log.awaitTotal(0);
        // A delay longer than any backoff, so each wait ends at the next try at the stream.
        phone.getUnread().setUnreadMessageCountDelay(60, TimeUnit.SECONDS);
        clock.awaitSleeperIn(60000);

        int polls = Relay.allPolls("support");
        phone.getUnread().enterForeground();
        for (int attempt = 1; attempt <= 3; attempt++) {
            int failures = attempt;
            Eventually.eventually("refused stream " + attempt, () -> log.errors().size() == failures);
            PushRelayException error = log.errors().get(attempt - 1);
            assertEquals(PushRelayException.Kind.SERVER, error.getKind());
            assertEquals(429, error.getStatus());
            assertEquals("too_many_streams", error.getCode());
            assertTrue(error.isTransient());
            long delay = expected.next();
            long base = 1000L << (attempt - 1);
            assertTrue(delay >= base * 8 / 10 && delay <= base * 12 / 10, "within ±20 % of " + base + ": " + delay);
            clock.awaitSleeperIn(delay);  // each try waits its backoff
            int expectedPolls = polls + attempt;
            Eventually.eventually("a poll at once after refusal " + attempt, () -> Relay.allPolls("support") == expectedPolls);
            if (attempt < 3) clock.advance(delay);
        }

        // A place frees: a later try holds the stream. The relay takes the place back when it
        // notices the closed connection (at its next heartbeat); until then each try is refused.
        // Before each try a reply changes the count: a refused try's poll or an accepted stream's
        // first event reports it, and only a refusal adds an error.
        blockers.remove(0).disconnect();
        int total = 0;
        for (int tries = 0;; tries++) {
            assertTrue(tries < 1000, "the stream was never accepted");
            Relay.replySeenByPolls("support", "3", user, issuer, token);
            total++;
            int errors = log.errors().size();
            clock.advanceTo(clock.awaitSleeper());
            log.awaitTotal(total);
            if (log.errors().size() == errors) break;
        }
        // Streaming now: the clock is not moved, and the change arrives.
        Relay.reply("support", "3", token);
        log.awaitTotal(total + 1);
    }

    @Test
    void anUnreachableRelayIsReportedWithoutAPollAndRetriedWithBackoff() throws Exception {
        int port;
        try (ServerSocket socket = new ServerSocket(0)) {
            port = socket.getLocalPort();
        }
        ManualClock clock = new ManualClock();
        PushRelayClient client = new PushRelayClient(
            PushRelayClient.Configuration.builder("http://127.0.0.1:" + port, "support").build(), main, clock, new Random(1));
        clients.add(client);
        EventLog log = new EventLog();
        client.getUnread().addListener(log);
        client.getUnread().setUnreadMessageCountDelay(60, TimeUnit.SECONDS);
        Futures.await(client.authorize("nobody", userId -> "unused.token.value"));
        Eventually.eventually("the load's error", () -> log.errors().size() == 1);
        clock.awaitSleeperIn(60000);
        client.getUnread().enterForeground();
        Backoff expected = new Backoff(new Random(1));
        for (int attempt = 1; attempt <= 2; attempt++) {
            int errors = 1 + attempt;
            Eventually.eventually("stream failure " + attempt, () -> log.errors().size() == errors);
            assertEquals(PushRelayException.Kind.NETWORK, log.errors().get(errors - 1).getKind());
            clock.awaitSleeperIn(expected.next());
            // No poll: one error per try, none for a poll.
            assertEquals(errors, log.errors().size());
            clock.advance(60000);
        }
        assertTrue(log.counts().isEmpty());
    }

    @Test
    void aStreamTheRelayEndsIsReopenedAtOnceWithAFreshToken() throws Exception {
        ManualClock clock = new ManualClock();  // never moved: a reconnect that waited would hang
        PushRelayClient phone = client("support", clock, new Random());
        EventLog log = new EventLog();
        TokenIssuer issuer = new TokenIssuer("support");
        issuer.setLifetimeSeconds(3);  // the relay ends a stream once its token expired
        phone.getUnread().enterForeground();
        String token = signIn(phone, Relay.unique("dina"), issuer, log);
        log.awaitTotal(0);
        int calls = issuer.calls();
        Eventually.eventually("the stream ended at its token's expiry and was reopened with a new token", () -> issuer.calls() > calls);
        Relay.reply("support", "4", token);
        log.awaitTotal(1);
        assertTrue(log.errors().isEmpty(), "a refused expired token is replaced, not reported: " + log.events());
    }

    @Test
    void zeroIsReportedOnceWhenAnotherUserIsAuthorizedAndNothingAfterSignOut() throws Exception {
        PushRelayClient client = client();
        EventLog log = new EventLog();
        TokenIssuer issuer = new TokenIssuer("support");
        String alice = Relay.unique("alice");
        String token = signIn(client, alice, issuer, log);
        log.awaitTotal(0);
        Relay.replySeenByPolls("support", "11", alice, issuer, token);
        assertEquals(1, Futures.await(client.getUnread().getUnreadMessagesCount()).getTotal());
        log.awaitTotal(1);

        Futures.await(client.authorize(alice, issuer));  // the same user: no event
        Futures.await(client.authorize(Relay.unique("bob"), issuer));
        log.awaitTotal(0);
        Futures.await(client.getUnread().getUnreadMessagesCount());  // bob's own 0: not a change
        assertEquals(List.of(0, 1, 0), log.counts().stream().map(UnreadCount::getTotal).toList());

        Futures.await(client.deauthorize());
        assertEquals(PushRelayException.Kind.NOT_AUTHORIZED, Futures.failure(client.getUnread().markAllRead()).getKind());
        Futures.await(client.authorize(alice, issuer));  // alice again after bob: 0 first, then hers
        log.awaitLast("alice's count after 0", count -> count.getTotal() == 1);
        assertEquals(List.of(0, 1, 0, 0, 1), log.counts().stream().map(UnreadCount::getTotal).toList());
    }

    @Test
    void markReadAndMarkAllReadUpToANotification() throws Exception {
        PushRelayClient client = client();
        EventLog log = new EventLog();
        String user = Relay.unique("emma");
        TokenIssuer issuer = new TokenIssuer("support");
        String token = signIn(client, user, issuer, log);
        Relay.reply("support", "A", token);
        long second = Relay.reply("support", "B", token);
        Relay.replySeenByPolls("support", "B", user, issuer, token);
        UnreadCount count = Futures.await(client.getUnread().getUnreadMessagesCount());
        assertEquals(3, count.getTotal());
        assertEquals(Map.of("A", 1, "B", 2), count.getTickets());

        UnreadCount afterA = Futures.await(client.getUnread().markRead("A"));
        assertEquals(new UnreadCount(2, Map.of("B", 2)), afterA);
        UnreadCount upTo = Futures.await(client.getUnread().markAllRead(second));
        assertEquals(new UnreadCount(1, Map.of("B", 1)), upTo, "the reply after the one seen stays unread");
        assertEquals(UnreadCount.ZERO, Futures.await(client.getUnread().markAllRead()));
        log.awaitTotal(0);
        assertEquals(List.of(0, 3, 2, 1, 0), log.counts().stream().map(UnreadCount::getTotal).toList());
        assertEquals(UnreadCount.ZERO, client.getUnread().getCount());
    }

    @Test
    void twoDevicesOfOneUserFollowEachOthersReads() throws Exception {
        String user = Relay.unique("fay");
        TokenIssuer issuer = new TokenIssuer("support");
        PushRelayClient phone = client();
        PushRelayClient tablet = client();
        EventLog phoneLog = new EventLog();
        EventLog tabletLog = new EventLog();
        phone.getUnread().enterForeground();
        String phoneToken = signIn(phone, user, issuer, phoneLog);
        String tabletToken = signIn(tablet, user, issuer, tabletLog);
        tablet.getUnread().setUnreadMessageCountDelay(1, TimeUnit.SECONDS);

        Relay.reply("support", "21", phoneToken, tabletToken);
        phoneLog.awaitTotal(1);
        tabletLog.awaitTotal(1);
        Futures.await(phone.getUnread().markRead("21"));
        tabletLog.awaitTotal(0);
        phoneLog.awaitTotal(0);

        // The tablet got a silent badge sync (the phone, named as the one read on, got none).
        Eventually.eventually("the tablet's badge sync", () -> Relay.fcmPushes(tabletToken).stream()
            .map(PushRelayMessage::fromData).anyMatch(push -> push != null && push.isBadgeSync()));
        PushRelayMessage sync = Relay.fcmPushes(tabletToken).stream().map(PushRelayMessage::fromData)
            .filter(push -> push != null && push.isBadgeSync()).findFirst().orElseThrow();
        assertEquals(0, sync.getUnreadCount());
        assertNull(sync.getTicketId());
        assertTrue(Relay.fcmPushes(phoneToken).stream().map(PushRelayMessage::fromData).noneMatch(PushRelayMessage::isBadgeSync));
    }

    @Test
    void aPushRefreshesTheCount() throws Exception {
        PushRelayClient client = client();
        EventLog log = new EventLog();
        String user = Relay.unique("gwen");
        TokenIssuer issuer = new TokenIssuer("support");
        String token = signIn(client, user, issuer, log);
        log.awaitTotal(0);
        Relay.replySeenByPolls("support", "31", user, issuer, token);
        Eventually.eventually("the reply's push", () -> !Relay.fcmPushes(token).isEmpty());
        PushRelayMessage push = PushRelayMessage.fromData(Relay.fcmPushes(token).get(0));
        assertEquals("31", push.getTicketId());
        client.getUnread().handle(push);
        log.awaitTotal(1);
    }

    @Test
    void closingStopsEveryThreadOfTheLibrary() throws Exception {
        PushRelayClient client = client();
        EventLog log = new EventLog();
        signIn(client, Relay.unique("hope"), new TokenIssuer("support"), log);
        client.getUnread().enterForeground();
        log.awaitTotal(0);
        Futures.await(client.getUnread().getUnreadMessagesCount());
        for (PushRelayClient each : clients) each.close();
        Eventually.eventually("no PushRelayKit thread left", () -> Thread.getAllStackTraces().keySet().stream()
            .noneMatch(thread -> thread.isAlive() && thread.getName().startsWith(Threads.PREFIX)));
        assertTrue(org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class, client::registerDevice)
            .getMessage().contains("closed"));
    }
}
