// Must NOT compile: UnreadCounter.getCount() is @Nullable, so Kotlin sees UnreadCount?.
// scripts/test/android-client.sh checks that kotlinc refuses it with a type mismatch.
package io.pushrelay.kit.consumer

import io.pushrelay.kit.PushRelayClient
import io.pushrelay.kit.UnreadCount

fun lastCount(relay: PushRelayClient): UnreadCount = relay.unread.count
