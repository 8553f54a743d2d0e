import Foundation

/// Builds APNs request bodies as DESIGN.md describes them, within APNs' 4096-byte limit.
enum APNsPayload {
    /// APNs rejects larger payloads with 413 PayloadTooLarge.
    static let maxBytes = 4096

    /// An alert push in `full` mode with the default presentation (``alert(_:badge:ticketID:notificationID:presentation:)``).
    static func alert(
        title: String,
        body: String,
        badge: Int?,
        ticketID: String,
        notificationID: Int64? = nil
    ) -> [UInt8] {
        alert(.full(title: title, body: body), badge: badge, ticketID: ticketID, notificationID: notificationID)
    }

    /// An alert push: the alert (the reply's title and body, or for `generic` and `encrypted` the
    /// localisation keys and fallback text), the owner's badge, the app's sound, category and
    /// thread (the ticket), and the ticket as `zendesk_sdk_request_id` beside `aps` so the Zendesk
    /// SDK opens that ticket, and the notification's id as `push_relay_notification_id` (the app's
    /// read-up-to uses it). An encrypted push adds `mutable-content` (the app's notification service
    /// extension decrypts it) and `push_relay_key_id` / `push_relay_ciphertext`. When the whole
    /// does not fit, the reply's body is shortened at a character boundary and ends in "…".
    static func alert(
        _ text: ReplyText,
        badge: Int?,
        ticketID: String,
        notificationID: Int64? = nil,
        presentation: PushPresentation = PushPresentation()
    ) -> [UInt8] {
        func encode(_ body: String) -> [UInt8] {
            var aps: PayloadMembers<PayloadJSON> = [:]
            var object: PayloadMembers<PayloadJSON> = ["zendesk_sdk_request_id": .string(ticketID)]
            switch text {
            case .full(let title, _):
                aps["alert"] = .object(["title": .string(title), "body": .string(body)])
            case .generic:
                aps["alert"] = genericAlert(presentation)
                object["push_relay_content"] = .string("generic")
            case .encrypted(let title, _, let key):
                aps["alert"] = genericAlert(presentation)
                aps["mutable-content"] = .int(1)
                object["push_relay_content"] = .string("encrypted")
                object["push_relay_key_id"] = .string(key.id)
                object["push_relay_ciphertext"] = .string(key.seal(title: title, body: body))
            }
            if let sound = presentation.sound { aps["sound"] = .string(sound) }
            if let badge { aps["badge"] = .int(badge) }
            if presentation.threadByTicket { aps["thread-id"] = .string(ticketID) }
            if let category = presentation.category { aps["category"] = .string(category) }
            object["aps"] = .object(aps)
            if let notificationID { object["push_relay_notification_id"] = .int(Int(notificationID)) }
            return PayloadJSON.object(object).bytes
        }
        return TextFitting.longestFitting(text.body, encode: encode) { $0.count <= maxBytes }
    }

    /// The alert of a push without the reply's text: the app's localisation keys (iOS shows the
    /// app's own string for them) and the fallback text.
    private static func genericAlert(_ presentation: PushPresentation) -> PayloadJSON {
        var alert: PayloadMembers<PayloadJSON> = [
            "title": .string(presentation.fallbackTitle), "body": .string(presentation.fallbackBody),
        ]
        if let key = presentation.titleLocKey { alert["title-loc-key"] = .string(key) }
        if let key = presentation.locKey { alert["loc-key"] = .string(key) }
        return .object(alert)
    }

    /// A silent badge update for read sync: `content-available` 1 and the new badge.
    static func badgeSync(badge: Int) -> [UInt8] {
        PayloadJSON.object(["aps": .object(["content-available": .int(1), "badge": .int(badge)])]).bytes
    }
}

/// APNs request headers for one push.
struct APNsHeaders {
    enum PushType: String {
        case alert
        case background
    }

    /// The request path for a device token. A registered iOS token is hex; a webhook may name any
    /// printable identifier, and one holding `/`, `?`, `#` or `%` must stay one path segment (APNs
    /// then answers `BadDeviceToken` for it), so every byte outside RFC 3986's unreserved set is
    /// percent-encoded.
    static func devicePath(token: String) -> String {
        "/3/device/" + PathSegment.encode(token)
    }

    /// The header list for an alert (priority 10) or a background badge sync (priority 5, as APNs
    /// requires for background pushes).
    static func make(
        type: PushType,
        topic: String,
        bearer: String?,
        ticketID: String?,
        expiration: Date,
        apnsID: UUID
    ) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [
            ("apns-push-type", type.rawValue),
            ("apns-topic", topic),
            ("apns-priority", type == .alert ? "10" : "5"),
            ("apns-expiration", String(Int(expiration.timeIntervalSince1970))),
            ("apns-id", apnsID.lowercasedString),
            ("content-type", "application/json"),
        ]
        if let ticketID, type == .alert {
            headers.append(("apns-collapse-id", TicketCollapseID.make(ticketID: ticketID)))
        }
        if let bearer { headers.append(("authorization", "bearer \(bearer)")) }
        return headers
    }
}
