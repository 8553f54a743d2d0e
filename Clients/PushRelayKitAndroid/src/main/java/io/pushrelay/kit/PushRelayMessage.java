package io.pushrelay.kit;

import androidx.annotation.NonNull;
import androidx.annotation.Nullable;

import java.util.Map;

/**
 * What the relay put in a push, read from an FCM message's data map
 * ({@code RemoteMessage.getData()}): a reply on a ticket, or a badge sync after the user read on
 * another device. Immutable.
 *
 * <pre>{@code
 * PushRelayMessage push = PushRelayMessage.fromData(remoteMessage.getData());
 * if (push != null && push.getTicketId() != null) showReply(push);
 * }</pre>
 */
public final class PushRelayMessage {
    /** What a reply's text is, as the relay app's {@code push.content} setting chose. */
    public enum Content {
        /** The reply's title and body (no {@code push_relay_content} in the push). */
        FULL,
        /** The app's fallback texts only; also any value this version does not know. */
        GENERIC,
        /** The fallback texts, the reply encrypted for the device: {@link PushRelayDecryptor} opens it. */
        ENCRYPTED
    }

    private final String ticketId;
    private final String title;
    private final String body;
    private final Integer unreadCount;
    private final Long notificationId;
    private final boolean badgeSync;
    private final Content content;
    private final String keyId;
    private final byte[] ciphertext;
    private final String threadId;

    private PushRelayMessage(Map<String, String> data) {
        ticketId = data.get("zendesk_sdk_request_id");
        title = data.get("title");
        body = data.get("body");
        unreadCount = parseInteger(data.get("unread_count"));
        notificationId = parseLong(data.get("push_relay_notification_id"));
        badgeSync = "read_sync".equals(data.get("zendesk_sdk_event"));
        String contentValue = data.get("push_relay_content");
        if (contentValue == null) {
            content = Content.FULL;
        } else if ("encrypted".equals(contentValue)) {
            content = Content.ENCRYPTED;
        } else {
            content = Content.GENERIC;
        }
        keyId = data.get("push_relay_key_id");
        String sealed = data.get("push_relay_ciphertext");
        ciphertext = sealed == null ? null : Base64Codec.decode(sealed);
        threadId = data.get("thread_id");
    }

    /**
     * Reads an FCM data map; {@code null} when the message did not come from the relay (neither a
     * reply, with {@code zendesk_sdk_request_id}, nor a badge sync).
     */
    @Nullable
    public static PushRelayMessage fromData(@NonNull Map<String, String> data) {
        PushRelayMessage message = new PushRelayMessage(data);
        return message.ticketId != null || message.badgeSync ? message : null;
    }

    /**
     * The ticket an agent replied on ({@code zendesk_sdk_request_id}): open it when the user taps
     * the notification. {@code null} for a badge sync.
     */
    @Nullable
    public String getTicketId() {
        return ticketId;
    }

    /** The notification's title: the reply's, or the app's fallback text when not {@link Content#FULL}. */
    @Nullable
    public String getTitle() {
        return title;
    }

    /** The notification's body: the reply's (perhaps cut, ending in "…"), or the fallback text. */
    @Nullable
    public String getBody() {
        return body;
    }

    /** The user's total unread count when the push was sent ({@code unread_count}). */
    @Nullable
    public Integer getUnreadCount() {
        return unreadCount;
    }

    /**
     * The relay's id of the notification ({@code push_relay_notification_id}); pass the newest one
     * the user has seen to {@link UnreadCounter#markAllRead(Long)}.
     */
    @Nullable
    public Long getNotificationId() {
        return notificationId;
    }

    /** A silent badge update after the user read on another device ({@code zendesk_sdk_event} = {@code read_sync}). */
    public boolean isBadgeSync() {
        return badgeSync;
    }

    /** What the title and body are ({@code push_relay_content}). */
    @NonNull
    public Content getContent() {
        return content;
    }

    /** For an encrypted push: the id of the device's key it was encrypted with ({@code push_relay_key_id}). */
    @Nullable
    public String getKeyId() {
        return keyId;
    }

    /**
     * For an encrypted push: {@code push_relay_ciphertext} decoded from base64 (nonce, ciphertext,
     * tag), a copy; {@code null} when absent or not base64.
     */
    @Nullable
    public byte[] getCiphertext() {
        return ciphertext == null ? null : ciphertext.clone();
    }

    /** The thread the relay groups a ticket's replies in ({@code thread_id}), when it sends one. */
    @Nullable
    public String getThreadId() {
        return threadId;
    }

    byte[] ciphertextBytes() {
        return ciphertext;
    }

    private static Integer parseInteger(String text) {
        if (text == null) return null;
        try {
            return Integer.valueOf(text);
        } catch (NumberFormatException error) {
            return null;
        }
    }

    private static Long parseLong(String text) {
        if (text == null) return null;
        try {
            return Long.valueOf(text);
        } catch (NumberFormatException error) {
            return null;
        }
    }

    @Override
    public String toString() {
        // No text: a title or body in a log line is the notification's content.
        return "PushRelayMessage(ticket: " + ticketId + ", notification: " + notificationId + ", unread: " + unreadCount
            + (badgeSync ? ", badge sync" : "") + ", content: " + content + ")";
    }
}
