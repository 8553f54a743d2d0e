import Foundation

/// A registered device as the API returns it.
public struct Device: Sendable, Hashable, Codable {
    public var appID: String
    public var token: String
    public var platform: Platform
    public var userID: String?
    public var environment: String?
    public var locale: String?
    public var status: DeviceStatus
    public var invalidReason: String?
    public var createdAt: Date
    public var updatedAt: Date
    /// Whether the device registered a `push_key` (the key itself is never returned).
    public var pushKeySet = false
    /// The registered key's id.
    public var pushKeyID: String?

    enum CodingKeys: String, CodingKey {
        case appID = "app_id"
        case token, platform
        case userID = "user_id"
        case environment, locale, status
        case invalidReason = "invalid_reason"
        case createdAt = "created_at"
        case updatedAt = "updated_at"
        case pushKeySet = "push_key_set"
        case pushKeyID = "push_key_id"
    }

    /// Absent values are written as `null`, so every field is always present in responses.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(appID, forKey: .appID)
        try container.encode(token, forKey: .token)
        try container.encode(platform, forKey: .platform)
        try container.encode(userID, forKey: .userID)
        try container.encode(environment, forKey: .environment)
        try container.encode(locale, forKey: .locale)
        try container.encode(status, forKey: .status)
        try container.encode(invalidReason, forKey: .invalidReason)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(updatedAt, forKey: .updatedAt)
        try container.encode(pushKeySet, forKey: .pushKeySet)
        try container.encode(pushKeyID, forKey: .pushKeyID)
    }
}

/// A registered device's state (the `devices.status` column).
public enum DeviceStatus: String, Sendable, Hashable, Codable {
    case active
    /// A provider reported the token dead (or it failed for good); no more pushes go to it.
    case invalid
}

/// What a client asks for when it registers a token.
public struct DeviceRegistration: Sendable, Hashable {
    public var appID: String
    public var token: String
    public var platform: Platform
    public var userID: String?
    public var environment: String?
    public var locale: String?
    /// The device's end-to-end key for `encrypted` apps, as stored (sealed when an apps-store key
    /// is configured); `nil` clears a key registered before.
    var pushKey: StoredPushKey? = nil
}

/// The registry's storage.
public protocol DeviceRepository: Sendable {
    /// Inserts or replaces the device and revives it if it was invalid. With `onlyForUser`, a
    /// device linked to a different user is left alone and `.ownedByAnotherUser` returned, and one
    /// linked to no user is `.unowned` unless `claimUnowned`. A registration that would give its
    /// user more than `maxPerUser` active devices is `.tooManyDevices`.
    func upsert(
        _ registration: DeviceRegistration,
        onlyForUser: String?,
        claimUnowned: Bool,
        maxPerUser: Int
    ) async throws -> DeviceUpsert
    func get(app: String, token: String) async throws -> Device?
    /// Deletes the device; with `onlyForUser`, only if it is that user's, or linked to no user and
    /// `claimUnowned` (the rule of ``upsert(_:onlyForUser:claimUnowned:maxPerUser:)``).
    func delete(app: String, token: String, onlyForUser: String?, claimUnowned: Bool) async throws -> DeviceDeletion
    func list(app: String, user: String) async throws -> [Device]
}

/// The outcome of an upsert.
public enum DeviceUpsert: Sendable, Hashable {
    case created(Device)
    case updated(Device)
    case ownedByAnotherUser
    /// The device exists, linked to no user, and a user token may not claim it.
    case unowned
    /// The user has this many active devices in the app already.
    case tooManyDevices(Int)
}

/// The outcome of a delete.
public enum DeviceDeletion: Sendable, Hashable {
    case deleted
    case notFound
    case ownedByAnotherUser
    /// The device exists, linked to no user, and a user token may not unregister it.
    case unowned
}
