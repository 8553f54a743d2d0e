package io.pushrelay.kit;

import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;

/** An authorized user: its id, the app's token provider, and the last token it gave. */
final class UserSession {
    final String userId;
    private final UserTokenProvider provider;
    /** The token in use, and the provider call under way; concurrent callers share that call. */
    private String token;
    private FutureTask<String> pending;

    UserSession(String userId, UserTokenProvider provider) {
        this.userId = userId;
        this.provider = provider;
    }

    /** The held token, or a new one from the provider (concurrent callers share one call). */
    String token() throws PushRelayException {
        FutureTask<String> task;
        boolean mine = false;
        synchronized (this) {
            if (token != null) return token;
            if (pending == null) {
                pending = new FutureTask<String>(new Callable<String>() {
                    @Override
                    public String call() throws Exception {
                        String value = provider.userToken(userId);
                        if (value == null || value.isEmpty()) throw new IllegalStateException("the token provider returned no token");
                        return value;
                    }
                });
                mine = true;
            }
            task = pending;
        }
        if (mine) task.run();
        try {
            String value = task.get();
            synchronized (this) {
                if (pending == task) {
                    token = value;
                    pending = null;
                }
            }
            return value;
        } catch (ExecutionException error) {
            synchronized (this) {
                if (pending == task) pending = null;
            }
            Throwable cause = error.getCause() == null ? error : error.getCause();
            throw PushRelayException.tokenProvider(String.valueOf(cause.getMessage() == null ? cause : cause.getMessage()), cause);
        } catch (InterruptedException error) {
            Thread.currentThread().interrupt();
            throw PushRelayException.network("interrupted", error);
        }
    }

    /** One try with a token: an answer, or {@link Refused} when the relay answered 401. */
    interface Attempt<T> {
        T run(String token) throws PushRelayException, Refused;
    }

    /** The relay refused the token (401); its error message. */
    static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;

        Refused(String message) {
            super(message);
        }
    }

    /**
     * Runs {@code attempt} with the user's token. When the relay refuses the token, it is
     * forgotten and {@code attempt} runs once more with a fresh one from the provider; a second
     * refusal is {@link PushRelayException.Kind#UNAUTHORIZED}.
     */
    <T> T withToken(Attempt<T> attempt) throws PushRelayException {
        boolean refreshed = false;
        while (true) {
            String token = token();
            try {
                return attempt.run(token);
            } catch (Refused refusal) {
                refused(token);
                if (refreshed) throw PushRelayException.unauthorized(refusal.getMessage());
                refreshed = true;
            }
        }
    }

    /** Forgets {@code refused} after the relay refused it, so the next request asks the provider. */
    synchronized void refused(String refused) {
        if (refused.equals(token)) token = null;
    }
}
