import Foundation
import JWTKit

/// A Google service account, as in the JSON key file FCM hands out.
public struct ServiceAccount: Sendable, Codable, Hashable {
    public var projectID: String
    public var clientEmail: String
    /// The RSA private key (PEM): the secret part.
    public var privateKey: String
    public var tokenURI: String

    public init(projectID: String, clientEmail: String, privateKey: String, tokenURI: String) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.privateKey = privateKey
        self.tokenURI = tokenURI
    }

    enum CodingKeys: String, CodingKey {
        case projectID = "project_id"
        case clientEmail = "client_email"
        case privateKey = "private_key"
        case tokenURI = "token_uri"
    }
}

/// The OAuth2 access token for FCM, from an RS256 assertion signed with the service account key.
///
/// The token is cached until a minute before it expires and fetched again when FCM answers
/// UNAUTHENTICATED. With a ``ProviderTokenStore`` the token is the cluster's: one instance asks
/// Google, the others use what it stored. The HTTP exchange is injected (delivery passes its
/// HTTP/2 client), so the rules can be tested without a network.
actor FCMAccessTokenManager {
    typealias Exchange = @Sendable (_ url: String, _ form: String) async throws -> (status: Int, body: [UInt8])

    struct Assertion: JWTPayload {
        var iss: IssuerClaim
        var scope: String
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    struct TokenError: Error, CustomStringConvertible {
        var description: String
    }

    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    private let account: ServiceAccount
    private let keys: JWTKeyCollection
    private let exchange: Exchange
    private let now: @Sendable () -> Date
    private let store: ProviderTokenStore?
    private var current: (token: String, expires: Date)?
    /// The token FCM last refused, until a new one is in use.
    private var rejected: String?

    /// The credential's name in the ``ProviderTokenStore``: the account and its key's fingerprint,
    /// so a replaced service account key never reuses the old key's access token.
    nonisolated var credential: String {
        ProviderTokenStore.credentialName("fcm:\(account.clientEmail)", material: account.privateKey)
    }

    init(
        account: ServiceAccount,
        exchange: @escaping Exchange,
        store: ProviderTokenStore? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) async throws {
        self.account = account
        keys = await JWTKeyCollection().add(
            rsa: try Insecure.RSA.PrivateKey(pem: account.privateKey),
            digestAlgorithm: .sha256
        )
        self.exchange = exchange
        self.store = store
        self.now = now
    }

    /// The access token to send now.
    func token() async throws -> String {
        let time = now()
        if let current, time < current.expires { return current.token }
        let entry: ProviderTokenStore.Entry
        if let store {
            // Usable until its expiry (already a minute early), whoever fetched it.
            entry = try await store.token(credential: credential, now: time, reuseFor: .infinity, rejected: rejected) {
                try await self.fetch(at: time)
            }
        } else {
            entry = try await fetch(at: time)
        }
        current = (entry.token, entry.expiresAt)
        rejected = nil
        return entry.token
    }

    private func fetch(at time: Date) async throws -> ProviderTokenStore.Entry {
        let issued = Date(timeIntervalSince1970: time.timeIntervalSince1970.rounded(.down))
        let assertion = try await keys.sign(
            Assertion(
                iss: .init(value: account.clientEmail),
                scope: Self.scope,
                aud: .init(value: [account.tokenURI]),
                iat: .init(value: issued),
                exp: .init(value: issued.addingTimeInterval(3600))
            )
        )
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)"
        let (status, body) = try await exchange(account.tokenURI, form)
        guard status == 200,
            let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let token = object["access_token"] as? String
        else {
            // The body may echo the assertion; only the status goes into the error.
            throw TokenError(description: "the OAuth token endpoint answered HTTP \(status)")
        }
        let lifetime = Self.lifetime(object["expires_in"])
        return .init(
            token: token,
            issuedAt: issued,
            expiresAt: issued.addingTimeInterval(TimeInterval(max(lifetime - 60, 0)))
        )
    }

    /// The token's lifetime in seconds from the answer's `expires_in`, bounded: Google grants an hour
    /// (3599), and the expiry is stored for the cluster, so a token endpoint's number that is
    /// missing, not an integer, negative or huge counts as at most a day and never traps.
    static func lifetime(_ value: Any?) -> Int {
        guard let number = value as? NSNumber else { return 3599 }
        let seconds = number.doubleValue
        guard seconds.isFinite else { return 3599 }
        return Int(min(max(seconds, 0), 86400))
    }

    /// FCM refused `token` (UNAUTHENTICATED, PERMISSION_DENIED, 401/403): the next call fetches a
    /// new one (or, with a store, takes the one another instance fetched since).
    func rejected(_ token: String) {
        if current?.token == token {
            current = nil
            rejected = token
        }
    }
}
