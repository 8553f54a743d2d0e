import Foundation
import StrictJSON

/// The `reason` of an APNs error answer, as Apple's "Handling notification responses from APNs"
/// lists them; any other is kept as ``ProviderReason/unknown(_:)``.
enum APNsReason: String, Sendable, Hashable, CaseIterable {
    case badCollapseID = "BadCollapseId"
    case badDeviceToken = "BadDeviceToken"
    case badExpirationDate = "BadExpirationDate"
    case badMessageID = "BadMessageId"
    case badPriority = "BadPriority"
    case badTopic = "BadTopic"
    case deviceTokenNotForTopic = "DeviceTokenNotForTopic"
    case duplicateHeaders = "DuplicateHeaders"
    case idleTimeout = "IdleTimeout"
    case invalidPushType = "InvalidPushType"
    case missingDeviceToken = "MissingDeviceToken"
    case missingTopic = "MissingTopic"
    case payloadEmpty = "PayloadEmpty"
    case topicDisallowed = "TopicDisallowed"
    case badCertificate = "BadCertificate"
    case badCertificateEnvironment = "BadCertificateEnvironment"
    case expiredProviderToken = "ExpiredProviderToken"
    case forbidden = "Forbidden"
    case invalidProviderToken = "InvalidProviderToken"
    case missingProviderToken = "MissingProviderToken"
    case unrelatedKeyIDInToken = "UnrelatedKeyIdInToken"
    case badEnvironmentKeyIDInToken = "BadEnvironmentKeyIdInToken"
    case badEnvironmentKeyInToken = "BadEnvironmentKeyInToken"
    case badPath = "BadPath"
    case methodNotAllowed = "MethodNotAllowed"
    case expiredToken = "ExpiredToken"
    case unregistered = "Unregistered"
    case payloadTooLarge = "PayloadTooLarge"
    case tooManyProviderTokenUpdates = "TooManyProviderTokenUpdates"
    case tooManyRequests = "TooManyRequests"
    case internalServerError = "InternalServerError"
    case serviceUnavailable = "ServiceUnavailable"
    case shutdown = "Shutdown"
}

extension PushOutcome {
    /// Classifies an APNs answer as it arrived: the status, the body (an error's `{"reason":…}`,
    /// a 410's `"timestamp"` in milliseconds; a 200 has none), and the `retry-after` and `apns-id`
    /// headers. Any body and any header give an outcome; none can trap.
    static func apns(
        status: Int,
        body: [UInt8],
        retryAfter: String?,
        apnsID: String?,
        now: Date = Date()
    ) -> PushOutcome {
        let error = body.isEmpty ? nil : (try? StrictJSON.parse(body))?.objectValue
        return apns(
            status: status,
            reason: error?["reason"]?.stringValue,
            retryAfter: retryAfter,
            apnsID: apnsID,
            timestamp: apnsTimestamp(error?["timestamp"], now: now),
            now: now
        )
    }

    /// A 410's `timestamp` (milliseconds since 1970, a number or a numeric string) as a date, or
    /// `nil` when it is missing or no plausible time: not finite, before 1970, or more than a day
    /// ahead. The date is stored with the delivery, and PostgreSQL's timestamps end in 294276 AD.
    static func apnsTimestamp(_ value: JSONValue?, now: Date = Date()) -> Date? {
        guard let value, let milliseconds = value.double ?? value.stringValue.flatMap(Double.init),
            milliseconds.isFinite
        else { return nil }
        let seconds = milliseconds / 1000
        guard seconds >= 0, seconds <= now.timeIntervalSince1970 + 86400 else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }

    /// Classifies an APNs answer: the status, the body's `reason` (and, for 410, `timestamp`) and
    /// the `retry-after` header (``RetryAfter``: seconds or an HTTP-date, bounded).
    static func apns(
        status: Int,
        reason: String?,
        retryAfter: String?,
        apnsID: String?,
        timestamp: Date? = nil,
        now: Date = Date()
    ) -> PushOutcome {
        let name = reason ?? "HTTP \(status)"
        switch (status, reason.map(ProviderReason<APNsReason>.init)) {
        case (200, _):
            return .delivered(providerID: apnsID)
        case (410, _):
            // Unregistered, or ExpiredToken: the device token is no longer valid.
            return .deadToken(reason: name, since: timestamp)
        case (400, .known(.badDeviceToken)), (400, .known(.deviceTokenNotForTopic)):
            return .deadToken(reason: name)
        case (400, .known(.idleTimeout)):
            return .retry(reason: name, retryAfter: nil)
        case (403, .known(.expiredProviderToken)):
            return .credential(reason: name, refreshToken: true)
        case (403, _):
            // InvalidProviderToken, UnrelatedKeyIdInToken, BadEnvironmentKey(Id)InToken, BadCertificate…
            return .credential(reason: name, refreshToken: false)
        case (429, .known(.tooManyProviderTokenUpdates)):
            return .credential(reason: name, refreshToken: false)
        case (429, _), (500, _), (502, _), (503, _), (504, _):
            return .retry(reason: name, retryAfter: RetryAfter.seconds(retryAfter, now: now))
        default:
            return .permanent(reason: name)
        }
    }
}
