#if canImport(Security)
import Foundation
import Security

/// Push keys in the keychain: one generic password item (service `service`, account
/// `push-relay-keys`) holding the kept keys, accessible after the first unlock on this device only
/// (`kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`). After the first unlock, so the
/// Notification Service Extension can read it while the device is locked; this device only,
/// because an end-to-end key belongs to its device: the item is left out of backups and does not
/// move to a new phone. A restored or new phone has no key, so its app's next registration creates
/// and sends one; pushes encrypted for the old key show the generic text until then.
///
/// The app and the extension must share the item: give both targets the Keychain Sharing
/// capability with the same group and pass it as `accessGroup` with the team prefix
/// (`"ABCDE12345.com.example.support.shared"`), or pass an App Group both targets have
/// (`"group.com.example.support"`). Without `accessGroup` the item lands in the target's default
/// group, which the extension does not read.
public struct KeychainPushKeyStore: PushKeyStore {
    /// The item's service (`kSecAttrService`).
    public let service: String
    /// The keychain access group (`kSecAttrAccessGroup`) shared with the extension.
    public let accessGroup: String?

    public init(service: String = "PushRelayKit", accessGroup: String?) {
        self.service = service
        self.accessGroup = accessGroup
    }

    public func currentKey() throws -> PushKey? { try load().first }

    public func key(id: String) throws -> PushKey? { try load().first { $0.id == id } }

    public func save(_ key: PushKey) throws { try store(PushKeyRing.encode(PushKeyRing.saving(key, to: load()))) }

    private var query: [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: "push-relay-keys",
            kSecUseDataProtectionKeychain as String: true,
        ]
        if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
        return query
    }

    /// The keys, newest first; none when there is no item.
    private func load() throws -> [PushKey] {
        var query = self.query
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return [] }
        guard status == errSecSuccess, let data = result as? Data else { throw Self.error("read", status) }
        return try PushKeyRing.decode(data)
    }

    /// Updates the item, or adds it when there is none.
    private func store(_ data: Data) throws {
        let values: [String: Any] = [kSecValueData as String: data, kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly]
        var status = SecItemUpdate(query as CFDictionary, values as CFDictionary)
        if status == errSecItemNotFound { status = SecItemAdd(query.merging(values) { $1 } as CFDictionary, nil) }
        guard status == errSecSuccess else { throw Self.error("write", status) }
    }

    private static func error(_ operation: String, _ status: OSStatus) -> PushKeyStoreError {
        let message = SecCopyErrorMessageString(status, nil) as String? ?? "OSStatus \(status)"
        return PushKeyStoreError("keychain \(operation): \(message)")
    }
}
#endif
