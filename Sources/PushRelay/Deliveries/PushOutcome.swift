import Foundation

/// What a provider's answer means for the delivery (PROTOCOLS.md), for APNs and FCM alike.
enum PushOutcome: Equatable, Sendable {
    /// Delivered; keep the provider's id (apns-id, FCM message name). `environment` is set when
    /// APNs accepted a device of unknown environment on the other environment's host.
    case delivered(providerID: String?, environment: String? = nil)
    /// Try again later (5xx, 429, idle timeout), after `retryAfter` when APNs said so.
    case retry(reason: String, retryAfter: Int?)
    /// The request itself is wrong; retrying cannot help.
    case permanent(reason: String)
    /// The token is dead: mark the device invalid and forward it to Zendesk. `since` is when APNs
    /// says it stopped being valid (410 `timestamp`): a device registered again after that keeps
    /// its registration.
    case deadToken(reason: String, since: Date? = nil)
    /// Our credentials are wrong or expired: refresh once, then alarm; the push is not at fault.
    case credential(reason: String, refreshToken: Bool)
    /// The relay could not build a request for this push (curl refused a header or the URL);
    /// nothing was sent, and sending again would fail the same way.
    case unsendable(reason: String)

    /// Classifies an APNs answer: the status, the body's `reason` (and, for 410, `timestamp`) and
    /// the `retry-after` header.
    static func apns(status: Int, reason: String?, retryAfter: String?, apnsID: String?, timestamp: Date? = nil) -> PushOutcome {
        let reason = reason ?? "HTTP \(status)"
        switch status {
        case 200:
            return .delivered(providerID: apnsID)
        case 410:
            return .deadToken(reason: reason, since: timestamp)
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

extension PushOutcome {
    /// Classifies an FCM answer: the status, the body (`error.status`, `error.message`,
    /// `error.details[].errorCode`) and the `retry-after` header.
    static func fcm(status: Int, body: [UInt8], retryAfter: String?) -> PushOutcome {
        let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
        if status == 200 { return .delivered(providerID: object?["name"] as? String) }
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
