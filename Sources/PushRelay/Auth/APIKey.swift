import Crypto
import Foundation

/// An API key as presented by a caller: `prk_<prefix>_<secret>`.
///
/// The prefix (12 hex characters) finds the stored row; only a SHA-256 of the whole key is stored,
/// so a database leak does not leak usable keys. The plaintext is shown once, at creation.
public struct APIKey: Sendable, Hashable {
    /// The public part, stored in clear and safe to log.
    public let prefix: String
    /// The whole key.
    public let plaintext: String

    static let marker = "prk_"

    /// Generates a new random key (256 bits of secret).
    public static func generate() -> APIKey {
        var generator = SystemRandomNumberGenerator()
        let prefix = (0..<6).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        let secretBytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let secret = Data(secretBytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(
                of: "=",
                with: ""
            )
        return APIKey(prefix: prefix, plaintext: "\(marker)\(prefix)_\(secret)")
    }

    /// Parses a presented key; `nil` when it does not have the key shape.
    public init?(presented: String) {
        guard presented.hasPrefix(Self.marker), presented.utf8.count <= 128 else { return nil }
        let rest = presented.dropFirst(Self.marker.count)
        guard let underscore = rest.firstIndex(of: "_") else { return nil }
        let prefix = rest[..<underscore]
        guard prefix.utf8.count == 12, prefix.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) })
        else { return nil }
        self.prefix = String(prefix)
        self.plaintext = presented
    }

    private init(prefix: String, plaintext: String) {
        self.prefix = prefix
        self.plaintext = plaintext
    }

    /// What is stored: SHA-256 of the whole key.
    public var hash: Data { Data(SHA256.hash(data: Data(plaintext.utf8))) }
}

/// What an app key may do. Admin keys may do everything.
public enum APIKeyScope: String, Sendable, CaseIterable, Codable {
    /// Read devices of the key's app.
    case devicesRead = "devices:read"
    /// Register, update and delete devices of the key's app.
    case devicesWrite = "devices:write"
    /// Read unread counts of the key's app's users.
    case unreadRead = "unread:read"
    /// Mark tickets read for the key's app's users.
    case unreadWrite = "unread:write"
    /// Read what became of the key's app's notifications and deliveries (the status API).
    case notificationsRead = "notifications:read"
}

/// A stored key's metadata (never its secret).
public struct APIKeyRecord: Sendable, Hashable, Codable {
    public var id: UUID
    public var prefix: String
    /// `nil` for an admin key.
    public var appID: String?
    public var scopes: [String]
    public var label: String?
    public var createdAt: Date
    public var revokedAt: Date?

    /// Whether this is an admin key.
    public var isAdmin: Bool { appID == nil }
}
