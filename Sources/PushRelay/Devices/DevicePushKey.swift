import Crypto
import Foundation

/// A device's `push_key` as the `devices` row keeps it: the 32 key bytes, sealed with the
/// apps-store key when one is configured (``sealedBy`` names it), and the key's id.
struct StoredPushKey: Sendable, Hashable {
    var id: String
    var bytes: Data
    /// The ``ManagedAppKey/id`` the bytes are sealed with; `nil` when stored as given.
    var sealedBy: String?
}

/// Seals device keys at rest with the apps-store key (`apps_store.key_file`), and opens them
/// when a push is encrypted. Without an apps-store key the bytes are stored as given (the
/// database's own protection is then all there is; docs/operations.md says so).
struct DevicePushKeys: Sendable {
    let key: ManagedAppKey?
    let previousKey: ManagedAppKey?

    init(settings: ManagedAppStoreSettings) {
        key = settings.key
        previousKey = settings.previousKey
    }

    init(key: ManagedAppKey? = nil, previousKey: ManagedAppKey? = nil) {
        self.key = key
        self.previousKey = previousKey
    }

    /// What the registry stores for `bytes`, bound to the device's app and token so a sealed key
    /// cannot be moved to another row.
    func seal(_ bytes: Data, id: String, app: String, token: String) throws -> StoredPushKey {
        guard let key else { return StoredPushKey(id: id, bytes: bytes, sealedBy: nil) }
        let sealed = try AES.GCM.seal(bytes, using: key.key, authenticating: Self.associatedData(app: app, token: token))
        guard let combined = sealed.combined else { throw ConfigurationError("AES-GCM gave no combined form") }
        return StoredPushKey(id: id, bytes: combined, sealedBy: key.id)
    }

    /// The device's 32 key bytes, or `nil` when they cannot be opened (sealed with a key this
    /// instance does not have, or damaged).
    func open(_ stored: StoredPushKey, app: String, token: String) -> SymmetricKey? {
        let bytes: Data?
        if let sealedBy = stored.sealedBy {
            guard let key = [key, previousKey].compactMap({ $0 }).first(where: { $0.id == sealedBy }) else { return nil }
            bytes = try? AES.GCM.open(
                AES.GCM.SealedBox(combined: stored.bytes),
                using: key.key,
                authenticating: Self.associatedData(app: app, token: token)
            )
        } else {
            bytes = stored.bytes
        }
        guard let bytes, bytes.count == 32 else { return nil }
        return SymmetricKey(data: bytes)
    }

    private static func associatedData(app: String, token: String) -> Data { Data("push-relay device key \(app) \(token)".utf8) }
}

/// The end-to-end encryption of an `encrypted` app's pushes (docs/http-api.md, "Encrypted
/// pushes"): AES-256-GCM with a random 96-bit nonce over `{"title":…,"body":…}`, the key id and
/// the notification id bound as associated data, sent as base64 of nonce ‖ ciphertext ‖ tag.
enum PushEncryption {
    /// `push-relay:v1:<key id>:<notification id>`.
    static func associatedData(keyID: String, notificationID: Int64) -> Data {
        Data("push-relay:v1:\(keyID):\(notificationID)".utf8)
    }

    /// The `push_relay_ciphertext` value for `title` and `body`.
    static func seal(title: String, body: String, key: SymmetricKey, keyID: String, notificationID: Int64) -> String? {
        let plaintext = PayloadJSON.object(["title": .string(title), "body": .string(body)]).bytes
        let sealed = try? AES.GCM.seal(plaintext, using: key, authenticating: associatedData(keyID: keyID, notificationID: notificationID))
        return sealed?.combined?.base64EncodedString()
    }
}
