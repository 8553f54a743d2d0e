import Foundation

/// Builds APNs request bodies as DESIGN.md describes them, within APNs' 4096-byte limit.
enum APNsPayload {
    /// APNs rejects larger payloads with 413 PayloadTooLarge.
    static let maxBytes = 4096

    /// An alert push: title, body, the owner's badge, the default sound, and the ticket as
    /// `zendesk_sdk_request_id` beside `aps` so the Zendesk SDK opens that ticket. When the whole
    /// does not fit, the body is shortened at a character boundary and ends in "…".
    static func alert(title: String, body: String, badge: Int?, ticketID: String) -> [UInt8] {
        func encode(_ body: String) -> [UInt8] {
            var aps: [String: PayloadJSON] = ["alert": .object(["title": .string(title), "body": .string(body)]), "sound": .string("default")]
            if let badge { aps["badge"] = .int(badge) }
            return PayloadJSON.object(["aps": .object(aps), "zendesk_sdk_request_id": .string(ticketID)]).bytes
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

    /// `apns-collapse-id` from the ticket, at most 64 bytes: a duplicate delivery of the same
    /// ticket's reply collapses on the device.
    static func collapseID(ticketID: String) -> String {
        let candidate = "zendesk-ticket-\(ticketID)"
        if candidate.utf8.count <= 64 { return candidate }
        // Long ticket ids: a stable digest instead (FNV-1a 64, hex).
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in ticketID.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return "zendesk-ticket-" + String(hash, radix: 16)
    }

    /// The header list for an alert (priority 10) or a background badge sync (priority 5, as APNs
    /// requires for background pushes).
    static func make(
        type: PushType, topic: String, bearer: String?, ticketID: String?, expiration: Date, apnsID: UUID
    ) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [
            ("apns-push-type", type.rawValue),
            ("apns-topic", topic),
            ("apns-priority", type == .alert ? "10" : "5"),
            ("apns-expiration", String(Int(expiration.timeIntervalSince1970))),
            ("apns-id", apnsID.lowercasedString),
            ("content-type", "application/json"),
        ]
        if let ticketID, type == .alert { headers.append(("apns-collapse-id", collapseID(ticketID: ticketID))) }
        if let bearer { headers.append(("authorization", "bearer \(bearer)")) }
        return headers
    }
}
