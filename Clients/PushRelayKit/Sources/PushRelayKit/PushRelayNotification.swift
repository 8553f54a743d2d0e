import Foundation

/// What the relay put in a push, read from the notification's payload: APNs `userInfo` on iOS,
/// or an FCM message's `data` map on Android (all strings there).
///
/// ```swift
/// if let push = PushRelayNotification(userInfo: response.notification.request.content.userInfo),
///    let ticket = push.ticketID {
///     openTicket(ticket)
/// }
/// ```
public struct PushRelayNotification: Sendable, Hashable {
    /// The ticket an agent replied on (`zendesk_sdk_request_id`): open it when the user taps the
    /// notification. `nil` for a badge sync.
    public var ticketID: String?
    /// The user's total unread count when the push was sent (`aps.badge`, or FCM's `unread_count`).
    public var badge: Int?
    /// The relay's id of the notification (`push_relay_notification_id`); pass the newest one the
    /// user has seen to ``UnreadCounter/markAllRead(upTo:)``.
    public var notificationID: Int64?
    /// A silent badge update the relay sends after the user read on another device (APNs
    /// `content-available` without an alert, or FCM `zendesk_sdk_event` = `read_sync`).
    public var isBadgeSync: Bool
    /// What the alert shows (`push_relay_content`).
    public var content: Content
    /// For an encrypted push: the id of the device's key it was encrypted with (`push_relay_key_id`).
    public var keyID: String?
    /// For an encrypted push: `push_relay_ciphertext` decoded from base64, the nonce (12 bytes),
    /// ciphertext and tag (16 bytes). ``PushRelayNotificationDecryptor`` opens it.
    public var ciphertext: Data?

    /// What a push's alert shows, as the app's `push.content` setting on the relay chose.
    public enum Content: String, Sendable {
        /// The reply's title and body (no `push_relay_content` in the push).
        case full
        /// The app's fallback texts only (and their localization keys); also any value this
        /// version does not know.
        case generic
        /// The fallback texts in the alert, the reply encrypted for the device in
        /// ``PushRelayNotification/ciphertext``.
        case encrypted
    }

    public init(
        ticketID: String?,
        badge: Int?,
        notificationID: Int64?,
        isBadgeSync: Bool,
        content: Content = .full,
        keyID: String? = nil,
        ciphertext: Data? = nil
    ) {
        self.ticketID = ticketID
        self.badge = badge
        self.notificationID = notificationID
        self.isBadgeSync = isBadgeSync
        self.content = content
        self.keyID = keyID
        self.ciphertext = ciphertext
    }

    /// Reads a push; `nil` when it did not come from the relay (neither a reply nor a badge sync).
    public init?(userInfo: [AnyHashable: Any]) {
        let aps = userInfo["aps"] as? [AnyHashable: Any]
        ticketID = Self.string(userInfo["zendesk_sdk_request_id"])
        notificationID = Self.integer(userInfo["push_relay_notification_id"]).map(Int64.init)
        badge = Self.integer(aps?["badge"]) ?? Self.integer(userInfo["unread_count"])
        let silentAPNs = aps != nil && Self.integer(aps?["content-available"]) == 1 && aps?["alert"] == nil && ticketID == nil
        let syncFCM = Self.string(userInfo["zendesk_sdk_event"]) == "read_sync"
        isBadgeSync = silentAPNs || syncFCM
        content = Self.string(userInfo["push_relay_content"]).map { Content(rawValue: $0) ?? .generic } ?? .full
        keyID = Self.string(userInfo["push_relay_key_id"])
        ciphertext = Self.string(userInfo["push_relay_ciphertext"]).flatMap { Data(base64Encoded: $0) }
        guard ticketID != nil || isBadgeSync else { return nil }
    }

    /// Reads an FCM message's data map.
    public init?(data: [String: String]) {
        self.init(userInfo: data as [AnyHashable: Any])
    }

    private static func string(_ value: Any?) -> String? {
        switch value {
        case let text as String: text
        case let number as Int: String(number)
        case let number as NSNumber: number.stringValue
        default: nil
        }
    }

    private static func integer(_ value: Any?) -> Int? {
        switch value {
        case let number as Int: number
        case let number as Int64: Int(exactly: number)
        case let number as NSNumber: number.intValue
        case let text as String: Int(text)
        default: nil
        }
    }
}
