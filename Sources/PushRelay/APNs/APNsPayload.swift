import Crypto
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

    /// `apns-collapse-id` from the ticket: a duplicate delivery of the same ticket's reply
    /// collapses on the device. Safe as a header value for any ticket id, by construction: a ticket
    /// id of letters, digits, `-`, `_` and `.` that fits in APNs' 64 bytes is used as it is
    /// (`zendesk-ticket-4711`); any other becomes `zendesk-ticket~` and 128 bits of its SHA-256 in
    /// hex. `~` never appears in the first form, so the two cannot meet, and distinct ticket ids give
    /// distinct collapse ids.
    static func collapseID(ticketID: String) -> String {
        let prefix = "zendesk-ticket-"
        if prefix.utf8.count + ticketID.utf8.count <= 64, !ticketID.isEmpty, ticketID.utf8.allSatisfy(isPlainIDByte) {
            return prefix + ticketID
        }
        let digits = Array("0123456789abcdef".utf8)
        var hex = Array("zendesk-ticket~".utf8)
        for byte in SHA256.hash(data: Array(ticketID.utf8)).prefix(16) {
            hex += [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]]
        }
        return String(decoding: hex, as: UTF8.self)
    }

    private static func isPlainIDByte(_ byte: UInt8) -> Bool {
        InputRules.isAlphanumericASCII(byte) || byte == 0x2D || byte == 0x5F || byte == 0x2E
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
