// The plain-Java parts of docs/client.md's Android guide, compiled by
// scripts/test/android-client.sh (javac --release 8, the library and org.json on the class path)
// so the guide cannot drift from the API: each ```java block of the guide that starts with
// "// Compiled:" is checked to appear here. The Android glue around them (Application,
// FirebaseMessagingService, lifecycle, Keystore) is in the guide only: there is no android.jar here.
package com.example.support;

import io.pushrelay.kit.FilePushKeyStore;
import io.pushrelay.kit.PushRelayCallback;
import io.pushrelay.kit.PushRelayClient;
import io.pushrelay.kit.PushRelayDecryptor;
import io.pushrelay.kit.PushRelayException;
import io.pushrelay.kit.PushRelayMessage;
import io.pushrelay.kit.PushKeyStore;
import io.pushrelay.kit.UnreadCount;
import io.pushrelay.kit.UnreadListener;

import java.io.File;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Executor;

final class Guide {
    /** The app's backend: signs a user JWT for the signed-in user (stands in for the app's own). */
    interface Backend {
        String pushRelayToken(String userId) throws Exception;
    }

    /** Where the badge shows (stands in for the app's view). */
    interface BadgeView {
        void setText(String text);
    }

    static Backend backend;

    // Compiled: the client
    static PushRelayClient makeClient(File noBackupFilesDir, FilePushKeyStore.Sealer sealer, Executor mainExecutor) {
        PushKeyStore keys = new FilePushKeyStore(new File(noBackupFilesDir, "push-relay-keys"), sealer);
        return new PushRelayClient(
            PushRelayClient.Configuration.builder("https://push.example.com", "support")
                .locale(Locale.getDefault().toString())
                .pushKeys(keys)      // leave out unless the relay's app has push.content: encrypted
                .build(),
            mainExecutor);           // ContextCompat.getMainExecutor(context): callbacks on the main thread
    }

    // Compiled: sign-in and sign-out
    static void signedIn(PushRelayClient relay, String userId) {
        relay.authorize(userId, user -> backend.pushRelayToken(user), new PushRelayCallback<Void>() {
            @Override
            public void onSuccess(Void result) {}

            @Override
            public void onFailure(PushRelayException error) {
                // Authorized, and the counter runs; the registration is tried again by the next
                // setDeviceToken, authorize or registerDevice call.
            }
        });
    }

    static void signedOut(PushRelayClient relay) {
        relay.deauthorize(new PushRelayCallback<Void>() {
            @Override
            public void onSuccess(Void result) {}

            @Override
            public void onFailure(PushRelayException error) {
                // Signed out anyway; the unregistration is tried again before the next registration.
            }
        });
    }

    // Compiled: the badge
    static void showBadge(PushRelayClient relay, BadgeView badge) {
        relay.getUnread().addListener(new UnreadListener() {
            @Override
            public void onUnreadChanged(UnreadCount count) {
                badge.setText(count.badgeText());   // null at 0, "7", "99+"
            }

            @Override
            public void onNetworkError(PushRelayException error) {
                // The counter retries by itself. Log it, or show "offline" while error.isTransient().
            }
        });
    }

    // Compiled: a push
    static void received(PushRelayClient relay, PushKeyStore keys, Map<String, String> data) {
        PushRelayMessage push = PushRelayMessage.fromData(data);
        if (push == null) return;                       // not the relay's
        relay.getUnread().handle(push);                 // refreshes the count
        if (push.isBadgeSync()) return;                 // a read on another device: no notification
        PushRelayDecryptor.ReplyText text = new PushRelayDecryptor(keys).textToShow(push);
        showNotification(push.getTicketId(), text.getTitle(), text.getBody(), push.getNotificationId());
    }

    // Compiled: reading
    static void reading(PushRelayClient relay, String ticketId, Long newestSeenNotificationId) {
        relay.getUnread().markRead(ticketId);                        // the user opened the ticket
        relay.getUnread().markAllRead(newestSeenNotificationId);     // "mark all read", up to the newest reply seen
    }

    static void showNotification(String ticketId, String title, String body, Long notificationId) {}
}
