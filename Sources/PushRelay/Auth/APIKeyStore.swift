import Crypto
import Foundation
import Postgres

/// API keys in PostgreSQL (`api_keys`), verified from an in-memory copy (``APIKeyCache``).
public struct APIKeyStore: Sendable {
    let client: PostgresClient
    /// The live keys as this store last read them; shared by the copies of this store.
    let cache: APIKeyCache

    public init(client: PostgresClient) {
        self.init(client: client, cache: APIKeyCache())
    }

    init(client: PostgresClient, cache: APIKeyCache) {
        self.client = client
        self.cache = cache
    }

    /// Creates a key for `appID` (or an admin key when `nil`) and returns its record and plaintext.
    public func create(
        appID: String?,
        scopes: [APIKeyScope],
        label: String?
    ) async throws -> (record: APIKeyRecord, key: APIKey) {
        let key = APIKey.generate()
        let id = UUID()
        let scopeNames = appID == nil ? ["admin"] : scopes.map(\.rawValue)
        let row = try await client.query(
            """
            INSERT INTO api_keys (id, prefix, secret_hash, app_id, scopes, label)
            VALUES ($1, $2, $3, $4, $5, $6) RETURNING created_at
            """,
            [id, key.prefix, key.hash, appID, scopeNames, label]
        ).first!
        cache.invalidate()
        let record = APIKeyRecord(
            id: id,
            prefix: key.prefix,
            appID: appID,
            scopes: scopeNames,
            label: label,
            createdAt: try row.decode(Date.self, at: 0),
            revokedAt: nil
        )
        return (record, key)
    }

    /// Keys, newest first, optionally of one app.
    public func list(appID: String? = nil) async throws -> [APIKeyRecord] {
        let result = try await client.query(
            """
            SELECT id, prefix, app_id, scopes, label, created_at, revoked_at FROM api_keys
            WHERE $1::text IS NULL OR app_id = $1 ORDER BY created_at DESC
            """,
            [appID]
        )
        return try result.rows.map(Self.record)
    }

    /// Revokes the key with this id or prefix; returns whether a live key was revoked.
    public func revoke(_ idOrPrefix: String) async throws -> Bool {
        let id = UUID(uuidString: idOrPrefix)
        let result = try await client.query(
            "UPDATE api_keys SET revoked_at = now() WHERE (id = $1 OR prefix = $2) AND revoked_at IS NULL",
            [id, idOrPrefix.lowercased()]
        )
        cache.invalidate()
        return result.affectedRows > 0
    }

    /// The live key matching `presented`, or `nil`. Answered from ``APIKeyCache`` (see there for
    /// when it reads the database); only with more live keys than the cache holds does a prefix
    /// outside it cost a query.
    public func verify(_ presented: APIKey) async throws -> APIKeyRecord? {
        let arrival = cache.clock.now()
        var snapshot = try await cache.snapshot(
            notBefore: arrival - cache.freshness,
            rateLimited: false,
            loader: loader
        )
        if snapshot.keys[presented.prefix] == nil && snapshot.complete {
            // Unknown here: make sure it was not created since the copy was checked.
            snapshot = try await cache.snapshot(notBefore: arrival, rateLimited: true, loader: loader)
        }
        if let entry = snapshot.keys[presented.prefix] {
            guard constantTimeEqual(entry.hash, Array(SHA256.hash(data: Data(presented.plaintext.utf8)))) else {
                return nil
            }
            return entry.record
        }
        return snapshot.complete ? nil : try await verifyInDatabase(presented)
    }

    /// Reads the generation and the newest `limit` live keys for ``APIKeyCache``.
    private var loader: APIKeyCache.Loader {
        let client = client
        return APIKeyCache.Loader(
            generation: {
                let row = try await client.query(
                    "SELECT k.generation, s.generation FROM api_key_generation k, console_session_generation s",
                    prepare: true
                ).first
                return try row?.decode((Int64, Int64).self) ?? (0, 0)
            },
            keys: { limit in
                // One statement, so the keys and the generation are of one snapshot of the database.
                let result = try await client.query(
                    """
                    SELECT g.generation, k.id, k.prefix, k.app_id, k.scopes, k.label, k.created_at, k.revoked_at, k.secret_hash
                    FROM api_key_generation g LEFT JOIN LATERAL (
                        SELECT * FROM api_keys WHERE revoked_at IS NULL ORDER BY created_at DESC LIMIT $1
                    ) k ON true
                    """,
                    [limit + 1]
                )
                var keys: [String: APIKeyCache.Entry] = [:]
                var generation: Int64 = 0
                var rows = 0
                for row in result.rows {
                    generation = try row.decode(Int64.self, at: 0)
                    guard let id = try row.decode(UUID?.self, at: 1) else { continue }
                    rows += 1
                    guard rows <= limit else { break }
                    let record = APIKeyRecord(
                        id: id,
                        prefix: try row.decode(String.self, at: 2),
                        appID: try row.decode(String?.self, at: 3),
                        scopes: try row.decode([String].self, at: 4),
                        label: try row.decode(String?.self, at: 5),
                        createdAt: try row.decode(Date.self, at: 6),
                        revokedAt: try row.decode(Date?.self, at: 7)
                    )
                    keys[record.prefix] = APIKeyCache.Entry(
                        hash: Array(try row.decode(Data.self, at: 8)),
                        record: record
                    )
                }
                // The sessions after the keys: a session of a key revoked in between is left out,
                // and content newer than the generation it is filed under only makes the next
                // check read again.
                return APIKeyCache.Snapshot(
                    generation: generation,
                    keys: keys,
                    complete: rows <= limit,
                    sessions: try await Self.sessions(client, limit: limit)
                )
            },
            sessions: { limit in try await Self.sessions(client, limit: limit) }
        )
    }

    /// The newest `limit` console sessions of live keys by use (ended ones by time are left to the
    /// reader, which knows the timeouts), by token hash, with their generation and whether that
    /// was all of them. One statement, so the sessions and the generation are of one snapshot.
    private static func sessions(_ client: PostgresClient, limit: Int) async throws -> APIKeyCache.Sessions {
        let result = try await client.query(
            """
            SELECT \(ConsoleSessionStore.Session.columns), s.token_hash, s.created_at, s.last_seen_at, g.generation
            FROM console_session_generation g
            LEFT JOIN (console_sessions s JOIN api_keys k ON k.id = s.key_id AND k.revoked_at IS NULL) ON true
            ORDER BY s.last_seen_at DESC LIMIT $1
            """,
            [limit + 1]
        )
        var sessions = APIKeyCache.Sessions()
        var rows = 0
        for row in result.rows {
            sessions.generation = try row.decode(Int64.self, at: 8)
            guard let hash = try row.decode(Data?.self, at: 5) else { continue }
            rows += 1
            guard rows <= limit else { break }
            sessions.entries[hash] = APIKeyCache.SessionEntry(
                session: try ConsoleSessionStore.Session(row: row),
                createdAt: try row.decode(Date.self, at: 6),
                lastSeenAt: try row.decode(Date.self, at: 7)
            )
        }
        sessions.complete = rows <= limit
        return sessions
    }

    /// The console session of token hash `hash` as the in-memory copy holds it, with the
    /// generation of that copy: checked against a copy at most ``APIKeyCache/freshness`` old, and
    /// when absent from a complete copy, against one whose check started after this call (rate
    /// limited, as for unknown keys), so a session opened on another instance is found and a
    /// made-up one costs no query of its own. `complete` is false when the copy does not hold
    /// every session (then the caller reads the table).
    func session(hash: Data) async throws -> (entry: APIKeyCache.SessionEntry?, generation: Int64, complete: Bool) {
        let arrival = cache.clock.now()
        var snapshot = try await cache.snapshot(
            notBefore: arrival - cache.freshness,
            rateLimited: false,
            loader: loader
        )
        if snapshot.sessions.entries[hash] == nil && snapshot.sessions.complete {
            snapshot = try await cache.snapshot(notBefore: arrival, rateLimited: true, loader: loader)
        }
        return (snapshot.sessions.entries[hash], snapshot.sessions.generation, snapshot.sessions.complete)
    }

    /// The live key matching `presented`, read from the database.
    private func verifyInDatabase(_ presented: APIKey) async throws -> APIKeyRecord? {
        let result = try await client.query(
            "SELECT id, prefix, app_id, scopes, label, created_at, revoked_at, secret_hash FROM api_keys WHERE prefix = $1",
            [presented.prefix]
        )
        guard let row = result.first else { return nil }
        let stored = try row.decode(Data.self, at: 7)
        guard constantTimeEqual(Array(stored), Array(SHA256.hash(data: Data(presented.plaintext.utf8)))) else {
            return nil
        }
        let record = try Self.record(row)
        return record.revokedAt == nil ? record : nil
    }

    private static func record(_ row: PostgresRow) throws -> APIKeyRecord {
        APIKeyRecord(
            id: try row.decode(UUID.self, at: 0),
            prefix: try row.decode(String.self, at: 1),
            appID: try row.decode(String?.self, at: 2),
            scopes: try row.decode([String].self, at: 3),
            label: try row.decode(String?.self, at: 4),
            createdAt: try row.decode(Date.self, at: 5),
            revokedAt: try row.decode(Date?.self, at: 6)
        )
    }
}
