import Crypto
import Foundation
import HTTPTypes
import JWTKit

/// The configured apps, looked up by id, with their secrets prepared for constant-time checks.
public final class AppDirectory: Sendable {
    struct Entry: Sendable {
        let configuration: AppConfiguration
        /// SHA-256 of each webhook secret: comparing digests keeps the comparison length-independent.
        let secretDigests: [SHA256.Digest]
        let userTokenKeys: JWTKeyCollection?
    }

    private let entries: [String: Entry]
    /// A digest to compare against when the app is unknown, so that path takes as long as a wrong secret.
    private let decoy = SHA256.hash(data: Data("push-relay-decoy-secret".utf8))

    /// The app ids, sorted.
    public var ids: [String] { entries.keys.sorted() }

    public init(apps: [AppConfiguration]) async throws {
        try AppConfiguration.validate(apps)
        var entries: [String: Entry] = [:]
        for app in apps {
            var keys: JWTKeyCollection?
            if let tokens = app.userTokens {
                keys = await JWTKeyCollection().add(hmac: HMACKey(from: try tokens.key(app: app.id)), digestAlgorithm: .sha256)
            }
            entries[app.id] = Entry(
                configuration: app,
                secretDigests: app.webhookSecrets.map { SHA256.hash(data: Data($0.utf8)) },
                userTokenKeys: keys
            )
        }
        self.entries = entries
    }

    /// The app's configuration, if it exists.
    public func app(_ id: String) -> AppConfiguration? { entries[id]?.configuration }

    func entry(_ id: String) -> Entry? { entries[id] }

    /// `id` when it names a configured app; otherwise the API's 404 `app_not_found`.
    func requireKnown(_ id: String) throws -> String {
        guard entries[id] != nil else { throw APIError(.notFound, code: "app_not_found", message: "no such app") }
        return id
    }

    /// Whether `secret` is one of the app's active webhook secrets. Unknown apps and wrong secrets
    /// take the same path: every digest is compared in constant time, with no early exit.
    /// Digests compare with swift-crypto's `==`, which is constant-time (`safeCompare`); hashing the
    /// secret's bytes in place, with no `Data` or `Array` copies, keeps this off the profile of a
    /// webhook.
    public func acceptsWebhook(app id: String, secret: String) -> Bool {
        var secret = secret
        let presented = secret.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
        guard let entry = entries[id] else {
            _ = presented == decoy
            return false
        }
        var matched = false
        for digest in entry.secretDigests {
            matched = (presented == digest) || matched
        }
        return matched
    }

}
