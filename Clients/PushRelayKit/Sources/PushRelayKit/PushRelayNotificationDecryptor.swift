import Foundation

#if canImport(CryptoKit)
import CryptoKit
#else
import Crypto
#endif

#if canImport(UserNotifications) && !os(tvOS)
import UserNotifications
#endif

/// Opens encrypted pushes (`push_relay_content` = `encrypted`) with the device's kept keys: in a
/// Notification Service Extension on iOS, or where an Android-style data map arrives.
///
/// ```swift
/// // UNNotificationServiceExtension.didReceive(_:withContentHandler:)
/// let content = request.content.mutableCopy() as! UNMutableNotificationContent
/// PushRelayNotificationDecryptor(keys: keys).apply(to: content)
/// contentHandler(content)
/// ```
///
/// Every failure is `nil` (not encrypted, an unknown key id, a changed byte, a wrong key, a push
/// id that is not the one encrypted for), so the push's own alert, the app's fallback text, stays.
public struct PushRelayNotificationDecryptor: Sendable {
    /// A reply's text, decrypted.
    public struct DecryptedReply: Sendable, Hashable {
        public var title: String
        public var body: String

        public init(title: String, body: String) {
            self.title = title
            self.body = body
        }
    }

    /// The store with the device's keys: the same one the app registers from.
    public let keys: any PushKeyStore

    public init(keys: any PushKeyStore) { self.keys = keys }

    /// Decrypts an APNs payload (`userInfo`); `nil` on any failure.
    public func decrypt(userInfo: [AnyHashable: Any]) -> DecryptedReply? {
        PushRelayNotification(userInfo: userInfo).flatMap { decrypt($0) }
    }

    /// Decrypts an FCM message's data map; `nil` on any failure.
    public func decrypt(data: [String: String]) -> DecryptedReply? {
        PushRelayNotification(data: data).flatMap { decrypt($0) }
    }

    /// Decrypts a push already read; `nil` on any failure.
    public func decrypt(_ push: PushRelayNotification) -> DecryptedReply? {
        guard push.content == .encrypted, let keyID = push.keyID, let notificationID = push.notificationID,
            let sealed = push.ciphertext, let key = try? keys.key(id: keyID),
            let box = try? AES.GCM.SealedBox(combined: sealed),
            let plaintext = try? AES.GCM.open(box, using: key.symmetricKey, authenticating: Self.associatedData(keyID, notificationID))
        else { return nil }
        guard let reply = try? JSONDecoder().decode(Plaintext.self, from: plaintext) else { return nil }
        return DecryptedReply(title: reply.title, body: reply.body)
    }

    /// The encrypted JSON: `{"title":…,"body":…}`.
    private struct Plaintext: Decodable {
        var title: String
        var body: String
    }

    /// `push-relay:v1:<key id>:<notification id>`, which the ciphertext is bound to.
    static func associatedData(_ keyID: String, _ notificationID: Int64) -> Data {
        Data("push-relay:v1:\(keyID):\(notificationID)".utf8)
    }

    #if canImport(UserNotifications) && !os(tvOS)
    /// Sets `content`'s title and body to the decrypted reply. When decryption fails, `content`
    /// keeps the push's alert (the app's fallback text).
    ///
    /// - Returns: whether the reply was decrypted.
    @discardableResult
    public func apply(to content: UNMutableNotificationContent) -> Bool {
        guard let reply = decrypt(userInfo: content.userInfo) else { return false }
        content.title = reply.title
        content.body = reply.body
        return true
    }
    #endif
}
