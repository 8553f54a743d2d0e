package io.pushrelay.kit;

import androidx.annotation.NonNull;
import androidx.annotation.Nullable;

import java.security.SecureRandom;
import java.util.Arrays;

/**
 * A device's key for encrypted pushes: an AES-256 key and the id the relay names it by in each
 * push ({@code push_relay_key_id}). The relay gets both at registration; only the device and the
 * relay hold the key. {@link #toString()} shows the id only, never the key.
 */
public final class PushKey {
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final String ID_CHARACTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.";

    private final String id;
    private final byte[] key;

    /**
     * @param id 1 to 64 characters of {@code A-Z a-z 0-9 - _ .}
     * @param key 32 bytes (copied)
     * @throws IllegalArgumentException when either is not so
     */
    public PushKey(@NonNull String id, @NonNull byte[] key) {
        if (!isValidId(id)) throw new IllegalArgumentException("a push key id is 1 to 64 characters of A-Z a-z 0-9 - _ .");
        if (key.length != 32) throw new IllegalArgumentException("a push key is 32 bytes");
        this.id = id;
        this.key = key.clone();
    }

    /** A key from its {@link #getBase64()} text; {@code null} when the id or the text is not valid. */
    @Nullable
    public static PushKey fromBase64(@NonNull String id, @NonNull String base64) {
        byte[] key = Base64Codec.decode(base64);
        if (key == null || key.length != 32 || !isValidId(id)) return null;
        return new PushKey(id, key);
    }

    /** A new random key with a random id of 12 characters. */
    @NonNull
    public static PushKey generate() {
        byte[] idBytes = new byte[9];
        RANDOM.nextBytes(idBytes);
        String id = Base64Codec.encode(idBytes).replace('+', '-').replace('/', '_');
        return generate(id);
    }

    /** A new random key with this id (1 to 64 characters of {@code A-Z a-z 0-9 - _ .}). */
    @NonNull
    public static PushKey generate(@NonNull String id) {
        byte[] key = new byte[32];
        RANDOM.nextBytes(key);
        return new PushKey(id, key);
    }

    /** The id pushes name the key by. */
    @NonNull
    public String getId() {
        return id;
    }

    /** The key's 32 bytes (a copy). */
    @NonNull
    public byte[] getKey() {
        return key.clone();
    }

    /** The key in standard base64 (with padding), as registration sends it in {@code push_key}. */
    @NonNull
    public String getBase64() {
        return Base64Codec.encode(key);
    }

    byte[] keyBytes() {
        return key;
    }

    static boolean isValidId(String id) {
        if (id == null || id.isEmpty() || id.length() > 64) return false;
        for (int index = 0; index < id.length(); index++) {
            if (ID_CHARACTERS.indexOf(id.charAt(index)) < 0) return false;
        }
        return true;
    }

    @Override
    public boolean equals(Object other) {
        if (!(other instanceof PushKey)) return false;
        PushKey that = (PushKey) other;
        return id.equals(that.id) && Arrays.equals(key, that.key);
    }

    @Override
    public int hashCode() {
        return id.hashCode() * 31 + Arrays.hashCode(key);
    }

    @Override
    public String toString() {
        return "PushKey(id: " + id + ")";
    }
}
