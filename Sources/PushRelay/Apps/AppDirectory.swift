import Crypto
import Foundation
import HTTPTypes
import JWTKit
import Synchronization

/// The configured apps, looked up by id, with their secrets prepared for constant-time checks.
///
/// A reload replaces every app at once (``prepare(apps:)``, then ``install(_:)``): a request sees
/// either the old set or the new one, never a mix, so a secret listed in both is never refused.
public final class AppDirectory: Sendable {
    struct Entry: Sendable {
        let configuration: AppConfiguration
        /// SHA-256 of each webhook secret: comparing digests keeps the comparison length-independent.
        let secretDigests: [SHA256.Digest]
        let userTokenKeys: JWTKeyCollection?
    }

    /// Apps ready to replace the ones in use.
    public struct Prepared: Sendable {
        fileprivate let entries: [String: Entry]
    }

    private let current: Mutex<[String: Entry]>
    private var entries: [String: Entry] { current.withLock { $0 } }
    /// A digest to compare against when the app is unknown, so that path takes as long as a wrong secret.
    private let decoy = SHA256.hash(data: Data("push-relay-decoy-secret".utf8))

    /// The app ids, sorted.
    public var ids: [String] { entries.keys.sorted() }

    public init(apps: [AppConfiguration]) async throws {
        current = Mutex(try await Self.prepare(apps: apps).entries)
    }

    /// Checks `apps` and reads their user-token keys; nothing in use changes.
    public static func prepare(apps: [AppConfiguration]) async throws -> Prepared {
        try AppConfiguration.validate(apps)
        var entries: [String: Entry] = [:]
        for app in apps {
            var keys: JWTKeyCollection?
            if let tokens = app.userTokens {
                keys = await JWTKeyCollection().add(
                    hmac: HMACKey(from: try tokens.key(app: app.id)),
                    digestAlgorithm: .sha256
                )
            }
            entries[app.id] = Entry(
                configuration: app,
                secretDigests: app.webhookSecrets.map { SHA256.hash(data: Data($0.utf8)) },
                userTokenKeys: keys
            )
        }
        return Prepared(entries: entries)
    }

    /// Puts `prepared` in use: the next lookup sees it.
    public func install(_ prepared: Prepared) { current.withLock { $0 = prepared.entries } }

    /// The app's configuration, if it exists.
    public func app(_ id: String) -> AppConfiguration? { current.withLock { $0[id]?.configuration } }

    func entry(_ id: String) -> Entry? { current.withLock { $0[id] } }

    /// `id` when it names a configured app; otherwise the API's 404 `app_not_found`.
    func requireKnown(_ id: String) throws -> String {
        guard entry(id) != nil else { throw APIError(.notFound, code: "app_not_found", message: "no such app") }
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
        guard let entry = entry(id) else {
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
