import Foundation
import Postgres

/// ``DeviceRepository`` on the `devices` table.
public struct PostgresDeviceRepository: DeviceRepository {
    let client: PostgresClient
    /// Where a device that moves to another owner gets its badge sync.
    let reads: ReadSync

    public init(client: PostgresClient) {
        self.client = client
        self.reads = ReadSync(client: client)
    }

    static let columns =
        "app_id, token, platform, user_id, environment, locale, status, invalid_reason, created_at, updated_at, push_key IS NOT NULL, push_key_id"

    /// Registers or updates a device in one statement. When an existing device moves to another
    /// owner (its `user_id` changes, or it gains or loses one: the owner is the user, or the token
    /// when no user is linked), it gets one badge sync, which carries the new owner's total when it
    /// is sent (0 when they have no unread replies), so the device stops showing the previous
    /// owner's badge; the dispatchers are woken for it.
    ///
    /// A registration linking the device to a user counts that user's other active devices under
    /// a transaction-scoped advisory lock on (app, user), so concurrent registrations cannot pass
    /// the cap together.
    public func upsert(
        _ registration: DeviceRegistration,
        onlyForUser: String?,
        claimUnowned: Bool,
        maxPerUser: Int
    ) async throws -> DeviceUpsert {
        try await client.withTransaction { session in
            if let user = registration.userID {
                // The lock first, then the count in a statement of its own: its snapshot is taken
                // after the lock, so it sees what a registration that held the lock committed.
                _ = try await session.query(
                    "SELECT pg_advisory_xact_lock(hashtextextended($1 || ' ' || $2, 7))",
                    [registration.appID, user]
                )
                let others =
                    try await session.query(
                        "SELECT count(*)::int FROM devices WHERE app_id = $1 AND user_id = $2 AND token <> $3 AND status = 'active'",
                        [registration.appID, user, registration.token]
                    ).first?.decode(Int.self, at: 0) ?? 0
                if others >= maxPerUser { return .tooManyDevices(others) }
            }
            guard
                let row = try await session.query(
                    """
                    WITH previous AS MATERIALIZED (
                        SELECT user_id FROM devices WHERE app_id = $1 AND token = $2
                    ),
                    upserted AS (
                        INSERT INTO devices AS d (app_id, token, platform, user_id, environment, locale, push_key_id, push_key, push_key_sealed_by)
                        VALUES ($1, $2, $3, $4, $5, $6, $9, $10, $11)
                        ON CONFLICT (app_id, token) DO UPDATE SET
                            platform = EXCLUDED.platform, user_id = EXCLUDED.user_id, environment = EXCLUDED.environment,
                            locale = EXCLUDED.locale, status = 'active', invalid_reason = NULL, invalidated_at = NULL, updated_at = now(),
                            push_key_id = EXCLUDED.push_key_id, push_key = EXCLUDED.push_key, push_key_sealed_by = EXCLUDED.push_key_sealed_by
                        WHERE $7::text IS NULL OR d.user_id = $7 OR (d.user_id IS NULL AND $8::boolean)
                        RETURNING (xmax = 0) AS inserted, \(Self.columns)
                    )
                    SELECT u.*, NOT u.inserted AND coalesce(p.user_id, u.token) IS DISTINCT FROM coalesce(u.user_id, u.token)
                    FROM upserted u LEFT JOIN previous p ON true
                    """,
                    [
                        registration.appID, registration.token, registration.platform.rawValue, registration.userID,
                        registration.environment, registration.locale, onlyForUser, claimUnowned,
                        registration.pushKey?.id, registration.pushKey?.bytes, registration.pushKey?.sealedBy,
                    ]
                ).first
            else {
                let owner = try await session.query(
                    "SELECT user_id FROM devices WHERE app_id = $1 AND token = $2",
                    [registration.appID, registration.token]
                ).first?.decode(String?.self, at: 0)
                return owner == nil ? .unowned : .ownedByAnotherUser
            }
            let device = try Self.device(row, offset: 1)
            if try row.decode(Bool.self, at: 13) {
                try await reads.queueBadgeSyncs(
                    app: device.appID,
                    devices: [(device.token, device.platform)],
                    in: session
                )
            }
            return try row.decode(Bool.self, at: 0) ? .created(device) : .updated(device)
        }
    }

    public func get(app: String, token: String) async throws -> Device? {
        try await client.query("SELECT \(Self.columns) FROM devices WHERE app_id = $1 AND token = $2", [app, token])
            .first.map { try Self.device($0, offset: 0) }
    }

    public func delete(
        app: String,
        token: String,
        onlyForUser: String?,
        claimUnowned: Bool
    ) async throws -> DeviceDeletion {
        let result = try await client.query(
            """
            WITH target AS (SELECT user_id FROM devices WHERE app_id = $1 AND token = $2),
            gone AS (
                DELETE FROM devices WHERE app_id = $1 AND token = $2
                AND ($3::text IS NULL OR user_id = $3 OR (user_id IS NULL AND $4::boolean)) RETURNING 1
            )
            SELECT (SELECT count(*) FROM target), (SELECT count(*) FROM target WHERE user_id IS NULL), (SELECT count(*) FROM gone)
            """,
            [app, token, onlyForUser, claimUnowned]
        )
        let (found, unowned, deleted) = try result.first!.decode((Int, Int, Int).self)
        if deleted > 0 { return .deleted }
        if unowned > 0 { return .unowned }
        return found > 0 ? .ownedByAnotherUser : .notFound
    }

    public func list(app: String, user: String) async throws -> [Device] {
        try await client.query(
            "SELECT \(Self.columns) FROM devices WHERE app_id = $1 AND user_id = $2 ORDER BY created_at, token",
            [app, user]
        ).rows.map { try Self.device($0, offset: 0) }
    }

    private static func status(_ text: String) throws -> DeviceStatus {
        guard let status = DeviceStatus(rawValue: text) else {
            throw PostgresError(code: .decoding, message: "unknown status in devices")
        }
        return status
    }

    private static func device(_ row: PostgresRow, offset: Int) throws -> Device {
        guard let platform = Platform(rawValue: try row.decode(String.self, at: offset + 2)) else {
            throw PostgresError(code: .decoding, message: "unknown platform in devices")
        }
        return Device(
            appID: try row.decode(String.self, at: offset),
            token: try row.decode(String.self, at: offset + 1),
            platform: platform,
            userID: try row.decode(String?.self, at: offset + 3),
            environment: try row.decode(String?.self, at: offset + 4),
            locale: try row.decode(String?.self, at: offset + 5),
            status: try Self.status(try row.decode(String.self, at: offset + 6)),
            invalidReason: try row.decode(String?.self, at: offset + 7),
            createdAt: try row.decode(Date.self, at: offset + 8),
            updatedAt: try row.decode(Date.self, at: offset + 9),
            pushKeySet: try row.decode(Bool.self, at: offset + 10),
            pushKeyID: try row.decode(String?.self, at: offset + 11)
        )
    }
}
