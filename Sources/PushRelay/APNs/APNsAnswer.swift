import Foundation

/// The `reason` of an APNs error answer (Apple's "Handling notification responses from APNs"),
/// with ``unknown(_:)`` for any reason APNs adds later.
enum APNsReason: Sendable, Hashable {
    case badCollapseID
    case badDeviceToken
    case badExpirationDate
    case badMessageID
    case badPriority
    case badTopic
    case deviceTokenNotForTopic
    case duplicateHeaders
    case idleTimeout
    case invalidPushType
    case missingDeviceToken
    case missingTopic
    case payloadEmpty
    case topicDisallowed
    case badCertificate
    case badCertificateEnvironment
    case expiredProviderToken
    case forbidden
    case invalidProviderToken
    case missingProviderToken
    case unrelatedKeyIDInToken
    case badEnvironmentKeyIDInToken
    case badEnvironmentKeyInToken
    case badPath
    case methodNotAllowed
    case expiredToken
    case unregistered
    case payloadTooLarge
    case tooManyProviderTokenUpdates
    case tooManyRequests
    case internalServerError
    case serviceUnavailable
    case shutdown
    case unknown(String)

    private static let known: [String: APNsReason] = [
        "BadCollapseId": .badCollapseID, "BadDeviceToken": .badDeviceToken, "BadExpirationDate": .badExpirationDate,
        "BadMessageId": .badMessageID, "BadPriority": .badPriority, "BadTopic": .badTopic,
        "DeviceTokenNotForTopic": .deviceTokenNotForTopic, "DuplicateHeaders": .duplicateHeaders, "IdleTimeout": .idleTimeout,
        "InvalidPushType": .invalidPushType, "MissingDeviceToken": .missingDeviceToken, "MissingTopic": .missingTopic,
        "PayloadEmpty": .payloadEmpty, "TopicDisallowed": .topicDisallowed, "BadCertificate": .badCertificate,
        "BadCertificateEnvironment": .badCertificateEnvironment, "ExpiredProviderToken": .expiredProviderToken, "Forbidden": .forbidden,
        "InvalidProviderToken": .invalidProviderToken, "MissingProviderToken": .missingProviderToken,
        "UnrelatedKeyIdInToken": .unrelatedKeyIDInToken, "BadEnvironmentKeyIdInToken": .badEnvironmentKeyIDInToken,
        "BadEnvironmentKeyInToken": .badEnvironmentKeyInToken, "BadPath": .badPath, "MethodNotAllowed": .methodNotAllowed,
        "ExpiredToken": .expiredToken, "Unregistered": .unregistered, "PayloadTooLarge": .payloadTooLarge,
        "TooManyProviderTokenUpdates": .tooManyProviderTokenUpdates, "TooManyRequests": .tooManyRequests,
        "InternalServerError": .internalServerError, "ServiceUnavailable": .serviceUnavailable, "Shutdown": .shutdown,
    ]

    private static let names = Dictionary(uniqueKeysWithValues: known.map { ($0.value, $0.key) })

    init(_ reason: String) {
        self = Self.known[reason] ?? .unknown(reason)
    }

    /// The reason as APNs spells it.
    var name: String {
        if case .unknown(let reason) = self { return reason }
        return Self.names[self]!
    }
}

extension PushOutcome {
    /// Classifies an APNs answer: the status, the body's `reason` (and, for 410, `timestamp`) and
    /// the `retry-after` header.
    static func apns(status: Int, reason: String?, retryAfter: String?, apnsID: String?, timestamp: Date? = nil) -> PushOutcome {
        let name = reason ?? "HTTP \(status)"
        switch (status, reason.map(APNsReason.init)) {
        case (200, _):
            return .delivered(providerID: apnsID)
        case (410, _):
            // Unregistered, or ExpiredToken: the device token is no longer valid.
            return .deadToken(reason: name, since: timestamp)
        case (400, .badDeviceToken), (400, .deviceTokenNotForTopic):
            return .deadToken(reason: name)
        case (400, .idleTimeout):
            return .retry(reason: name, retryAfter: nil)
        case (403, .expiredProviderToken):
            return .credential(reason: name, refreshToken: true)
        case (403, _):
            // InvalidProviderToken, UnrelatedKeyIdInToken, BadEnvironmentKey(Id)InToken, BadCertificate…
            return .credential(reason: name, refreshToken: false)
        case (429, .tooManyProviderTokenUpdates):
            return .credential(reason: name, refreshToken: false)
        case (429, _), (500, _), (502, _), (503, _), (504, _):
            return .retry(reason: name, retryAfter: retryAfter.flatMap { Int($0) })
        default:
            return .permanent(reason: name)
        }
    }
}
