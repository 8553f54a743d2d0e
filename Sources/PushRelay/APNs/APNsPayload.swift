import Foundation

/// Builds APNs request bodies as DESIGN.md describes them, within APNs' 4096-byte limit.
enum APNsPayload {
    /// APNs rejects larger payloads with 413 PayloadTooLarge.
    static let maxBytes = 4096

    /// An alert push: title, body, the owner's badge, the default sound, and the ticket as
    /// `zendesk_sdk_request_id` beside `aps` so the Zendesk SDK opens that ticket, and the
    /// notification's id as `push_relay_notification_id` (the app's read-up-to uses it). When the
    /// whole does not fit, the body is shortened at a character boundary and ends in "…".
    static func alert(title: String, body: String, badge: Int?, ticketID: String, notificationID: Int64? = nil) -> [UInt8] {
        func encode(_ body: String) -> [UInt8] {
            var aps: [String: PayloadJSON] = ["alert": .object(["title": .string(title), "body": .string(body)]), "sound": .string("default")]
            if let badge { aps["badge"] = .int(badge) }
            var object: [String: PayloadJSON] = ["aps": .object(aps), "zendesk_sdk_request_id": .string(ticketID)]
            if let notificationID { object["push_relay_notification_id"] = .int(Int(notificationID)) }
            return PayloadJSON.object(object).bytes
        }
        return TextFitting.longestFitting(body, encode: encode) { $0.count <= maxBytes }
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
        if let ticketID, type == .alert { headers.append(("apns-collapse-id", TicketCollapseID.make(ticketID: ticketID))) }
        if let bearer { headers.append(("authorization", "bearer \(bearer)")) }
        return headers
    }
}
