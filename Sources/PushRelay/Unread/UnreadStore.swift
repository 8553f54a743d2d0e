import Hummingbird
import Postgres

/// An owner's unread replies: the total (the app badge) and the count per ticket.
struct UnreadSummary: Sendable, Codable, Hashable, ResponseEncodable {
    struct Ticket: Sendable, Codable, Hashable {
        var ticketID: String
        var unread: Int

        enum CodingKeys: String, CodingKey {
            case ticketID = "ticket_id"
            case unread
        }
    }

    var total: Int
    var tickets: [Ticket]
}

/// Unread counters per (app, owner, ticket). Intake increments them (``IntakeWriter``); reading
/// clears them and queues a silent badge update to the owner's other devices.
struct UnreadStore: Sendable {
    let client: PostgresClient

    func summary(app: String, owner: String) async throws -> UnreadSummary {
        let rows = try await client.query(
            "SELECT ticket_id, unread FROM unread_counters WHERE app_id = $1 AND owner = $2 AND unread > 0 ORDER BY ticket_id",
            [app, owner],
            prepare: true
        ).rows
        let tickets = try rows.map { row in
            let (ticket, unread) = try row.decode((String, Int).self)
            return UnreadSummary.Ticket(ticketID: ticket, unread: unread)
        }
        return UnreadSummary(total: tickets.reduce(0) { $0 + $1.unread }, tickets: tickets)
    }

    /// Clears one ticket (or every ticket when `ticket` is nil) in one transaction. When a count
    /// was cleared, every other active device of the owner gets a `badge_sync` delivery (its badge
    /// is read when it is sent, so it is current), and listeners are notified.
    /// - Returns: the owner's new total and how many devices will be synced.
    func markRead(app: String, owner: String, ticket: String?, readOn device: String?) async throws -> (total: Int, synced: Int) {
        let row = try await client.query(
            """
            WITH cleared AS (
                DELETE FROM unread_counters
                WHERE app_id = $1 AND owner = $2 AND ($3::text IS NULL OR ticket_id = $3) AND unread > 0
                RETURNING unread
            ),
            remaining AS (
                SELECT coalesce(sum(unread), 0)::int AS total FROM unread_counters
                WHERE app_id = $1 AND owner = $2 AND $3::text IS NOT NULL AND ticket_id <> $3
            ),
            synced AS (
                INSERT INTO deliveries (app_id, device_token, platform, kind)
                SELECT app_id, token, platform, 'badge_sync' FROM devices
                WHERE app_id = $1 AND status = 'active' AND (user_id = $2 OR (user_id IS NULL AND token = $2))
                  AND token IS DISTINCT FROM $4 AND EXISTS (SELECT 1 FROM cleared)
                ORDER BY token
                RETURNING id
            ),
            notified AS (
                SELECT pg_notify('\(UnreadChannel.name)', $1 || ' ' || $2), pg_notify('\(IntakeWriter.channel)', '')
                WHERE EXISTS (SELECT 1 FROM cleared)
            )
            SELECT (SELECT total FROM remaining), (SELECT count(*) FROM synced)::int, (SELECT count(*) FROM notified)::int
            """,
            [app, owner, ticket, device],
            prepare: true
        ).first
        guard let row else { return (0, 0) }
        let (total, synced, _) = try row.decode((Int, Int, Int).self)
        return (total, synced)
    }
}
