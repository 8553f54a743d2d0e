// A Kotlin app's use of PushRelayKit for Android, compiled against the library by
// scripts/test/android-client.sh (not run): the public API as Kotlin sees it, with the
// nullability of the library's @Nullable and @NonNull annotations.
package io.pushrelay.kit.consumer

import io.pushrelay.kit.FilePushKeyStore
import io.pushrelay.kit.PushRelayCallback
import io.pushrelay.kit.PushRelayClient
import io.pushrelay.kit.PushRelayDecryptor
import io.pushrelay.kit.PushRelayException
import io.pushrelay.kit.PushRelayMessage
import io.pushrelay.kit.UnreadCount
import io.pushrelay.kit.UnreadListener
import java.io.File
import java.util.concurrent.Executor
import java.util.concurrent.TimeUnit

class Consumer(mainExecutor: Executor, folder: File) {
    private val keys = FilePushKeyStore(File(folder, "push-relay-keys"))
    val relay = PushRelayClient(
        PushRelayClient.Configuration.builder("https://push.example.com", "support")
            .locale("en-GB")
            .pushKeys(keys)
            .requestTimeout(20, TimeUnit.SECONDS)
            .build(),
        mainExecutor
    )
    var badge: String? = null

    fun start(token: String, userId: String, backend: (String) -> String) {
        relay.getUnread().addListener(object : UnreadListener {
            override fun onUnreadChanged(count: UnreadCount) {
                badge = count.badgeText()                     // String?: null at 0
                val total: Int = count.total
                val ticket: Int = count.unread("5")
                println("$total unread, $ticket on ticket 5")
            }

            override fun onNetworkError(error: PushRelayException) {
                if (error.isTransient) println("offline: ${error.message}")
                val code: String? = error.code
                println(code ?: error.kind.name)
            }
        })
        relay.setDeviceToken(token)
        relay.authorize(userId, { user -> backend(user) }, object : PushRelayCallback<Void> {
            override fun onSuccess(result: Void?) {
                println("registered: ${relay.isRegistered}")
            }

            override fun onFailure(error: PushRelayException) {
                println("registration failed: $error")
            }
        })
        relay.unread.setUnreadMessageCountDelay(60, TimeUnit.SECONDS)
        relay.unread.enterForeground()
    }

    fun onMessageReceived(data: Map<String, String>) {
        val push: PushRelayMessage = PushRelayMessage.fromData(data) ?: return
        val text = PushRelayDecryptor(keys).textToShow(push)
        val title: String = text.title
        val ticket: String? = push.ticketId
        val upTo: Long? = push.notificationId
        println("$title ${text.body} ${ticket ?: "badge sync"} $upTo")
        relay.unread.handle(push)
    }

    fun readAll(newestSeen: Long?) {
        relay.unread.markAllRead(newestSeen)
        val count: UnreadCount? = relay.unread.count
        println(count?.total ?: 0)
    }

    fun signOut() {
        relay.deauthorize()
        relay.close()
    }
}
