package io.pushrelay.kit;

import androidx.annotation.NonNull;
import androidx.annotation.Nullable;

import java.io.IOException;

/**
 * Where a device's push keys are kept: the current one, which registration sends, and the ones
 * before it, so a push encrypted with a key just rotated away still decrypts. The app's
 * {@code FirebaseMessagingService} must read the same store the client registers from.
 *
 * <p>Implementations are called from the library's background threads and must be thread-safe.
 * {@link FilePushKeyStore} keeps the keys in a file (optionally sealed with the Android
 * Keystore); {@link InMemoryPushKeyStore} in memory.
 */
public interface PushKeyStore {
    /** How many keys a store keeps: the current one and the two before it. */
    int KEPT = 3;

    /** The key saved last, or {@code null} when there is none yet. */
    @Nullable
    PushKey currentKey() throws IOException;

    /** The kept key with this id, current or not; {@code null} when none has it. */
    @Nullable
    PushKey key(@NonNull String id) throws IOException;

    /**
     * Makes {@code key} the current key and keeps the previous ones, at most {@link #KEPT} keys in
     * all (the oldest go). Saving a kept key's id again replaces that key.
     */
    void save(@NonNull PushKey key) throws IOException;
}
