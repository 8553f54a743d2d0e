package io.pushrelay.kit;

import androidx.annotation.NonNull;
import androidx.annotation.Nullable;

import java.nio.charset.Charset;
import java.util.Map;

import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;

import org.json.JSONObject;

/**
 * Opens encrypted pushes ({@code push_relay_content} = {@code encrypted}) with the device's kept
 * keys, in the app's {@code FirebaseMessagingService}:
 *
 * <pre>{@code
 * PushRelayMessage push = PushRelayMessage.fromData(remoteMessage.getData());
 * PushRelayDecryptor.ReplyText text = new PushRelayDecryptor(keys).textToShow(push);
 * }</pre>
 *
 * <p>AES-256-GCM over nonce (12 bytes) ‖ ciphertext ‖ tag (16 bytes), the associated data
 * {@code push-relay:v1:<key id>:<notification id>}, the plaintext {@code {"title","body"}}
 * (docs/http-api.md). Every failure (not encrypted, an unknown key id, a changed byte, a wrong
 * key, a push id that is not the one encrypted for, a store that cannot be read) gives
 * {@code null}, so the push's own generic text is shown.
 */
public final class PushRelayDecryptor {
    private static final Charset UTF8 = Charset.forName("UTF-8");

    /** A reply's title and body. */
    public static final class ReplyText {
        private final String title;
        private final String body;

        /** A reply's text. */
        public ReplyText(@NonNull String title, @NonNull String body) {
            this.title = title;
            this.body = body;
        }

        /** The notification's title. */
        @NonNull
        public String getTitle() {
            return title;
        }

        /** The notification's body. */
        @NonNull
        public String getBody() {
            return body;
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof ReplyText && ((ReplyText) other).title.equals(title) && ((ReplyText) other).body.equals(body);
        }

        @Override
        public int hashCode() {
            return title.hashCode() * 31 + body.hashCode();
        }

        @Override
        public String toString() {
            return "ReplyText(" + title.length() + " and " + body.length() + " characters)";
        }
    }

    private final PushKeyStore keys;

    /** A decryptor reading the device's keys from {@code keys}: the store the client registers from. */
    public PushRelayDecryptor(@NonNull PushKeyStore keys) {
        this.keys = keys;
    }

    /** Decrypts an FCM message's data map; {@code null} on any failure. */
    @Nullable
    public ReplyText decrypt(@NonNull Map<String, String> data) {
        PushRelayMessage message = PushRelayMessage.fromData(data);
        return message == null ? null : decrypt(message);
    }

    /** Decrypts a push already read; {@code null} on any failure. */
    @Nullable
    public ReplyText decrypt(@NonNull PushRelayMessage message) {
        byte[] sealed = message.ciphertextBytes();
        String keyId = message.getKeyId();
        Long notificationId = message.getNotificationId();
        if (message.getContent() != PushRelayMessage.Content.ENCRYPTED || keyId == null || notificationId == null || sealed == null
            || sealed.length < 12 + 16) {
            return null;
        }
        try {
            PushKey key = keys.key(keyId);
            if (key == null) return null;
            Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
            cipher.init(Cipher.DECRYPT_MODE, new SecretKeySpec(key.keyBytes(), "AES"), new GCMParameterSpec(128, sealed, 0, 12));
            cipher.updateAAD(associatedData(keyId, notificationId));
            byte[] plaintext = cipher.doFinal(sealed, 12, sealed.length - 12);
            JSONObject reply = new JSONObject(new String(plaintext, UTF8));
            Object title = reply.opt("title");
            Object body = reply.opt("body");
            if (!(title instanceof String) || !(body instanceof String)) return null;
            return new ReplyText((String) title, (String) body);
        } catch (Exception error) {
            // A wrong key or a changed byte (AEADBadTagException), a store that cannot be read, bad JSON.
            return null;
        }
    }

    /**
     * The text to show for a reply: decrypted when it is encrypted and opens, else the push's own
     * title and body (the reply's, or the app's fallback texts); empty strings where the push has
     * none.
     */
    @NonNull
    public ReplyText textToShow(@NonNull PushRelayMessage message) {
        ReplyText decrypted = decrypt(message);
        if (decrypted != null) return decrypted;
        return new ReplyText(message.getTitle() == null ? "" : message.getTitle(), message.getBody() == null ? "" : message.getBody());
    }

    /** {@code push-relay:v1:<key id>:<notification id>}, which the ciphertext is bound to. */
    static byte[] associatedData(String keyId, long notificationId) {
        return ("push-relay:v1:" + keyId + ":" + notificationId).getBytes(UTF8);
    }
}
