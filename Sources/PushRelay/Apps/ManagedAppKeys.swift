import Configuration
import Crypto
import Foundation

/// A 256-bit key that seals managed apps (AES-256-GCM), and its public id.
public struct ManagedAppKey: Sendable {
    let key: SymmetricKey
    /// `sha256:` and 8 hex digits of SHA-256 over the key: stored beside each row, so a row sealed
    /// with another key is named as such instead of failing as corrupt. It says nothing useful
    /// about the key.
    public let id: String

    /// A key from its 32 bytes.
    public init(bytes: Data) throws {
        guard bytes.count == 32 else {
            throw ConfigurationError("an apps_store key must be 32 bytes (it is \(bytes.count))")
        }
        key = SymmetricKey(data: bytes)
        id = SecretIdentifier.fingerprint(bytes)
    }

    /// A key from the text of a key file: 32 bytes in base64 (`openssl rand -base64 32`) or in hex
    /// (`openssl rand -hex 32`), surrounding whitespace ignored.
    public init(text: String, source: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        let bytes: Data?
        if trimmed.utf8.count == 64, let hex = Self.hex(trimmed) {
            bytes = hex
        } else {
            bytes = Data(base64Encoded: trimmed)
        }
        guard let bytes, bytes.count == 32 else {
            throw ConfigurationError(
                "\(source) must hold 32 random bytes in base64 or hex; create it with: openssl rand -base64 32 > FILE"
            )
        }
        try self.init(bytes: bytes)
    }

    /// Reads a key file named by the configuration key `source`.
    public init(file: String, source: String) throws {
        let data = try ConfiguredFile.read(file, what: "cannot read \(source)")
        try self.init(text: String(decoding: data, as: UTF8.self), source: "\(source) \(file)")
    }

    private static func hex(_ text: String) -> Data? {
        var data = Data(capacity: text.utf8.count / 2)
        var high: UInt8?
        for byte in text.utf8 {
            let nibble: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let first = high {
                data.append(first << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return data
    }

    /// `plaintext` sealed for the row `app`: nonce, ciphertext and tag (AES-GCM's combined form).
    /// The app id is authenticated with it, so a row's sealed value cannot be moved to another row.
    func seal(_ plaintext: Data, app: String) throws -> Data {
        guard let combined = try AES.GCM.seal(plaintext, using: key, authenticating: Self.associatedData(app)).combined
        else {
            throw ConfigurationError("AES-GCM gave no combined form")
        }
        return combined
    }

    /// The plaintext of a value ``seal(_:app:)`` made; throws when the key, the app or the bytes differ.
    func open(_ sealed: Data, app: String) throws -> Data {
        try AES.GCM.open(AES.GCM.SealedBox(combined: sealed), using: key, authenticating: Self.associatedData(app))
    }

    private static func associatedData(_ app: String) -> Data { Data("push-relay managed app \(app)".utf8) }
}

/// `apps_store.*` keys: the key that seals the apps managed through the admin API.
///
/// Keys, read from a reader scoped to `apps_store`:
/// - `key_file` (string): a file holding 32 random bytes, base64 or hex (`openssl rand -base64 32`).
///   Without it, managed apps are off: the admin API's app routes answer 503
///   `managed_apps_disabled` and only the configuration file's apps are served.
/// - `previous_key_file` (string): the key before a rotation, read only: rows sealed with it are
///   opened with it and sealed again with `key_file`'s key.
public struct ManagedAppStoreSettings: Sendable {
    /// The key new rows are sealed with; `nil` when managed apps are off.
    public var key: ManagedAppKey?
    /// The key a rotation replaced, for reading.
    public var previousKey: ManagedAppKey?

    public init(key: ManagedAppKey? = nil, previousKey: ManagedAppKey? = nil) {
        self.key = key
        self.previousKey = previousKey
    }
}
