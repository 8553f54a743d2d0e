import Foundation

/// Builds FCM HTTP v1 request bodies as DESIGN.md describes them.
///
/// Pushes are data-only, which the Zendesk SDK recommends: it builds the notification itself and
/// opens the ticket named by `zendesk_sdk_request_id`. FCM data values must be strings, and the
/// data payload is limited to 4096 bytes, so the body is shortened at a character boundary.
enum FCMMessage {
    static let maxDataBytes = 4096

    /// A reply: ticket, title, body and the owner's unread count, high priority, collapsing per ticket.
    static func reply(token: String, title: String, body: String, ticketID: String, unreadCount: Int?) -> [UInt8] {
        func data(_ body: String) -> [String: String] {
            var data = ["zendesk_sdk_request_id": ticketID, "title": title, "body": body]
            if let unreadCount { data["unread_count"] = String(unreadCount) }
            return data
        }
        var fitted = data(body)
        if size(fitted) > maxDataBytes {
            let characters = Array(body)
            var low = 0
            var high = characters.count
            while low < high {
                let middle = (low + high + 1) / 2
                if size(data(String(characters[..<middle]) + "…")) <= maxDataBytes { low = middle } else { high = middle - 1 }
            }
            fitted = data(String(characters[..<low]) + "…")
        }
        return serialize([
            "message": [
                "token": token,
                "data": fitted,
                "android": ["priority": "HIGH", "ttl": "86400s", "collapse_key": APNsHeaders.collapseID(ticketID: ticketID)],
            ]
        ])
    }

    /// A silent unread-count update for read sync: data only, normal priority.
    static func badgeSync(token: String, unreadCount: Int) -> [UInt8] {
        serialize([
            "message": [
                "token": token,
                "data": ["unread_count": String(unreadCount), "zendesk_sdk_event": "read_sync"],
                "android": ["priority": "NORMAL", "ttl": "3600s"],
            ]
        ])
    }

    /// FCM counts keys and values of the data map.
    private static func size(_ data: [String: String]) -> Int {
        data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
    }

    private static func serialize(_ object: [String: Any]) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data())
    }
}

/// What an FCM answer means for the delivery (PROTOCOLS.md, "Errors").
enum FCMOutcome: Equatable, Sendable {
    case delivered(messageName: String?)
    case retry(reason: String, retryAfter: Int?)
    case permanent(reason: String)
    case deadToken(reason: String)
    case credential(reason: String, refreshToken: Bool)

    /// Classifies the status, the body (`error.status`, `error.message`, `error.details[].errorCode`)
    /// and the `retry-after` header.
    static func classify(status: Int, body: [UInt8], retryAfter: String?) -> FCMOutcome {
        let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        if status == 200 { return .delivered(messageName: object?["name"] as? String) }
        let error = object?["error"] as? [String: Any]
        let details = (error?["details"] as? [[String: Any]]) ?? []
        let code = details.compactMap { $0["errorCode"] as? String }.first ?? (error?["status"] as? String) ?? "HTTP \(status)"
        let message = (error?["message"] as? String) ?? ""
        let after = retryAfter.flatMap { Int($0) }
        switch code {
        case "UNREGISTERED":
            return .deadToken(reason: code)
        case "INVALID_ARGUMENT":
            return message.contains("not a valid FCM registration token") ? .deadToken(reason: code) : .permanent(reason: code)
        case "SENDER_ID_MISMATCH":
            return .deadToken(reason: code)
        case "QUOTA_EXCEEDED", "UNAVAILABLE", "INTERNAL":
            return .retry(reason: code, retryAfter: after)
        case "UNAUTHENTICATED":
            return .credential(reason: code, refreshToken: true)
        case "THIRD_PARTY_AUTH_ERROR", "PERMISSION_DENIED":
            return .credential(reason: code, refreshToken: false)
        default:
            switch status {
            case 401: return .credential(reason: code, refreshToken: true)
            case 404: return .deadToken(reason: code)
            case 429, 500, 502, 503, 504: return .retry(reason: code, retryAfter: after)
            default: return .permanent(reason: code)
            }
        }
    }
}
