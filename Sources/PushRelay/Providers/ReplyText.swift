import Crypto
import Foundation

/// What an alert push says, decided when it is sent: the app's content mode is read then, so a
/// reload or an admin API change applies to pushes already queued.
enum ReplyText: Sendable {
    /// The reply's title and body in clear.
    case full(title: String, body: String)
    /// No reply text: the app's localisation keys and fallback text.
    case generic
    /// The fallback alert, and title and body encrypted for the device's key.
    case encrypted(title: String, body: String, key: DeviceKey)

    /// A device's key, ready to encrypt one notification's text for it.
    struct DeviceKey: Sendable {
        let id: String
        let key: SymmetricKey
        let notificationID: Int64

        /// `push_relay_ciphertext` for `title` and `body` (a fresh nonce each time).
        func seal(title: String, body: String) -> String {
            PushEncryption.seal(title: title, body: body, key: key, keyID: id, notificationID: notificationID) ?? ""
        }
    }

    /// The text the payload shortens when it does not fit.
    var body: String {
        switch self {
        case .full(_, let body), .encrypted(_, let body, _): body
        case .generic: ""
        }
    }

    /// The content mode this text goes out in.
    var mode: PushSettings.Content {
        switch self {
        case .full: .full
        case .generic: .generic
        case .encrypted: .encrypted
        }
    }

    /// The text for `delivery` in its app's mode: `generic` when the notification's text was not
    /// stored, and for an `encrypted` app's device without a usable key.
    static func make(for delivery: ClaimedDelivery, presentation: PushPresentation, keys: DevicePushKeys) -> ReplyText {
        guard delivery.textStored else { return .generic }
        switch presentation.content {
        case .full:
            return .full(title: delivery.title, body: delivery.body)
        case .generic:
            return .generic
        case .encrypted:
            guard let stored = delivery.pushKey, let notificationID = delivery.notificationID,
                let key = keys.open(stored, app: delivery.appID, token: delivery.token)
            else { return .generic }
            return .encrypted(
                title: delivery.title,
                body: delivery.body,
                key: DeviceKey(id: stored.id, key: key, notificationID: notificationID)
            )
        }
    }
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
        let sealed = try? AES.GCM.seal(
            plaintext,
            using: key,
            authenticating: associatedData(keyID: keyID, notificationID: notificationID)
        )
        return sealed?.combined?.base64EncodedString()
    }
}
