import Foundation

/// What an APNs answer means for the delivery (PROTOCOLS.md, "Responses").
enum APNsOutcome: Equatable, Sendable {
    /// 200: delivered; keep the apns-id.
    case delivered(apnsID: String?)
    /// Try again later (5xx, 429, idle timeout), after `retryAfter` when APNs said so.
    case retry(reason: String, retryAfter: Int?)
    /// The request itself is wrong; retrying cannot help.
    case permanent(reason: String)
    /// The token is dead: mark the device invalid and forward it to Zendesk.
    case deadToken(reason: String)
    /// Our credentials are wrong or expired: refresh once, then alarm; the push is not at fault.
    case credential(reason: String, refreshToken: Bool)

    /// Classifies a status, the body's `reason` and the `retry-after` header.
    static func classify(status: Int, reason: String?, retryAfter: String?, apnsID: String?) -> APNsOutcome {
        let reason = reason ?? "HTTP \(status)"
        switch status {
        case 200:
            return .delivered(apnsID: apnsID)
        case 410:
            return .deadToken(reason: reason)
        case 400 where reason == "BadDeviceToken":
            return .deadToken(reason: reason)
        case 400 where reason == "DeviceTokenNotForTopic":
            return .deadToken(reason: reason)
        case 400 where reason == "IdleTimeout":
            return .retry(reason: reason, retryAfter: nil)
        case 403 where reason == "ExpiredProviderToken":
            return .credential(reason: reason, refreshToken: true)
        case 403:
            return .credential(reason: reason, refreshToken: false)
        case 429 where reason == "TooManyProviderTokenUpdates":
            return .credential(reason: reason, refreshToken: false)
        case 429, 500, 502, 503, 504:
            return .retry(reason: reason, retryAfter: retryAfter.flatMap { Int($0) })
        default:
            return .permanent(reason: reason)
        }
    }
}
