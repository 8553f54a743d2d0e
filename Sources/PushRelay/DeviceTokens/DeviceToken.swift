/// The platforms PushRelay delivers to.
public enum Platform: String, Sendable, Codable, CaseIterable {
    case ios
    case android
}

/// Device token rules.
enum DeviceToken {
    /// Most bytes of a device token. The token is part of three primary keys (devices, the Zendesk
    /// queue, and unread counters of devices linked to no user), and a B-tree entry must fit in
    /// about 2.7 kB: longer tokens would fail in PostgreSQL, not here. APNs tokens are 64 hex
    /// characters and FCM registration tokens about 160.
    static let maxBytes = 1024

    /// The looser rule for identifiers arriving in webhooks: the helpdesk's word is taken as long as
    /// the identifier is printable and bounded. Hex iOS tokens are still lower-cased so they match
    /// the registry.
    static func normaliseFromWebhook(_ token: String, platform: Platform) -> String? {
        guard isPrintable(token) else { return nil }
        if platform == .ios, token.utf8.allSatisfy(isHex) { return token.lowercased() }
        return token
    }

    static func isPrintable(_ token: String) -> Bool {
        !token.isEmpty && token.utf8.count <= maxBytes
            && token.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value != 0x7f && $0.isASCII }
    }

    static func isHex(_ byte: UInt8) -> Bool {
        (byte >= 48 && byte <= 57) || (byte >= 97 && byte <= 102) || (byte >= 65 && byte <= 70)
    }
}
