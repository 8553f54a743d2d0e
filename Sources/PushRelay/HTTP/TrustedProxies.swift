import Configuration
import Foundation
import NIOCore

/// The proxies whose `X-Forwarded-Proto` the relay believes (`http.trusted_proxies`).
///
/// A list of addresses or CIDR blocks (`127.0.0.1`, `10.0.0.0/8`, `::1`, `fd00::/8`), empty by
/// default: then no forwarded header is believed, since any client can send one. A request whose
/// connection comes from one of them, with `X-Forwarded-Proto: https`, counts as made over TLS
/// (the console's cookies are then `Secure` and `__Host-` prefixed).
public struct TrustedProxies: Sendable, Equatable {
    /// One address block: the network's bytes (4 for IPv4, 16 for IPv6) and its prefix length.
    struct Block: Sendable, Equatable {
        var bytes: [UInt8]
        var prefixLength: Int

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else { return false }
            var remaining = prefixLength
            for (network, candidate) in zip(bytes, address) where remaining > 0 {
                let bits = min(8, remaining)
                let mask: UInt8 = bits == 8 ? 0xFF : ~(0xFF >> UInt8(bits))
                guard network & mask == candidate & mask else { return false }
                remaining -= bits
            }
            return true
        }
    }

    let blocks: [Block]

    /// Trusts no proxy.
    public static let none = TrustedProxies(blocks: [])

    init(blocks: [Block]) { self.blocks = blocks }

    /// Parses `entries`; throws ``ConfigurationError`` naming the first one that is not an
    /// address or a CIDR block.
    public init(_ entries: [String]) throws {
        blocks = try entries.map { entry in
            let text = entry.trimmingCharacters(in: .whitespaces)
            let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let bytes = Self.addressBytes(String(parts[0])) else {
                throw ConfigurationError(
                    "http.trusted_proxies: '\(text)' is not an IP address or CIDR block (such as 10.0.0.0/8)"
                )
            }
            var length = bytes.count * 8
            if parts.count == 2 {
                guard let given = Int(parts[1]), (0...length).contains(given) else {
                    throw ConfigurationError("http.trusted_proxies: '\(text)' has a prefix length outside 0-\(length)")
                }
                length = given
            }
            return Block(bytes: bytes, prefixLength: length)
        }
    }

    /// Whether a connection from `peer` is one of the trusted proxies. An IPv4 client seen on an
    /// IPv6 socket (`::ffff:a.b.c.d`) counts as its IPv4 address.
    public func contains(_ peer: SocketAddress?) -> Bool {
        guard !blocks.isEmpty, let text = peer?.ipAddress, let bytes = Self.addressBytes(text) else { return false }
        if bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            let mapped = Array(bytes[12...])
            if blocks.contains(where: { $0.contains(mapped) }) { return true }
        }
        return blocks.contains { $0.contains(bytes) }
    }

    static func addressBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}
