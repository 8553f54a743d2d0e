package io.pushrelay.kit;

import androidx.annotation.NonNull;

/**
 * Receives an {@link UnreadCounter}'s events on the client's callback executor (the main
 * thread's on Android), one at a time, in the order they happened.
 */
public interface UnreadListener {
    /**
     * The user's unread count changed: after it first loads, on every change the relay reports,
     * and once with {@link UnreadCount#ZERO} when a different user is authorized.
     */
    void onUnreadChanged(@NonNull UnreadCount count);

    /** A request the counter made by itself (poll, live stream) failed. It retries on its own. */
    void onNetworkError(@NonNull PushRelayException error);
}
