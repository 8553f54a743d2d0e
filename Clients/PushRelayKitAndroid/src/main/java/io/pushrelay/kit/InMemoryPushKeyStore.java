package io.pushrelay.kit;

import androidx.annotation.NonNull;
import androidx.annotation.Nullable;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** Keys in memory only: for tests, and where nothing needs to outlive the process. */
public final class InMemoryPushKeyStore implements PushKeyStore {
    private List<PushKey> keys = new ArrayList<PushKey>();

    /** An empty store: the first registration creates a key. */
    public InMemoryPushKeyStore() {}

    /** A store holding {@code keys}, newest (current) first; at most {@link #KEPT} are kept. */
    public InMemoryPushKeyStore(@NonNull PushKey... keys) {
        List<PushKey> list = Arrays.asList(keys);
        this.keys = new ArrayList<PushKey>(list.subList(0, Math.min(KEPT, list.size())));
    }

    @Override
    @Nullable
    public synchronized PushKey currentKey() {
        return keys.isEmpty() ? null : keys.get(0);
    }

    @Override
    @Nullable
    public synchronized PushKey key(@NonNull String id) {
        return PushKeyRing.find(keys, id);
    }

    @Override
    public synchronized void save(@NonNull PushKey key) {
        keys = PushKeyRing.saving(key, keys);
    }
}
