import Foundation
import Postgres

/// Reads: a read clears the owner's unread counts and queues a badge sync for the owner's other
/// devices, so every device shows the new count; a device that moves to another owner gets one
/// too. Both write deliveries (`kind` `badge_sync`), which the dispatcher sends like any other.
struct ReadSync: Sendable {
    let client: PostgresClient

    /// Clears one ticket (or every ticket when `ticket` is nil) of an owner's unread counts, in one
    /// statement: every notification counted, or with `upTo`, those with an id up to it, so a reply
    /// stored after what the reader saw stays counted. Of those counted past the newest
    /// ``DeliveryQueue/keptUnreadIDs`` (without their ids), a read up to an id clears them when none is newer
    /// than it (`dropped_up_to`), and keeps them otherwise; those counted before ids were kept
    /// (0006) are older than any id.
    /// When a count went down, every other active device of the owner gets a `badge_sync` delivery
    /// (its badge is read when it is sent, so it is current), and listeners are notified.
    /// - Returns: the owner's new total and how many devices will be synced.
    func markRead(
        app: String,
        owner: String,
        ticket: String?,
        upTo: Int64? = nil,
        readOn device: String?
    ) async throws -> (total: Int, synced: Int) {
        let row = try await client.query(
            """
            WITH locked AS MATERIALIZED (
                SELECT ticket_id, unread, notification_ids, dropped_up_to
                FROM unread_counters
                WHERE app_id = $1 AND owner = $2 AND ($3::text IS NULL OR ticket_id = $3) AND unread > 0
                FOR UPDATE
            ),
            before AS MATERIALIZED (
                SELECT ticket_id, unread, kept, cardinality(kept) + unidentified AS left_unread,
                       CASE WHEN unidentified > 0 THEN dropped_up_to END AS dropped_up_to
                FROM (
                    SELECT ticket_id, unread, dropped_up_to,
                           CASE WHEN $5::bigint IS NULL THEN '{}'::bigint[]
                                ELSE ARRAY(SELECT id FROM unnest(notification_ids) AS n(id) WHERE id > $5) END AS kept,
                           -- Counted without an id: kept only when some may be newer than the reader saw.
                           CASE WHEN $5::bigint IS NOT NULL AND dropped_up_to > $5 THEN unread - cardinality(notification_ids) ELSE 0 END
                               AS unidentified
                    FROM locked
                ) counts
            ),
            emptied AS (
                DELETE FROM unread_counters u USING before b
                WHERE u.app_id = $1 AND u.owner = $2 AND u.ticket_id = b.ticket_id AND b.left_unread = 0
                RETURNING b.unread AS removed
            ),
            reduced AS (
                UPDATE unread_counters u SET notification_ids = b.kept, unread = b.left_unread, dropped_up_to = b.dropped_up_to, updated_at = now()
                FROM before b
                WHERE u.app_id = $1 AND u.owner = $2 AND u.ticket_id = b.ticket_id
                  AND b.left_unread > 0 AND b.left_unread < b.unread
                RETURNING b.unread - b.left_unread AS removed
            ),
            cleared AS (
                SELECT removed FROM emptied UNION ALL SELECT removed FROM reduced
            ),
            remaining AS (
                SELECT (coalesce((SELECT sum(unread) FROM unread_counters WHERE app_id = $1 AND owner = $2), 0)
                        - coalesce((SELECT sum(removed) FROM cleared), 0))::int AS total
            ),
            synced AS (\(Self.queueBadgeSyncs(from: """
                devices
                WHERE app_id = $1 AND status = 'active' AND (user_id = $2 OR (user_id IS NULL AND token = $2))
                  AND token IS DISTINCT FROM $4 AND EXISTS (SELECT 1 FROM cleared)
                ORDER BY token
                """))),
            notified AS (
                SELECT pg_notify('\(UnreadChannel.name)', $1 || ' ' || $2), pg_notify('\(DeliveryQueue.channel)', '')
                WHERE EXISTS (SELECT 1 FROM cleared)
            )
            SELECT (SELECT total FROM remaining), (SELECT count(*) FROM synced)::int, (SELECT count(*) FROM notified)::int
            """,
            [app, owner, ticket, device, upTo],
            prepare: true
        ).first
        guard let row else { return (0, 0) }
        let (total, synced, _) = try row.decode((Int, Int, Int).self)
        return (total, synced)
    }

    /// The statement (for a CTE) that queues a badge sync for each row of `source`, a relation
    /// with `app_id`, `token` and `platform` (and any `WHERE` / `ORDER BY` after it); it returns
    /// the new deliveries' ids. A badge sync carries no text: its badge is the device owner's total
    /// when it is claimed, so it is current when sent. Reads (``markRead(app:owner:ticket:upTo:readOn:)``)
    /// and a device moving to another owner (``queueBadgeSyncs(app:devices:in:)``) queue through it.
    private static func queueBadgeSyncs(from source: String) -> String {
        """
        INSERT INTO deliveries (app_id, device_token, platform, kind, due)
        SELECT app_id, token, platform, '\(DeliveryKind.badgeSync.rawValue)', true FROM \(source)
        RETURNING id
        """
    }

    /// Queues one badge sync for each of the app's `devices` inside the caller's transaction
    /// (`session`), and wakes the dispatchers when it commits. The device registry calls it when a
    /// device moves to another owner, so the device stops showing the previous owner's badge.
    func queueBadgeSyncs(
        app: String,
        devices: [(token: String, platform: Platform)],
        in session: PostgresSession
    ) async throws {
        guard !devices.isEmpty else { return }
        try await session.query(
            """
            WITH moved AS (
                SELECT $1::text AS app_id, token, platform FROM unnest($2::text[], $3::text[]) AS m(token, platform)
            ),
            synced AS (\(Self.queueBadgeSyncs(from: "moved")))
            SELECT (SELECT count(*) FROM synced), pg_notify('\(DeliveryQueue.channel)', '')
            """,
            [app, devices.map(\.token), devices.map(\.platform.rawValue)]
        )
    }
}
