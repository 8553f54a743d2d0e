import Foundation

/// Builds FCM HTTP v1 request bodies as DESIGN.md describes them.
///
/// Pushes are data-only, which the Zendesk SDK recommends: it builds the notification itself and
/// opens the ticket named by `zendesk_sdk_request_id`. FCM data values must be strings, and the
/// data payload is limited to 4096 bytes, so the body is shortened at a character boundary.
enum FCMMessage {
    static let maxDataBytes = 4096

    /// A reply in `full` mode with the default presentation (``reply(token:text:ticketID:unreadCount:notificationID:ttl:presentation:)``).
    static func reply(
        token: String,
        title: String,
        body: String,
        ticketID: String,
        unreadCount: Int?,
        notificationID: Int64? = nil,
        ttl: Duration = .seconds(86400)
    ) -> [UInt8] {
        reply(
            token: token,
            text: .full(title: title, body: body),
            ticketID: ticketID,
            unreadCount: unreadCount,
            notificationID: notificationID,
            ttl: ttl
        )
    }

    /// A reply: ticket, title, body and the owner's unread count, high priority, collapsing per ticket,
    /// kept by FCM for `ttl` (`delivery.push_ttl_seconds`, as APNs' `apns-expiration`).
    /// The notification's id goes as `push_relay_notification_id` (the app's read-up-to uses it),
    /// the ticket as `thread_id` unless the app turned grouping off. For `generic` and
    /// `encrypted`, title and body are the app's fallback text and `push_relay_content` names the
    /// mode; an encrypted push adds `push_relay_key_id` and `push_relay_ciphertext`.
    static func reply(
        token: String,
        text: ReplyText,
        ticketID: String,
        unreadCount: Int?,
        notificationID: Int64? = nil,
        ttl: Duration = .seconds(86400),
        presentation: PushPresentation = PushPresentation()
    ) -> [UInt8] {
        func data(_ body: String) -> PayloadMembers<String> {
            var data: PayloadMembers<String> = ["zendesk_sdk_request_id": ticketID]
            switch text {
            case .full(let title, _):
                data["title"] = title
                data["body"] = body
            case .generic:
                data["title"] = presentation.fallbackTitle
                data["body"] = presentation.fallbackBody
                data["push_relay_content"] = "generic"
            case .encrypted(let title, _, let key):
                data["title"] = presentation.fallbackTitle
                data["body"] = presentation.fallbackBody
                data["push_relay_content"] = "encrypted"
                data["push_relay_key_id"] = key.id
                data["push_relay_ciphertext"] = key.seal(title: title, body: body)
            }
            if let unreadCount { data["unread_count"] = String(unreadCount) }
            if let notificationID { data["push_relay_notification_id"] = String(notificationID) }
            if presentation.threadByTicket { data["thread_id"] = ticketID }
            return data
        }
        let fitted = TextFitting.longestFitting(text.body, encode: data) { size($0) <= maxDataBytes }
        return PayloadJSON.object([
            "message": .object([
                "token": .string(token),
                "data": .object(fitted.mapValues(PayloadJSON.string)),
                "android": .object([
                    "priority": .string("HIGH"), "ttl": .string("\(ttl.components.seconds)s"),
                    "collapse_key": .string(TicketCollapseID.make(ticketID: ticketID)),
                ]),
            ])
        ]).bytes
    }

    /// A silent unread-count update for read sync: data only, normal priority.
    static func badgeSync(token: String, unreadCount: Int) -> [UInt8] {
        PayloadJSON.object([
            "message": .object([
                "token": .string(token),
                "data": .object([
                    "unread_count": .string(String(unreadCount)), "zendesk_sdk_event": .string("read_sync"),
                ]),
                "android": .object(["priority": .string("NORMAL"), "ttl": .string("3600s")]),
            ])
        ]).bytes
    }

    /// FCM counts keys and values of the data map.
    private static func size(_ data: PayloadMembers<String>) -> Int {
        data.pairs.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
    }
}
