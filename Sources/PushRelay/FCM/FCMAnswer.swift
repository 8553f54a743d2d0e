import Foundation

/// The error code of an FCM HTTP v1 answer: `error.details[].errorCode`, else `error.status`
/// (FCM's `ErrorCode` and Google's canonical codes), with ``unknown(_:)`` for any other.
enum FCMErrorCode: Sendable, Hashable {
    case unregistered
    case invalidArgument
    case senderIDMismatch
    case quotaExceeded
    case unavailable
    case internalError
    case unauthenticated
    case thirdPartyAuthError
    case permissionDenied
    case notFound
    case unknown(String)

    private static let known: [String: FCMErrorCode] = [
        "UNREGISTERED": .unregistered, "INVALID_ARGUMENT": .invalidArgument, "SENDER_ID_MISMATCH": .senderIDMismatch,
        "QUOTA_EXCEEDED": .quotaExceeded, "UNAVAILABLE": .unavailable, "INTERNAL": .internalError, "UNAUTHENTICATED": .unauthenticated,
        "THIRD_PARTY_AUTH_ERROR": .thirdPartyAuthError, "PERMISSION_DENIED": .permissionDenied, "NOT_FOUND": .notFound,
    ]

    private static let names = Dictionary(uniqueKeysWithValues: known.map { ($0.value, $0.key) })

    init(_ code: String) {
        self = Self.known[code] ?? .unknown(code)
    }

    /// The code as FCM spells it.
    var name: String {
        if case .unknown(let code) = self { return code }
        return Self.names[self]!
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
        let name = details.compactMap { $0["errorCode"] as? String }.first ?? (error?["status"] as? String) ?? "HTTP \(status)"
        let message = (error?["message"] as? String) ?? ""
        let after = retryAfter.flatMap { Int($0) }
        switch FCMErrorCode(name) {
        case .unregistered, .senderIDMismatch:
            return .deadToken(reason: name)
        case .invalidArgument:
            return message.contains("not a valid FCM registration token") ? .deadToken(reason: name) : .permanent(reason: name)
        case .quotaExceeded, .unavailable, .internalError:
            return .retry(reason: name, retryAfter: after)
        case .unauthenticated:
            return .credential(reason: name, refreshToken: true)
        case .thirdPartyAuthError, .permissionDenied:
            return .credential(reason: name, refreshToken: false)
        case .notFound, .unknown:
            switch status {
            case 401: return .credential(reason: name, refreshToken: true)
            case 404: return .deadToken(reason: name)
            case 429, 500, 502, 503, 504: return .retry(reason: name, retryAfter: after)
            default: return .permanent(reason: name)
            }
        }
    }
}
