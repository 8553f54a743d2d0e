import Foundation
import StrictJSON

/// The error code of an FCM HTTP v1 answer: `error.details[].errorCode`, else `error.status`
/// (FCM's `ErrorCode` and Google's canonical codes); any other is kept as ``ProviderReason/unknown(_:)``.
enum FCMErrorCode: String, Sendable, Hashable, CaseIterable {
    case unregistered = "UNREGISTERED"
    case invalidArgument = "INVALID_ARGUMENT"
    case senderIDMismatch = "SENDER_ID_MISMATCH"
    case quotaExceeded = "QUOTA_EXCEEDED"
    case unavailable = "UNAVAILABLE"
    case internalError = "INTERNAL"
    case unauthenticated = "UNAUTHENTICATED"
    case thirdPartyAuthError = "THIRD_PARTY_AUTH_ERROR"
    case permissionDenied = "PERMISSION_DENIED"
    case notFound = "NOT_FOUND"
}

extension PushOutcome {
    /// Classifies an FCM answer: the status, the body (`error.status`, `error.message`,
    /// `error.details[].errorCode`) and the `retry-after` header (``RetryAfter``: seconds or an
    /// HTTP-date, bounded). Any body and any header give an outcome; none can trap.
    static func fcm(status: Int, body: [UInt8], retryAfter: String?, now: Date = Date()) -> PushOutcome {
        // The project's own parser, not Foundation's: no bridged objects per push.
        let object = (try? StrictJSON.parse(body))?.objectValue
        if status == 200 { return .delivered(providerID: object?["name"]?.stringValue) }
        let error = object?["error"]?.objectValue
        let details = error?["details"]?.arrayValue ?? []
        let name =
            details.compactMap { $0.objectValue?["errorCode"]?.stringValue }.first ?? error?["status"]?.stringValue
            ?? "HTTP \(status)"
        let message = error?["message"]?.stringValue ?? ""
        let after = RetryAfter.seconds(retryAfter, now: now)
        switch ProviderReason<FCMErrorCode>(name) {
        case .known(.unregistered), .known(.senderIDMismatch):
            return .deadToken(reason: name)
        case .known(.invalidArgument):
            return message.contains("not a valid FCM registration token")
                ? .deadToken(reason: name) : .permanent(reason: name)
        case .known(.quotaExceeded), .known(.unavailable), .known(.internalError):
            return .retry(reason: name, retryAfter: after)
        case .known(.unauthenticated):
            return .credential(reason: name, refreshToken: true)
        case .known(.thirdPartyAuthError), .known(.permissionDenied):
            return .credential(reason: name, refreshToken: false)
        case .known(.notFound), .unknown:
            switch status {
            case 401: return .credential(reason: name, refreshToken: true)
            case 404: return .deadToken(reason: name)
            case 429, 500, 502, 503, 504: return .retry(reason: name, retryAfter: after)
            default: return .permanent(reason: name)
            }
        }
    }
}
