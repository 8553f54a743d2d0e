import Crypto
import Foundation
import JWTKit

/// The ES256 provider token for one APNs key (token authentication).
///
/// Apple wants a token reused for at least 20 minutes and no older than 60, and answers
/// TooManyProviderTokenUpdates to clients that sign one per request. So one token is kept and
/// signed again only after `refreshInterval` (50 minutes by default), or at once when APNs
/// reported it expired. With a ``ProviderTokenStore`` the token is the cluster's: the instance that
/// finds it due signs it and stores it, the others use the stored one, and an expiry reported by
/// several instances leads to one new token. The clock is injected so the rules can be tested
/// without waiting.
actor APNsTokenManager {
    struct Claims: JWTPayload {
        var iss: IssuerClaim
        var iat: IssuedAtClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    private let keys: JWTKeyCollection
    private let keyID: String
    private let teamID: String
    private let refreshInterval: TimeInterval
    private let now: @Sendable () -> Date
    private let store: ProviderTokenStore?
    private var current: (token: String, issuedAt: Date)?
    /// The token APNs last reported expired, until a new one is in use.
    private var rejected: String?

    /// The credential's name in the ``ProviderTokenStore``: team, key id and the key's fingerprint,
    /// so a token signed with a replaced `.p8` (same key id, other key) is never reused.
    nonisolated let credential: String

    /// - Parameters:
    ///   - privateKeyPEM: the `.p8` file's content (PKCS#8 PEM of a P-256 key).
    ///   - store: shares the token with the other instances; `nil` keeps it to this process.
    init(
        privateKeyPEM: String,
        keyID: String,
        teamID: String,
        refreshInterval: TimeInterval = 50 * 60,
        store: ProviderTokenStore? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) async throws {
        let key = try ES256PrivateKey(pem: privateKeyPEM)
        keys = await JWTKeyCollection().add(ecdsa: key, kid: JWKIdentifier(string: keyID))
        credential = ProviderTokenStore.credentialName(
            "apns:\(teamID):\(keyID)",
            key: try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
        )
        self.keyID = keyID
        self.teamID = teamID
        self.refreshInterval = min(max(refreshInterval, 20 * 60), 60 * 60 - 60)
        self.store = store
        self.now = now
    }

    /// The token to send now.
    func token() async throws -> String {
        let time = now()
        if let current, time.timeIntervalSince(current.issuedAt) < refreshInterval { return current.token }
        let entry: ProviderTokenStore.Entry
        if let store {
            entry = try await store.token(
                credential: credential,
                now: time,
                reuseFor: refreshInterval,
                rejected: rejected
            ) {
                try await self.sign(at: time)
            }
        } else {
            entry = try await sign(at: time)
        }
        current = (entry.token, entry.issuedAt)
        rejected = nil
        return entry.token
    }

    private func sign(at time: Date) async throws -> ProviderTokenStore.Entry {
        // APNs reads iat in whole seconds.
        let issuedAt = Date(timeIntervalSince1970: time.timeIntervalSince1970.rounded(.down))
        let token = try await keys.sign(
            Claims(iss: .init(value: teamID), iat: .init(value: issuedAt)),
            kid: JWKIdentifier(string: keyID)
        )
        return .init(token: token, issuedAt: issuedAt, expiresAt: issuedAt.addingTimeInterval(60 * 60))
    }

    /// APNs refused `token` (ExpiredProviderToken, InvalidProviderToken or another credential
    /// answer): the next call signs a new one (or, with a store, takes the one another instance
    /// signed since: the cluster signs one new token per refused one). A stale report about an
    /// older token changes nothing.
    func rejected(_ token: String) {
        if current?.token == token {
            current = nil
            rejected = token
        }
    }
}
