import Crypto
import Foundation

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
        let sealed = try AES.GCM.seal(
            bytes,
            using: key.key,
            authenticating: Self.associatedData(app: app, token: token)
        )
        guard let combined = sealed.combined else { throw ConfigurationError("AES-GCM gave no combined form") }
        return StoredPushKey(id: id, bytes: combined, sealedBy: key.id)
    }

    /// The device's 32 key bytes, or `nil` when they cannot be opened (sealed with a key this
    /// instance does not have, or damaged).
    func open(_ stored: StoredPushKey, app: String, token: String) -> SymmetricKey? {
        let bytes: Data?
        if let sealedBy = stored.sealedBy {
            guard let key = [key, previousKey].compactMap({ $0 }).first(where: { $0.id == sealedBy }) else {
                return nil
            }
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

    private static func associatedData(app: String, token: String) -> Data {
        Data("push-relay device key \(app) \(token)".utf8)
    }
}
