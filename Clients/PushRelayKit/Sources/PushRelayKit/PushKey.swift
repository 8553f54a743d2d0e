import Foundation

#if canImport(CryptoKit)
import CryptoKit
#else
import Crypto
#endif

/// A device's key for encrypted pushes: an AES-256 key and the id the relay names it by in each
/// push (`push_relay_key_id`). The relay gets both at registration; only the device and the relay
/// hold the key. Its `description` shows the id only, never the key.
public struct PushKey: Sendable, Hashable, CustomStringConvertible {
    /// 1 to 64 characters of `A-Z a-z 0-9 - _ .`.
    public let id: String
    /// The key: 32 bytes.
    public let data: Data

    /// `nil` when `id` is not 1 to 64 characters of `A-Z a-z 0-9 - _ .` or `data` is not 32 bytes.
    public init?(id: String, data: Data) {
        guard Self.isValidID(id), data.count == 32 else { return nil }
        self.id = id
        self.data = data
    }

    /// A key from its ``base64`` text; `nil` as ``init(id:data:)`` is, or when the text is not
    /// standard base64.
    public init?(id: String, base64: String) {
        guard let data = Data(base64Encoded: base64) else { return nil }
        self.init(id: id, data: data)
    }

    /// A new random key. `id` must be 1 to 64 characters of `A-Z a-z 0-9 - _ .`; by default a
    /// random one of 12 characters.
    public static func generate(id: String? = nil) -> PushKey {
        let id = id ?? randomID()
        precondition(isValidID(id), "a push key id is 1 to 64 characters of A-Z a-z 0-9 - _ .")
        return PushKey(id: id, data: SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) })!
    }

    /// The key in standard base64 (with padding), as registration sends it in `push_key`.
    public var base64: String { data.base64EncodedString() }

    public var description: String { "PushKey(id: \(id))" }

    var symmetricKey: SymmetricKey { SymmetricKey(data: data) }

    /// The characters of a key id.
    private static let idCharacters = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.".utf8)

    static func isValidID(_ id: String) -> Bool { (1...64).contains(id.utf8.count) && id.utf8.allSatisfy(idCharacters.contains) }

    /// 9 random bytes in base64url: 12 characters.
    private static func randomID() -> String {
        let bytes = (0..<9).map { _ in UInt8.random(in: .min ... .max) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }
}

/// Where a device's push keys are kept: the current one, which registration sends, and the ones
/// before it, so a push encrypted with a key just rotated away still decrypts.
///
/// The app and its Notification Service Extension must see the same store: use
/// ``KeychainPushKeyStore`` with a shared access group, or ``FilePushKeyStore`` in the app group's
/// container.
public protocol PushKeyStore: Sendable {
    /// The key saved last, or `nil` when there is none yet.
    func currentKey() throws -> PushKey?
    /// The kept key with this id, current or not.
    func key(id: String) throws -> PushKey?
    /// Makes `key` the current key and keeps the previous ones, at most 3 keys in all (the oldest
    /// go). Saving a kept key's id again replaces that key.
    func save(_ key: PushKey) throws
}

/// A store's keys, newest first, and how they are written: `{"keys":[{"id":…,"key":<base64>}]}`.
enum PushKeyRing {
    /// How many keys a store keeps: the current one and the two before it.
    static let kept = 3

    /// `keys` (newest first) after saving `key`.
    static func saving(_ key: PushKey, to keys: [PushKey]) -> [PushKey] {
        Array(([key] + keys.filter { $0.id != key.id }).prefix(kept))
    }

    private struct Stored: Codable {
        struct Entry: Codable {
            var id: String
            var key: String
        }
        var keys: [Entry]
    }

    static func encode(_ keys: [PushKey]) throws -> Data {
        try JSONEncoder().encode(Stored(keys: keys.map { Stored.Entry(id: $0.id, key: $0.base64) }))
    }

    static func decode(_ data: Data) throws -> [PushKey] {
        try JSONDecoder().decode(Stored.self, from: data).keys.map { entry in
            guard let key = PushKey(id: entry.id, base64: entry.key) else { throw PushKeyStoreError("a stored push key is not valid") }
            return key
        }
    }
}

/// Why a ``PushKeyStore`` failed.
public struct PushKeyStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}

/// Keys in memory only, for tests, and on Linux when nothing needs to outlive the process.
public final class InMemoryPushKeyStore: PushKeyStore {
    private let keys: Locked<[PushKey]>

    /// - Parameter keys: newest first; the first is current.
    public init(keys: [PushKey] = []) { self.keys = Locked(Array(keys.prefix(PushKeyRing.kept))) }

    public func currentKey() -> PushKey? { keys.withLock { $0.first } }

    public func key(id: String) -> PushKey? { keys.withLock { $0.first { $0.id == id } } }

    public func save(_ key: PushKey) { keys.withLock { $0 = PushKeyRing.saving(key, to: $0) } }
}
