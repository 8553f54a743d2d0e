import Crypto
import Foundation
import Postgres
import Synchronization

/// A provider credential shared by every instance through PostgreSQL (`provider_tokens`): the
/// APNs provider token of a key, the FCM access token of a service account.
///
/// Apple refuses a key's provider tokens when they change more often than every 20 minutes
/// (TooManyProviderTokenUpdates), whichever instance signs them, and Google would hand out one
/// access token per instance. So one instance makes a new token, holding the credential's lease
/// (`leases`), and stores it; the others use the stored one while it is usable.
struct ProviderTokenStore: Sendable {
    struct Entry: Sendable, Equatable {
        var token: String
        var issuedAt: Date
        var expiresAt: Date
    }

    /// The token could not be had in time: another instance holds the refresh and stored nothing.
    struct Unavailable: Error, CustomStringConvertible {
        var credential: String
        var description: String {
            "no provider token for \(credential): another instance is refreshing it and stored none in time"
        }
    }

    /// A credential's name in `provider_tokens`: `base` (what names it to a person, such as
    /// `apns:TEAM:KEYID`) and a fingerprint of the secret that signs its tokens, so a credential
    /// replaced under the same name never reuses a token the old one made.
    static func credentialName(_ base: String, material: String) -> String {
        let normalised = material.split(whereSeparator: \.isWhitespace).joined()
        return base + ":"
            + SHA256.hash(data: Data(normalised.utf8)).prefix(6).map { String(format: "%02x", $0) }.joined()
    }

    /// ``credentialName(_:material:)`` for an APNs key: the fingerprint is of its public key.
    static func credentialName(_ base: String, key: P256.Signing.PrivateKey) -> String {
        credentialName(base, material: key.publicKey.derRepresentation.base64EncodedString())
    }

    /// Seals tokens at rest, when the relay has a key for it (the managed apps' `apps_store` key).
    struct Sealer: Sendable {
        /// `token` sealed for the row `credential`, as the column's text.
        var seal: @Sendable (_ token: String, _ credential: String) throws -> String
        /// The token of a stored value, or `nil` when it cannot be opened (another key, another row).
        var open: @Sendable (_ stored: String, _ credential: String) -> String?
    }

    /// Stored values this store sealed start with this.
    static let sealedPrefix = "sealed:"

    let client: PostgresClient
    /// Without one, tokens are stored in clear (they are short-lived: an APNs provider token lasts
    /// an hour, an FCM access token about as long).
    let sealer: Sealer?
    /// Refreshes in flight in this process, one per credential.
    private let inFlight = RefreshesInFlight()
    private let leases: Leases
    /// How long a caller waits for another instance's refresh before giving up.
    let waitLimit: Duration
    /// How often a waiting caller looks for the stored token.
    let waitInterval: Duration
    /// Times the wait for another instance's refresh.
    let clock: RelayClock

    init(
        client: PostgresClient,
        sealer: Sealer? = nil,
        waitLimit: Duration = .seconds(30),
        waitInterval: Duration = .milliseconds(250),
        clock: RelayClock = .system
    ) {
        self.clock = clock
        self.client = client
        self.sealer = sealer
        self.leases = Leases(client: client, owner: leaseOwnerName(role: "tokens"))
        self.waitLimit = waitLimit
        self.waitInterval = waitInterval
    }

    /// The stored token for `credential` when it is usable at `now` (issued less than `reuseFor`
    /// ago, not yet expired, and not `rejected`, the token a provider refused); otherwise the one
    /// `make` produces, stored for the others.
    ///
    /// One caller per credential in this process refreshes; the others here wait for its result.
    /// Across instances, the one holding the credential's lease (`leases`, a short statement)
    /// refreshes and the others poll the stored row. `make` (which may call a token endpoint)
    /// runs with no database connection or transaction held, so a slow token endpoint costs the
    /// pool nothing.
    func token(
        credential: String,
        now: Date,
        reuseFor: TimeInterval,
        rejected: String?,
        make: @escaping @Sendable () async throws -> Entry
    ) async throws -> Entry {
        try await inFlight.run(credential) {
            try await refresh(credential: credential, now: now, reuseFor: reuseFor, rejected: rejected, make: make)
        }
    }

    private func refresh(
        credential: String,
        now: Date,
        reuseFor: TimeInterval,
        rejected: String?,
        make: @Sendable () async throws -> Entry
    ) async throws -> Entry {
        func usable(_ entry: Entry?) -> Entry? {
            guard let entry, entry.token != rejected, now.timeIntervalSince(entry.issuedAt) < reuseFor,
                now < entry.expiresAt
            else { return nil }
            return entry
        }
        let lease = "provider_token " + credential
        let giveUp = clock.now() + waitLimit
        while true {
            if let stored = usable(try await read(credential)) { return stored }
            if try await leases.acquire(lease, for: waitLimit + .seconds(30)) {
                do {
                    // Stored by another instance between the read and the lease?
                    if let stored = usable(try await read(credential)) {
                        try? await leases.release(lease)
                        return stored
                    }
                    let fresh = try await make()
                    try await client.query(
                        """
                        INSERT INTO provider_tokens (credential, token, issued_at, expires_at) VALUES ($1, $2, $3, $4)
                        ON CONFLICT (credential) DO UPDATE SET token = excluded.token, issued_at = excluded.issued_at, expires_at = \
                        excluded.expires_at
                        """,
                        [credential, try stored(fresh.token, credential: credential), fresh.issuedAt, fresh.expiresAt]
                    )
                    try? await leases.release(lease)
                    return fresh
                } catch {
                    try? await leases.release(lease)
                    throw error
                }
            }
            guard clock.now() < giveUp else { throw Unavailable(credential: credential) }
            try await clock.sleep(for: waitInterval)
        }
    }

    private func read(_ credential: String) async throws -> Entry? {
        guard
            let row = try await client.query(
                "SELECT token, issued_at, expires_at FROM provider_tokens WHERE credential = $1",
                [credential]
            ).rows
                .first
        else { return nil }
        // A value this store cannot use (sealed under another key, or in clear while a key is set,
        // as written before the key was) is as good as none: a fresh token replaces it.
        guard let token = openStored(try row.decode(String.self, at: 0), credential: credential) else { return nil }
        return Entry(
            token: token,
            issuedAt: try row.decode(Date.self, at: 1),
            expiresAt: try row.decode(Date.self, at: 2)
        )
    }

    /// What the `token` column holds for `token`: sealed when there is a sealer.
    private func stored(_ token: String, credential: String) throws -> String {
        guard let sealer else { return token }
        return Self.sealedPrefix + (try sealer.seal(token, credential))
    }

    /// The token of a stored value, if this store can use it.
    private func openStored(_ stored: String, credential: String) -> String? {
        let sealed = stored.hasPrefix(Self.sealedPrefix)
        guard let sealer else { return sealed ? nil : stored }
        guard sealed else { return nil }
        return sealer.open(String(stored.dropFirst(Self.sealedPrefix.count)), credential)
    }
}

/// One refresh per credential at a time in this process: later callers wait for the one running
/// (without a database connection) and share its result.
final class RefreshesInFlight: Sendable {
    private let running = Mutex<[String: Task<ProviderTokenStore.Entry, any Error>]>([:])

    func run(
        _ credential: String,
        _ body: @escaping @Sendable () async throws -> ProviderTokenStore.Entry
    ) async throws -> ProviderTokenStore.Entry {
        let task = running.withLock { running in
            if let task = running[credential] { return task }
            // Unstructured on purpose: it must outlive a first caller that is cancelled, since the
            // others wait for it too.
            let task = Task { try await body() }
            running[credential] = task
            return task
        }
        defer { running.withLock { if $0[credential] == task { $0[credential] = nil } } }
        return try await task.value
    }
}
