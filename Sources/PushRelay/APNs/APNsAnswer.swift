import Foundation

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
    /// Classifies an APNs answer: the status, the body's `reason` (and, for 410, `timestamp`) and
    /// the `retry-after` header.
    static func apns(status: Int, reason: String?, retryAfter: String?, apnsID: String?, timestamp: Date? = nil) -> PushOutcome {
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
            return .retry(reason: name, retryAfter: retryAfter.flatMap { Int($0) })
        default:
            return .permanent(reason: name)
        }
    }
}
