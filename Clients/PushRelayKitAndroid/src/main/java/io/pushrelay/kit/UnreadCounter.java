package io.pushrelay.kit;

import androidx.annotation.NonNull;
import androidx.annotation.Nullable;

import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.json.JSONException;
import org.json.JSONObject;

/**
 * The authorized user's unread replies, kept current: by the relay's live stream while the app
 * is started ({@link #enterForeground()}), falling back to polling while the stream cannot be
 * held; by polling every {@link #setUnreadMessageCountDelay delay} otherwise; and at once after
 * {@link #markRead}, {@link #markAllRead} and {@link #handle}.
 *
 * <p>Polls are conditional ({@code If-None-Match}): an unchanged count is a bodiless 304 that
 * costs the relay no database query. The next poll is never sooner than the relay's hint
 * ({@code Cache-Control: max-age}). Get the counter from {@link PushRelayClient#getUnread()}; its
 * methods never block the calling thread, and its listeners are called on the client's callback
 * executor, one event at a time, in order.
 */
public final class UnreadCounter {
    /** The poll interval's floor, whatever the delay and hint say. */
    private static final long MIN_POLL_MILLIS = 100;
    /** The poll hint until the relay sends one (its default {@code unread.poll_after_seconds}). */
    private static final long DEFAULT_POLL_HINT_MILLIS = 10000;

    private final Transport transport;
    private final int streamIdleTimeoutMillis;
    private final Clock clock;
    private final Random random;
    private final SerialDispatcher dispatcher;
    /** The app's calls (reads, fetches) and the ending of cancelled requests, off the caller's thread. */
    private final ExecutorService requests = Executors.newCachedThreadPool(new Threads("unread-requests"));
    private final Threads runnerThreads = new Threads("unread");
    private final CopyOnWriteArrayList<UnreadListener> listeners = new CopyOnWriteArrayList<UnreadListener>();
    /** Moves on every authorization change; work begun under another one reports nothing. */
    private final AtomicLong generation = new AtomicLong();

    // Guarded by this.
    private UserSession user;
    /** The user of the last authorization, kept after deauthorization: another user next time sees 0 first. */
    private String lastUserId;
    private String deviceToken;
    private long delayMillis;
    private boolean foreground;
    private Runner runner;
    private UnreadCount known;
    /** The ETag of the last polled body, and that body's count. */
    private String validatorTag;
    private UnreadCount validatorCount;
    private long pollHintMillis = DEFAULT_POLL_HINT_MILLIS;
    private Long lastCompleted;
    /** Set by each authorization: the first run loads the count, also when one is known. */
    private boolean needsLoad;
    private boolean closed;

    UnreadCounter(Transport transport, int streamIdleTimeoutMillis, Clock clock, Random random, SerialDispatcher dispatcher) {
        this.transport = transport;
        this.streamIdleTimeoutMillis = streamIdleTimeoutMillis;
        this.clock = clock;
        this.random = random;
        this.dispatcher = dispatcher;
    }

    // --- Public API -------------------------------------------------------------------------------

    /** The last count reported; {@code null} before the first load. */
    @Nullable
    public synchronized UnreadCount getCount() {
        return known;
    }

    /**
     * Adds a listener. When a count is known it gets {@link UnreadListener#onUnreadChanged} with
     * it first, so a screen created later shows the count at once. Held until removed.
     */
    public void addListener(@NonNull final UnreadListener listener) {
        synchronized (this) {
            listeners.add(listener);
            if (known != null) {
                final UnreadCount current = known;
                final long issuedIn = generation.get();
                dispatcher.enqueue(new Runnable() {
                    @Override
                    public void run() {
                        if (generation.get() == issuedIn && listeners.contains(listener)) listener.onUnreadChanged(current);
                    }
                });
            }
        }
        dispatcher.flush();
    }

    /** Removes a listener; events not yet delivered to it are dropped. */
    public void removeListener(@NonNull UnreadListener listener) {
        listeners.remove(listener);
    }

    /** The delay between background polls, in milliseconds; 0 (the default) polls only at authorization. */
    public synchronized long getUnreadMessageCountDelayMillis() {
        return delayMillis;
    }

    /**
     * Polls every {@code delay} while the live stream is not in use (in the background): the next
     * request that long after the previous one completed, and never sooner than the relay's hint.
     * 0 polls only once, when a user is authorized. Polls at once only when no count is held.
     */
    public void setUnreadMessageCountDelay(long delay, @NonNull TimeUnit unit) {
        synchronized (this) {
            long millis = Math.max(0, unit.toMillis(delay));
            if (millis == delayMillis) return;
            delayMillis = millis;
            restart();
        }
    }

    /** The app is started (Android's {@code ON_START}): hold the live stream, so changes arrive within a moment. */
    public void enterForeground() {
        synchronized (this) {
            if (foreground) return;
            foreground = true;
            restart();
        }
    }

    /** The app is stopped ({@code ON_STOP}): close the live stream and poll every delay, if that is not 0. */
    public void enterBackground() {
        synchronized (this) {
            if (!foreground) return;
            foreground = false;
            restart();
        }
    }

    /** Whether the counter holds the live stream (between {@link #enterForeground()} and {@link #enterBackground()}). */
    public synchronized boolean isForeground() {
        return foreground;
    }

    /**
     * Asks the relay for the count now (a conditional request). Reports a change like any other.
     * Fails with {@link PushRelayException.Kind#NOT_AUTHORIZED} when no user is authorized.
     */
    @NonNull
    public Future<UnreadCount> getUnreadMessagesCount(@Nullable PushRelayCallback<UnreadCount> callback) {
        return Calls.submit(requests, dispatcher, new Calls.Work<UnreadCount>() {
            @Override
            public UnreadCount run() throws PushRelayException {
                Authorization authorization = authorization();
                return fetch(authorization.user, authorization.issuedIn, null);
            }
        }, callback);
    }

    /** {@link #getUnreadMessagesCount(PushRelayCallback)} without a callback. */
    @NonNull
    public Future<UnreadCount> getUnreadMessagesCount() {
        return getUnreadMessagesCount(null);
    }

    /**
     * Marks the replies of one ticket read (the user opened it). The relay updates the badge of
     * the user's other devices; this device is named as the one read on, so it gets no push.
     * Completes with the new count, which is also reported. Not retried when it fails.
     */
    @NonNull
    public Future<UnreadCount> markRead(@NonNull final String ticketId, @Nullable PushRelayCallback<UnreadCount> callback) {
        return Calls.submit(requests, dispatcher, new Calls.Work<UnreadCount>() {
            @Override
            public UnreadCount run() throws PushRelayException {
                Authorization authorization = authorization();
                UserSession current = authorization.user;
                int total = postRead(Arrays.asList("users", current.userId, "tickets", ticketId, "read"), null, current);
                UnreadCount base;
                synchronized (UnreadCounter.this) {
                    base = known == null ? UnreadCount.ZERO : known;
                }
                return settle(base.withoutTicket(ticketId, total), current, authorization.issuedIn);
            }
        }, callback);
    }

    /** {@link #markRead(String, PushRelayCallback)} without a callback. */
    @NonNull
    public Future<UnreadCount> markRead(@NonNull String ticketId) {
        return markRead(ticketId, null);
    }

    /**
     * Marks every ticket read; with {@code upToNotificationId}, only the replies up to that
     * notification id (a push's {@link PushRelayMessage#getNotificationId()}), so a reply that
     * arrived meanwhile stays unread. Completes with the new count. Not retried when it fails.
     */
    @NonNull
    public Future<UnreadCount> markAllRead(@Nullable final Long upToNotificationId, @Nullable PushRelayCallback<UnreadCount> callback) {
        return Calls.submit(requests, dispatcher, new Calls.Work<UnreadCount>() {
            @Override
            public UnreadCount run() throws PushRelayException {
                Authorization authorization = authorization();
                UserSession current = authorization.user;
                int total = postRead(Arrays.asList("users", current.userId, "read-all"), upToNotificationId, current);
                UnreadCount count = total == 0 ? UnreadCount.ZERO : new UnreadCount(total, Collections.<String, Integer>emptyMap());
                return settle(count, current, authorization.issuedIn);
            }
        }, callback);
    }

    /** {@link #markAllRead(Long, PushRelayCallback)} without a callback. */
    @NonNull
    public Future<UnreadCount> markAllRead(@Nullable Long upToNotificationId) {
        return markAllRead(upToNotificationId, null);
    }

    /** Marks every ticket read, whatever arrived meanwhile. */
    @NonNull
    public Future<UnreadCount> markAllRead() {
        return markAllRead(null, null);
    }

    /**
     * Call when a push arrives ({@code onMessageReceived}): a push from the relay (a reply or a
     * badge sync) refreshes the count. Errors are reported to the listeners.
     */
    public void handle(@NonNull PushRelayMessage message) {
        final UserSession current;
        final long issuedIn;
        synchronized (this) {
            if (user == null || closed) return;
            current = user;
            issuedIn = generation.get();
        }
        try {
            requests.execute(new Runnable() {
                @Override
                public void run() {
                    try {
                        fetch(current, issuedIn, null);
                    } catch (PushRelayException error) {
                        report(error, issuedIn);
                    }
                }
            });
        } catch (RejectedExecutionException closed) {
            // The client was closed meanwhile.
        }
    }

    // --- Driven by PushRelayClient ----------------------------------------------------------------

    void authorize(UserSession session) {
        synchronized (this) {
            boolean switching = lastUserId != null && !lastUserId.equals(session.userId);
            stopRunner();
            long issuedIn = generation.incrementAndGet();
            if (!session.userId.equals(lastUserId)) {
                validatorTag = null;
                validatorCount = null;
                known = null;
            }
            user = session;
            lastUserId = session.userId;
            needsLoad = true;
            if (switching) {
                known = UnreadCount.ZERO;
                publish(UnreadCount.ZERO, null, issuedIn);
            }
            restart();
        }
        dispatcher.flush();
    }

    /** Stops everything: no request, no event, until the next authorization. */
    synchronized void deauthorize() {
        stopRunner();
        generation.incrementAndGet();
        user = null;
    }

    synchronized void setDeviceToken(String token) {
        deviceToken = token;
    }

    /** Stops the runner and the request threads for good. */
    void close() {
        synchronized (this) {
            closed = true;
            stopRunner();
            generation.incrementAndGet();
            user = null;
        }
        requests.shutdownNow();
    }

    // --- Work ---------------------------------------------------------------------------------------

    /** The authorized user and the authorization's generation, read together. */
    private static final class Authorization {
        final UserSession user;
        final long issuedIn;

        Authorization(UserSession user, long issuedIn) {
            this.user = user;
            this.issuedIn = issuedIn;
        }
    }

    /** The current authorization, for an app's call; {@link PushRelayException.Kind#NOT_AUTHORIZED} without one. */
    private synchronized Authorization authorization() throws PushRelayException {
        if (user == null) throw PushRelayException.notAuthorized();
        return new Authorization(user, generation.get());
    }

    /** Called with the lock held. */
    private void stopRunner() {
        if (runner == null) return;
        final Runner stopping = runner;
        runner = null;
        stopping.cancelled = true;
        stopping.thread.interrupt();
        // Ending a connection may write to it (TLS close): not on the caller's thread, which may be
        // Android's main thread. After close(), the request executor is gone: the thread's own
        // interrupt and the transport's close end it.
        try {
            requests.execute(new Runnable() {
                @Override
                public void run() {
                    stopping.cancelHold();
                }
            });
        } catch (RejectedExecutionException closing) {
            stopping.cancelHold();
        }
    }

    /** Called with the lock held. */
    private void restart() {
        stopRunner();
        if (user == null || closed) return;
        runner = new Runner(user, generation.get());
        runner.thread = runnerThreads.newThread(runner);
        runner.thread.start();
    }

    private synchronized long pollInterval() {
        return Math.max(MIN_POLL_MILLIS, Math.max(delayMillis, pollHintMillis));
    }

    /** The loop of one mode (foreground or not) for one authorization, until it is cancelled. */
    private final class Runner implements Runnable {
        final UserSession user;
        final long issuedIn;
        volatile boolean cancelled;
        Thread thread;
        private Transport.Hold hold;

        Runner(UserSession user, long issuedIn) {
            this.user = user;
            this.issuedIn = issuedIn;
        }

        /** A hold for the next request; already cancelled when the runner is. */
        synchronized Transport.Hold newHold() {
            hold = new Transport.Hold();
            if (cancelled) hold.cancel();
            return hold;
        }

        void cancelHold() {
            Transport.Hold current;
            synchronized (this) {
                current = hold;
            }
            if (current != null) current.cancel();
        }

        @Override
        public void run() {
            try {
                loop(this);
            } catch (InterruptedException stopped) {
                // Cancelled while waiting.
            }
        }
    }

    private void loop(Runner runner) throws InterruptedException {
        Backoff backoff = new Backoff(random);
        boolean loadFirst;
        synchronized (this) {
            loadFirst = !foreground && (needsLoad || known == null);
        }
        if (loadFirst) {
            poll(runner);
            synchronized (this) {
                if (!runner.cancelled) needsLoad = false;
                // A load that failed counts as completed too: the next poll waits the interval.
                lastCompleted = clock.now();
            }
        }
        while (!runner.cancelled) {
            boolean streaming;
            long delay;
            synchronized (this) {
                streaming = foreground;
                delay = delayMillis;
            }
            if (streaming) {
                PushRelayException failure = null;
                boolean received;
                try {
                    received = stream(runner);
                } catch (PushRelayException error) {
                    failure = error;
                    received = false;
                }
                if (runner.cancelled) return;
                boolean pollNow;
                if (failure == null) {
                    if (received) {
                        backoff.reset();
                        continue;
                    }
                    pollNow = true;
                } else {
                    report(failure, runner.issuedIn);
                    // The relay answered (429 too many streams, 5xx): poll at once. Unreachable: wait.
                    pollNow = failure.getKind() != PushRelayException.Kind.NETWORK;
                }
                if (pollNow) poll(runner);
                // Poll every interval until the next try at the stream.
                long retryAt = clock.now() + backoff.next();
                while (!runner.cancelled) {
                    long nextPoll = clock.now() + pollInterval();
                    if (nextPoll >= retryAt) {
                        clock.sleepUntil(retryAt);
                        break;
                    }
                    clock.sleepUntil(nextPoll);
                    if (runner.cancelled) return;
                    poll(runner);
                }
            } else if (delay > 0) {
                Long last;
                synchronized (this) {
                    last = lastCompleted;
                }
                if (last != null) clock.sleepUntil(last + pollInterval());
                if (runner.cancelled) return;
                poll(runner);
                // A poll that failed counts as completed too: the interval passes before the next.
                synchronized (this) {
                    lastCompleted = clock.now();
                }
            } else {
                // Nothing to do until the app comes to the foreground or sets a delay (a restart).
                clock.sleepUntil(Long.MAX_VALUE);
            }
        }
    }

    private void poll(Runner runner) {
        try {
            fetch(runner.user, runner.issuedIn, runner.newHold());
        } catch (PushRelayException error) {
            // Cancelled by a change of mode: not a failure.
            if (!runner.cancelled) report(error, runner.issuedIn);
        }
    }

    /** {@code GET …/unread}, conditional on the last ETag. */
    private UnreadCount fetch(UserSession user, long issuedIn, Transport.Hold hold) throws PushRelayException {
        String sentTag;
        UnreadCount sentCount;
        synchronized (this) {
            sentTag = validatorTag;
            sentCount = validatorCount;
        }
        Map<String, String> headers = new HashMap<String, String>();
        if (sentTag != null) headers.put("If-None-Match", sentTag);
        Transport.Response response = transport.send("GET", Arrays.asList("users", user.userId, "unread"), null, headers, user, hold);
        Long hint = maxAgeMillis(response.header("Cache-Control"));
        synchronized (this) {
            lastCompleted = clock.now();
            if (hint != null) pollHintMillis = hint;
        }
        UnreadCount count;
        if (response.status == 304) {
            if (sentTag == null) throw PushRelayException.invalidResponse("304 to a request without If-None-Match");
            count = sentCount;
        } else if (response.status == 200) {
            try {
                count = UnreadCount.parse(response.text());
            } catch (JSONException error) {
                throw PushRelayException.invalidResponse("unread counts: " + error.getMessage());
            }
            String etag = response.header("ETag");
            synchronized (this) {
                if (etag != null && issuedIn == generation.get()) {
                    validatorTag = etag;
                    validatorCount = count;
                }
            }
        } else {
            throw Transport.serverError(response);
        }
        apply(count, issuedIn);
        return count;
    }

    /** {@code POST} a read; the relay's new total. */
    private int postRead(List<String> segments, Long upTo, UserSession user) throws PushRelayException {
        String device;
        synchronized (this) {
            device = deviceToken;
        }
        JSONObject body = new JSONObject();
        try {
            if (device != null) body.put("device", device);
            if (upTo != null) body.put("up_to_notification_id", upTo.longValue());
        } catch (JSONException impossible) {
            throw new IllegalStateException(impossible);
        }
        Transport.Response response = transport.sendExpectingSuccess("POST", segments, body.toString().getBytes(Transport.UTF8), user);
        try {
            Object total = new JSONObject(response.text()).opt("total");
            if (total instanceof Number) return ((Number) total).intValue();
        } catch (JSONException error) {
            // Falls through.
        }
        throw PushRelayException.invalidResponse("read: no total");
    }

    /** After a read: the count worked out here when its tickets add up to the relay's total, else the relay's. */
    private UnreadCount settle(UnreadCount count, UserSession user, long issuedIn) throws PushRelayException {
        if (count.ticketSum() == count.getTotal()) {
            apply(count, issuedIn);
            return count;
        }
        return fetch(user, issuedIn, null);
    }

    /**
     * Holds {@code GET …/unread/stream} until it ends, applying each {@code unread} event as it
     * arrives; a refused token is replaced once through the provider.
     *
     * @return whether the stream delivered events before the relay ended it
     * @throws PushRelayException when it could not be held
     */
    private boolean stream(final Runner runner) throws PushRelayException {
        return runner.user.withToken(new UserSession.Attempt<Boolean>() {
            @Override
            public Boolean run(String token) throws PushRelayException, UserSession.Refused {
                return stream(runner, token);
            }
        });
    }

    /** One stream request with {@code token}; {@link UserSession.Refused} on a 401. */
    private boolean stream(Runner runner, String token) throws PushRelayException, UserSession.Refused {
        Transport.Hold hold = runner.newHold();
        transport.register(hold);
        HttpURLConnection connection = null;
        boolean received = false;
        try {
            Map<String, String> headers = new HashMap<String, String>();
            headers.put("Accept", "text/event-stream");
            // Android's HttpURLConnection asks for gzip by itself, and a gzip stream may hold events back.
            headers.put("Accept-Encoding", "identity");
            headers.put("Cache-Control", "no-cache");
            connection = transport.open(transport.url(Arrays.asList("users", runner.user.userId, "unread", "stream")), "GET",
                headers, token, streamIdleTimeoutMillis);
            if (!hold.attach(connection)) return false;
            int status = connection.getResponseCode();
            if (status == 401) throw new UserSession.Refused(Transport.errorMessage(Transport.answer(connection, status), "401"));
            if (status != 200) throw Transport.serverError(Transport.answer(connection, status));
            InputStream input = connection.getInputStream();
            EventStreamParser parser = new EventStreamParser();
            byte[] buffer = new byte[4096];
            int count;
            while ((count = input.read(buffer)) != -1) {
                for (EventStreamParser.Event event : parser.feed(buffer, count)) {
                    if (!event.name.equals("unread")) continue;
                    UnreadCount unread;
                    try {
                        unread = UnreadCount.parse(event.data);
                    } catch (JSONException error) {
                        throw PushRelayException.invalidResponse("a live stream event that is not unread counts");
                    }
                    received = true;
                    synchronized (this) {
                        lastCompleted = clock.now();
                    }
                    apply(unread, runner.issuedIn);
                }
            }
            return received;
        } catch (IOException error) {
            if (runner.cancelled || hold.isCancelled()) return received;
            throw PushRelayException.network(Transport.describe(error), error);
        } finally {
            transport.unregister(hold);
            if (connection != null) connection.disconnect();
        }
    }

    private void apply(UnreadCount count, long issuedIn) {
        synchronized (this) {
            if (issuedIn != generation.get() || count.equals(known)) return;
            known = count;
            publish(count, null, issuedIn);
        }
        dispatcher.flush();
    }

    private void report(PushRelayException error, long issuedIn) {
        synchronized (this) {
            if (issuedIn != generation.get()) return;
            publish(null, error, issuedIn);
        }
        dispatcher.flush();
    }

    /** Queues one event (called with the lock held); it is dropped if the authorization changes first. */
    private void publish(final UnreadCount count, final PushRelayException error, final long issuedIn) {
        dispatcher.enqueue(new Runnable() {
            @Override
            public void run() {
                if (generation.get() != issuedIn) return;
                for (UnreadListener listener : listeners) {
                    if (count != null) {
                        listener.onUnreadChanged(count);
                    } else {
                        listener.onNetworkError(error);
                    }
                }
            }
        });
    }

    /** {@code Cache-Control: max-age=N}, in milliseconds. */
    static Long maxAgeMillis(String header) {
        if (header == null) return null;
        for (String directive : header.split(",")) {
            String[] parts = directive.trim().split("=", 2);
            if (parts.length == 2 && parts[0].trim().toLowerCase(Locale.ROOT).equals("max-age")) {
                try {
                    return (long) (Double.parseDouble(parts[1].trim()) * 1000);
                } catch (NumberFormatException error) {
                    return null;
                }
            }
        }
        return null;
    }
}
