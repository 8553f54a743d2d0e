import Foundation
import JWTKit

/// The ES256 provider token for one APNs key (token authentication).
///
/// Apple wants a token reused for at least 20 minutes and no older than 60, and answers
/// TooManyProviderTokenUpdates to clients that sign one per request. So one token is kept and
/// signed again only after `refreshInterval` (50 minutes by default), or at once when APNs
/// reported it expired. The clock is injected so the rules can be tested without waiting.
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
    private var current: (token: String, issuedAt: Date)?

    /// - Parameters:
    ///   - privateKeyPEM: the `.p8` file's content (PKCS#8 PEM of a P-256 key).
    init(
        privateKeyPEM: String, keyID: String, teamID: String, refreshInterval: TimeInterval = 50 * 60,
        now: @escaping @Sendable () -> Date = { Date() }
    ) async throws {
        let key = try ES256PrivateKey(pem: privateKeyPEM)
        keys = await JWTKeyCollection().add(ecdsa: key, kid: JWKIdentifier(string: keyID))
        self.keyID = keyID
        self.teamID = teamID
        self.refreshInterval = min(max(refreshInterval, 20 * 60), 60 * 60 - 60)
        self.now = now
    }

    /// The token to send now.
    func token() async throws -> String {
        let time = now()
        if let current, time.timeIntervalSince(current.issuedAt) < refreshInterval { return current.token }
        // APNs reads iat in whole seconds.
        let issuedAt = Date(timeIntervalSince1970: time.timeIntervalSince1970.rounded(.down))
        let token = try await keys.sign(Claims(iss: .init(value: teamID), iat: .init(value: issuedAt)), kid: JWKIdentifier(string: keyID))
        current = (token, issuedAt)
        return token
    }

    /// APNs answered ExpiredProviderToken for `token`: the next call signs a new one. A stale
    /// report about an older token changes nothing.
    func expired(_ token: String) {
        if current?.token == token { current = nil }
    }
}
