package io.pushrelay.kit;

import androidx.annotation.NonNull;

/**
 * Supplies a user JWT for the relay: HS256 with the app's {@code user_tokens} key, {@code sub} =
 * the user, {@code exp} set. The app's backend signs it; the app fetches it here.
 *
 * <p>Called on one of the library's background threads (never the caller's or the main thread),
 * so it may block on a network request. It is called when a request needs a token and none is
 * held, and again after the relay refuses the last one (401: expired or revoked); concurrent
 * requests share one call.
 */
public interface UserTokenProvider {
    /**
     * A user JWT for {@code userId}.
     *
     * @throws Exception when no token can be had; the request fails with
     *     {@link PushRelayException.Kind#TOKEN_PROVIDER}
     */
    @NonNull
    String userToken(@NonNull String userId) throws Exception;
}
