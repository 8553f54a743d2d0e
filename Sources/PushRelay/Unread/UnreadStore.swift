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

/// Unread counters per (app, owner, ticket). Intake increments them (``DeliveryQueue/enqueue(_:reservation:)``);
/// reading clears them and queues a silent badge update to the owner's other devices.
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

    /// Clears one ticket (or every ticket when `ticket` is nil), up to notification `upTo` when
    /// given; when a count went down, the owner's other active devices get a badge sync
    /// (``ReadSync/markRead(app:owner:ticket:upTo:readOn:)``).
    /// - Returns: the owner's new total and how many devices will be synced.
    func markRead(
        app: String,
        owner: String,
        ticket: String?,
        upTo: Int64? = nil,
        readOn device: String?
    ) async throws -> (total: Int, synced: Int) {
        try await ReadSync(client: client).markRead(app: app, owner: owner, ticket: ticket, upTo: upTo, readOn: device)
    }
}
