import Crypto
import Foundation
import Postgres

/// API keys in PostgreSQL (`api_keys`).
public struct APIKeyStore: Sendable {
    let client: PostgresClient

    public init(client: PostgresClient) { self.client = client }

    /// Creates a key for `appID` (or an admin key when `nil`) and returns its record and plaintext.
    public func create(appID: String?, scopes: [APIKeyScope], label: String?) async throws -> (record: APIKeyRecord, key: APIKey) {
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
        let record = APIKeyRecord(
            id: id, prefix: key.prefix, appID: appID, scopes: scopeNames, label: label,
            createdAt: try row.decode(Date.self, at: 0), revokedAt: nil
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
        return result.affectedRows > 0
    }

    /// The live key matching `presented`, or `nil`.
    public func verify(_ presented: APIKey) async throws -> APIKeyRecord? {
        let result = try await client.query(
            "SELECT id, prefix, app_id, scopes, label, created_at, revoked_at, secret_hash FROM api_keys WHERE prefix = $1",
            [presented.prefix]
        )
        guard let row = result.first else { return nil }
        let stored = try row.decode(Data.self, at: 7)
        guard constantTimeEqual(Array(stored), Array(SHA256.hash(data: Data(presented.plaintext.utf8)))) else { return nil }
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
