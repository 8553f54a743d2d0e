import Foundation
import Postgres

/// A provider credential shared by every instance through PostgreSQL (`provider_tokens`): the
/// APNs provider token of a key, the FCM access token of a service account.
///
/// Apple refuses a key's provider tokens when they change more often than every 20 minutes
/// (TooManyProviderTokenUpdates), whichever instance signs them, and Google would hand out one
/// access token per instance. So one instance makes a new token, under an advisory lock on the
/// credential, and stores it; the others use the stored one while it is usable.
struct ProviderTokenStore: Sendable {
    struct Entry: Sendable, Equatable {
        var token: String
        var issuedAt: Date
        var expiresAt: Date
    }

    let client: PostgresClient

    /// The stored token for `credential` when it is usable at `now` (issued less than `reuseFor`
    /// ago, not yet expired, and not `rejected`, the token a provider refused); otherwise the one
    /// `make` produces, stored for the others. Callers for one credential take turns, so a
    /// cluster makes one token where each instance would have made its own.
    func token(
        credential: String, now: Date, reuseFor: TimeInterval, rejected: String?, make: @Sendable () async throws -> Entry
    ) async throws -> Entry {
        try await client.withTransaction { session in
            _ = try await session.query("SELECT pg_advisory_xact_lock(hashtext('provider_tokens ' || $1))", [credential])
            let rows = try await session.query(
                "SELECT token, issued_at, expires_at FROM provider_tokens WHERE credential = $1", [credential]
            ).rows
            if let row = rows.first {
                let stored = Entry(token: try row.decode(String.self, at: 0), issuedAt: try row.decode(Date.self, at: 1), expiresAt: try row.decode(Date.self, at: 2))
                if stored.token != rejected, now.timeIntervalSince(stored.issuedAt) < reuseFor, now < stored.expiresAt { return stored }
            }
            let fresh = try await make()
            _ = try await session.query(
                """
                INSERT INTO provider_tokens (credential, token, issued_at, expires_at) VALUES ($1, $2, $3, $4)
                ON CONFLICT (credential) DO UPDATE SET token = excluded.token, issued_at = excluded.issued_at, expires_at = excluded.expires_at
                """,
                [credential, fresh.token, fresh.issuedAt, fresh.expiresAt]
            )
            return fresh
        }
    }
}
