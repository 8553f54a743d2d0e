package io.pushrelay.kit;

import androidx.annotation.NonNull;
import androidx.annotation.Nullable;

/**
 * The outcome of one asynchronous call, delivered on the client's callback executor (the main
 * thread's on Android), in the order the calls completed, one at a time.
 *
 * @param <T> what the call returns ({@link Void} for registration calls: {@code null})
 */
public interface PushRelayCallback<T> {
    /** The call succeeded. */
    void onSuccess(@Nullable T result);

    /** The call failed; the client's state is as its method's documentation says. */
    void onFailure(@NonNull PushRelayException error);
}
