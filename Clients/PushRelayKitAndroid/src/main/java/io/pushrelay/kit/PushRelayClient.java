package io.pushrelay.kit;

import androidx.annotation.NonNull;
import androidx.annotation.Nullable;

import java.io.Closeable;
import java.io.IOException;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.json.JSONException;
import org.json.JSONObject;

/**
 * PushRelay's client for one app on one Android device: registers the device's FCM registration
 * token for the signed-in user and keeps that user's unread count ({@link #getUnread()}).
 *
 * <pre>{@code
 * PushRelayClient relay = new PushRelayClient(
 *     PushRelayClient.Configuration.builder("https://push.example.com", "support").build(),
 *     ContextCompat.getMainExecutor(context));          // callbacks on the main thread
 * relay.setDeviceToken(fcmToken);                        // FirebaseMessagingService.onNewToken
 * relay.authorize("alice", userId -> backend.pushRelayToken(userId));   // after sign-in
 * relay.deauthorize();                                   // at sign-out
 * }</pre>
 *
 * <p>The token and the user may come in either order: the device is registered once both are
 * known. A user JWT the relay refuses (expired, revoked) is replaced through the token provider
 * and the request sent again, once.
 *
 * <p>Threading: no method blocks the calling thread. The registration calls run one at a time,
 * in the order they were made, on a thread of the client's; each returns a {@link Future} and
 * may take a {@link PushRelayCallback}, called on the callback executor. Keep one client per
 * process, and {@link #close()} it when it is no longer needed: its threads then stop.
 */
public final class PushRelayClient implements Closeable {
    /** What the client needs to know: the relay, the app, and optional settings. Immutable. */
    public static final class Configuration {
        private final String baseUrl;
        private final String appId;
        private final String locale;
        private final int requestTimeoutMillis;
        private final int streamIdleTimeoutMillis;
        private final PushKeyStore pushKeys;

        private Configuration(Builder builder) {
            baseUrl = builder.baseUrl;
            appId = builder.appId;
            locale = builder.locale;
            requestTimeoutMillis = builder.requestTimeoutMillis;
            streamIdleTimeoutMillis = builder.streamIdleTimeoutMillis;
            pushKeys = builder.pushKeys;
        }

        /**
         * A builder for the relay at {@code baseUrl} (such as {@code https://push.example.com}; a
         * path prefix is kept) and the app {@code appId} in the relay's configuration.
         */
        @NonNull
        public static Builder builder(@NonNull String baseUrl, @NonNull String appId) {
            return new Builder(baseUrl, appId);
        }

        /** The relay's address. */
        @NonNull
        public String getBaseUrl() {
            return baseUrl;
        }

        /** The app's id in the relay's configuration. */
        @NonNull
        public String getAppId() {
            return appId;
        }

        /** The device's locale, stored with the registration; {@code null}: none sent. */
        @Nullable
        public String getLocale() {
            return locale;
        }

        /** Milliseconds before a request without an answer fails (30 s by default). */
        public int getRequestTimeoutMillis() {
            return requestTimeoutMillis;
        }

        /** Milliseconds without a byte on the live stream before it counts as broken (45 s by default). */
        public int getStreamIdleTimeoutMillis() {
            return streamIdleTimeoutMillis;
        }

        /** The device's keys for encrypted pushes; {@code null}: no key is registered. */
        @Nullable
        public PushKeyStore getPushKeys() {
            return pushKeys;
        }

        /** Builds a {@link Configuration}. */
        public static final class Builder {
            private final String baseUrl;
            private final String appId;
            private String locale;
            private int requestTimeoutMillis = 30000;
            private int streamIdleTimeoutMillis = 45000;
            private PushKeyStore pushKeys;

            private Builder(String baseUrl, String appId) {
                if (baseUrl == null || appId == null || appId.isEmpty()) throw new IllegalArgumentException("a base URL and an app id are needed");
                this.baseUrl = baseUrl;
                this.appId = appId;
            }

            /** The device's locale (such as {@code Locale.getDefault().toLanguageTag()}), stored with the registration. */
            @NonNull
            public Builder locale(@Nullable String locale) {
                this.locale = locale;
                return this;
            }

            /** How long a request may go without an answer before it fails; 30 s by default. */
            @NonNull
            public Builder requestTimeout(long timeout, @NonNull TimeUnit unit) {
                requestTimeoutMillis = positiveMillis(timeout, unit);
                return this;
            }

            /**
             * How long the live stream may go without a byte before it counts as broken and is
             * opened again; 45 s by default (the relay sends a heartbeat every 15 s).
             */
            @NonNull
            public Builder streamIdleTimeout(long timeout, @NonNull TimeUnit unit) {
                streamIdleTimeoutMillis = positiveMillis(timeout, unit);
                return this;
            }

            /**
             * The device's keys for encrypted pushes. When set, registration sends the current key
             * ({@code push_key}, {@code push_key_id}), created and saved first when the store has
             * none, and the relay encrypts replies for this device if the app's
             * {@code push.content} is {@code encrypted}. Use the store the app's
             * {@code FirebaseMessagingService} decrypts with.
             */
            @NonNull
            public Builder pushKeys(@Nullable PushKeyStore pushKeys) {
                this.pushKeys = pushKeys;
                return this;
            }

            /**
             * The configuration.
             *
             * @throws IllegalArgumentException when the base URL is not a URL
             */
            @NonNull
            public Configuration build() {
                Configuration configuration = new Configuration(this);
                new Transport(configuration.baseUrl, configuration.appId, requestTimeoutMillis);
                return configuration;
            }

            private static int positiveMillis(long timeout, TimeUnit unit) {
                long millis = unit.toMillis(timeout);
                if (millis <= 0 || millis > Integer.MAX_VALUE) throw new IllegalArgumentException("a timeout is above 0 and below 24 days");
                return (int) millis;
            }
        }
    }

    /** The registration the relay holds, as far as this client knows. */
    private static final class Registration {
        final String token;
        final String userId;
        final String keyId;

        Registration(String token, String userId, String keyId) {
            this.token = token;
            this.userId = userId;
            this.keyId = keyId;
        }
    }

    /** A registration whose removal failed (offline at sign-out): removed before the next registration. */
    private static final class StaleRegistration {
        final String token;
        final UserSession user;

        StaleRegistration(String token, UserSession user) {
            this.token = token;
            this.user = user;
        }
    }

    private final Configuration configuration;
    private final Transport transport;
    private final SerialDispatcher dispatcher;
    private final UnreadCounter unread;
    /** The registration calls, one at a time, in order. */
    private final ExecutorService worker = Executors.newSingleThreadExecutor(new Threads("client"));

    // Written on the worker thread only, under this; read by the getters.
    private String deviceToken;
    private UserSession user;
    private Registration registered;
    private StaleRegistration staleRegistration;

    /**
     * A client for {@code configuration}; its callbacks and the counter's events run on
     * {@code callbackExecutor} (on Android {@code ContextCompat.getMainExecutor(context)}, or
     * {@code context.getMainExecutor()} from API 28).
     */
    public PushRelayClient(@NonNull Configuration configuration, @NonNull Executor callbackExecutor) {
        this(configuration, callbackExecutor, Clock.SYSTEM, new Random());
    }

    /** With the clock and randomness the tests drive. */
    PushRelayClient(Configuration configuration, Executor callbackExecutor, Clock clock, Random random) {
        this.configuration = configuration;
        transport = new Transport(configuration.getBaseUrl(), configuration.getAppId(), configuration.getRequestTimeoutMillis());
        dispatcher = new SerialDispatcher(callbackExecutor);
        unread = new UnreadCounter(transport, configuration.getStreamIdleTimeoutMillis(), clock, random, dispatcher);
    }

    /** The configuration the client was made with. */
    @NonNull
    public Configuration getConfiguration() {
        return configuration;
    }

    /** The authorized user's unread count. */
    @NonNull
    public UnreadCounter getUnread() {
        return unread;
    }

    /** The authorized user, as of the last completed call; {@code null} when none. */
    @Nullable
    public synchronized String getUserId() {
        return user == null ? null : user.userId;
    }

    /** The device token, as of the last completed call; {@code null} before one is set. */
    @Nullable
    public synchronized String getDeviceToken() {
        return deviceToken;
    }

    /** True once the relay confirmed the registration of the current token for the current user. */
    public synchronized boolean isRegistered() {
        return registered != null && user != null && registered.token.equals(deviceToken) && registered.userId.equals(user.userId);
    }

    /**
     * Sets the device's FCM registration token ({@code FirebaseMessagingService.onNewToken}, or
     * {@code FirebaseMessaging.getInstance().getToken()} at start) and registers it when a user is
     * authorized; otherwise it is kept until one is. A new token removes the old registration
     * first (a failure there is ignored).
     *
     * <p>Fails with the registration's error; the next {@link #setDeviceToken},
     * {@link #authorize} or {@link #registerDevice} tries again.
     */
    @NonNull
    public Future<Void> setDeviceToken(@NonNull final String token, @Nullable PushRelayCallback<Void> callback) {
        if (token.isEmpty()) throw new IllegalArgumentException("an empty device token");
        return submit(new Calls.Work<Void>() {
            @Override
            public Void run() throws PushRelayException {
                Registration previous;
                UserSession current;
                synchronized (PushRelayClient.this) {
                    previous = registered;
                    current = user;
                }
                if (!token.equals(deviceToken) && previous != null && current != null && previous.userId.equals(current.userId)) {
                    // The system replaced the token: the old one goes.
                    try {
                        delete(previous.token, current);
                    } catch (PushRelayException ignored) {
                        // A token the system replaced gets no pushes; the relay drops it at the first.
                    }
                    synchronized (PushRelayClient.this) {
                        registered = null;
                    }
                }
                synchronized (PushRelayClient.this) {
                    deviceToken = token;
                }
                unread.setDeviceToken(token);
                registerNow();
                return null;
            }
        }, callback);
    }

    /** {@link #setDeviceToken(String, PushRelayCallback)} without a callback. */
    @NonNull
    public Future<Void> setDeviceToken(@NonNull String token) {
        return setDeviceToken(token, null);
    }

    /**
     * Authorizes {@code userId}: the counter starts, and the device is registered for the user as
     * soon as its token is known. {@code tokenProvider} is asked for a user JWT when a request
     * needs one, and again whenever the relay refuses the last one.
     *
     * <p>Authorizing the user already authorized changes nothing (no event) and retries a failed
     * registration. Another user first ends the previous one's registration (the relay refuses a
     * device linked to another user), and the counter reports 0 once before the new user's count.
     *
     * <p>Fails with the registration's error; the user stays authorized, the counter runs, and
     * the next {@link #setDeviceToken}, {@link #authorize} or {@link #registerDevice} tries again.
     */
    @NonNull
    public Future<Void> authorize(@NonNull final String userId, @NonNull final UserTokenProvider tokenProvider,
        @Nullable PushRelayCallback<Void> callback) {
        if (userId.isEmpty()) throw new IllegalArgumentException("an empty user id");
        return submit(new Calls.Work<Void>() {
            @Override
            public Void run() throws PushRelayException {
                UserSession previous = user;
                if (previous != null && previous.userId.equals(userId)) {
                    registerNow();
                    return null;
                }
                if (previous != null) {
                    synchronized (PushRelayClient.this) {
                        user = null;
                    }
                    unread.deauthorize();
                    endRegistration(previous);
                }
                UserSession session = new UserSession(userId, tokenProvider);
                synchronized (PushRelayClient.this) {
                    user = session;
                }
                unread.authorize(session);
                registerNow();
                return null;
            }
        }, callback);
    }

    /** {@link #authorize(String, UserTokenProvider, PushRelayCallback)} without a callback. */
    @NonNull
    public Future<Void> authorize(@NonNull String userId, @NonNull UserTokenProvider tokenProvider) {
        return authorize(userId, tokenProvider, null);
    }

    /**
     * Signs the user out: the counter stops (no more events) and the device is unregistered, so it
     * gets no more of the user's pushes.
     *
     * <p>Fails when the unregistration fails (offline); the user is signed out anyway, and the
     * removal is tried before the next registration, which fails until it succeeds.
     */
    @NonNull
    public Future<Void> deauthorize(@Nullable PushRelayCallback<Void> callback) {
        return submit(new Calls.Work<Void>() {
            @Override
            public Void run() throws PushRelayException {
                UserSession previous = user;
                if (previous == null) return null;
                synchronized (PushRelayClient.this) {
                    user = null;
                }
                unread.deauthorize();
                PushRelayException error = endRegistration(previous);
                if (error != null) throw error;
                return null;
            }
        }, callback);
    }

    /** {@link #deauthorize(PushRelayCallback)} without a callback. */
    @NonNull
    public Future<Void> deauthorize() {
        return deauthorize(null);
    }

    /**
     * Registers the device for the authorized user, with the current push key when the
     * configuration has a key store, unless that was done already: call it when the app starts,
     * to retry a registration that failed. Nothing happens without a token and a user.
     *
     * <p>Fails with {@link PushRelayException.Kind#PUSH_KEY_STORE} when the key store fails
     * (nothing is sent then), or the request's error.
     */
    @NonNull
    public Future<Void> registerDevice(@Nullable PushRelayCallback<Void> callback) {
        return submit(new Calls.Work<Void>() {
            @Override
            public Void run() throws PushRelayException {
                registerNow();
                return null;
            }
        }, callback);
    }

    /** {@link #registerDevice(PushRelayCallback)} without a callback. */
    @NonNull
    public Future<Void> registerDevice() {
        return registerDevice(null);
    }

    /**
     * Replaces the device's push key: saves a new one in the key store (which keeps the previous
     * ones, so pushes already on their way still decrypt) and registers it when a token and a user
     * are known; otherwise the next registration sends it. Nothing happens without a key store.
     *
     * <p>Fails with {@link PushRelayException.Kind#PUSH_KEY_STORE} when the store fails, or the
     * registration's error; the new key stays saved and the next registration sends it.
     */
    @NonNull
    public Future<Void> rotatePushKey(@Nullable PushRelayCallback<Void> callback) {
        return submit(new Calls.Work<Void>() {
            @Override
            public Void run() throws PushRelayException {
                PushKeyStore store = configuration.getPushKeys();
                if (store == null) return null;
                try {
                    store.save(PushKey.generate());
                } catch (IOException error) {
                    throw PushRelayException.pushKeyStore(String.valueOf(error.getMessage()), error);
                }
                registerNow();
                return null;
            }
        }, callback);
    }

    /** {@link #rotatePushKey(PushRelayCallback)} without a callback. */
    @NonNull
    public Future<Void> rotatePushKey() {
        return rotatePushKey(null);
    }

    /**
     * Stops the client: the counter's stream and polls end, requests under way are cut, the
     * client's threads stop, and later calls throw {@link IllegalStateException}. The relay keeps
     * the registration (call {@link #deauthorize()} first to end it). Does not block.
     */
    @Override
    public void close() {
        worker.shutdownNow();
        unread.close();
        // Ending connections may write to them (TLS close): not on the caller's thread.
        Thread closing = new Threads("close").newThread(new Runnable() {
            @Override
            public void run() {
                transport.close();
            }
        });
        closing.start();
    }

    // --- On the worker thread ---------------------------------------------------------------------

    private <T> Future<T> submit(Calls.Work<T> work, PushRelayCallback<T> callback) {
        return Calls.submit(worker, dispatcher, work, callback);
    }

    private void registerNow() throws PushRelayException {
        String token;
        UserSession current;
        StaleRegistration stale;
        synchronized (this) {
            token = deviceToken;
            current = user;
            stale = staleRegistration;
        }
        if (token == null || current == null) return;
        if (stale != null) {
            delete(stale.token, stale.user);
            synchronized (this) {
                staleRegistration = null;
            }
        }
        PushKey key = currentPushKey();
        String keyId = key == null ? null : key.getId();
        synchronized (this) {
            if (registered != null && registered.token.equals(token) && registered.userId.equals(current.userId)
                && (keyId == null ? registered.keyId == null : keyId.equals(registered.keyId))) {
                return;
            }
        }
        JSONObject body = new JSONObject();
        try {
            body.put("platform", "android");
            body.put("user_id", current.userId);
            if (configuration.getLocale() != null) body.put("locale", configuration.getLocale());
            if (key != null) {
                body.put("push_key", key.getBase64());
                body.put("push_key_id", key.getId());
            }
        } catch (JSONException impossible) {
            throw new IllegalStateException(impossible);
        }
        transport.sendExpectingSuccess("PUT", Arrays.asList("devices", token), body.toString().getBytes(Transport.UTF8), current);
        synchronized (this) {
            registered = new Registration(token, current.userId, keyId);
        }
    }

    /** The key registration sends: the store's current one, or a new one saved first; none without a store. */
    private PushKey currentPushKey() throws PushRelayException {
        PushKeyStore store = configuration.getPushKeys();
        if (store == null) return null;
        try {
            PushKey key = store.currentKey();
            if (key != null) return key;
            key = PushKey.generate();
            store.save(key);
            return key;
        } catch (IOException error) {
            throw PushRelayException.pushKeyStore(String.valueOf(error.getMessage()), error);
        } catch (RuntimeException error) {
            throw PushRelayException.pushKeyStore(String.valueOf(error), error);
        }
    }

    /** Removes the registration {@code previous} holds, or remembers it for later when that fails. */
    private PushRelayException endRegistration(UserSession previous) {
        Registration ending;
        synchronized (this) {
            ending = registered;
            if (ending == null || !ending.userId.equals(previous.userId)) return null;
            registered = null;
        }
        try {
            delete(ending.token, previous);
            return null;
        } catch (PushRelayException error) {
            synchronized (this) {
                staleRegistration = new StaleRegistration(ending.token, previous);
            }
            return error;
        }
    }

    private void delete(String token, UserSession as) throws PushRelayException {
        transport.sendExpectingSuccess("DELETE", Arrays.asList("devices", token), null, as);
    }
}
