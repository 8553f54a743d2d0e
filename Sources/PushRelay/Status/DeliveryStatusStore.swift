import Foundation
import Postgres

/// One delivery as the status API shows it.
struct DeliveryStatusRecord: Sendable, Equatable, Codable {
    var id: Int64
    /// `nil` for a badge sync.
    var notificationID: Int64?
    var ticketID: String?
    /// The device token, shortened (first 6 and last 4 characters) unless the caller asked for
    /// full tokens and may see them.
    var token: String
    var platform: String
    var kind: String
    var status: String
    var attempts: Int
    var lastReason: String?
    var providerID: String?
    var createdAt: Date
    var updatedAt: Date
    var deliveredAt: Date?

    enum CodingKeys: String, CodingKey {
        case id, token, platform, kind, status, attempts
        case notificationID = "notification_id"
        case ticketID = "ticket_id"
        case lastReason = "last_reason"
        case providerID = "provider_id"
        case createdAt = "created_at"
        case updatedAt = "updated_at"
        case deliveredAt = "delivered_at"
    }

    /// Every key is written (`null` when absent).
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(notificationID, forKey: .notificationID)
        try c.encode(ticketID, forKey: .ticketID)
        try c.encode(token, forKey: .token)
        try c.encode(platform, forKey: .platform)
        try c.encode(kind, forKey: .kind)
        try c.encode(status, forKey: .status)
        try c.encode(attempts, forKey: .attempts)
        try c.encode(lastReason, forKey: .lastReason)
        try c.encode(providerID, forKey: .providerID)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt)
        try c.encode(deliveredAt, forKey: .deliveredAt)
    }
}

extension DeliveryStatusRecord {
    /// The select list ``init(row:fullTokens:)`` reads; `d` is the delivery, `n` its notification.
    static let columns =
        "d.id, d.notification_id, n.ticket_id, d.device_token, d.platform, d.kind, d.status, d.attempts, d.last_error, d.provider_id, "
        + "d.created_at, d.updated_at, d.delivered_at"

    /// How many columns ``columns`` has.
    static let columnCount = columns.split(separator: ",").count

    init(row: PostgresRow, fullTokens: Bool) throws {
        let (
            id, notification, ticket, token, platform, kind, status, attempts, reason, provider, created, updated,
            delivered
        ) = try row.decode(
            (Int64, Int64?, String?, String, String, String, String, Int, String?, String?, Date, Date, Date?).self
        )
        self.init(
            id: id,
            notificationID: notification,
            ticketID: ticket,
            token: fullTokens ? token : Redaction.token(token),
            platform: platform,
            kind: kind,
            status: status,
            attempts: attempts,
            lastReason: reason,
            providerID: provider,
            createdAt: created,
            updatedAt: updated,
            deliveredAt: delivered
        )
    }
}

/// A notification (one accepted webhook) as the status API shows it: what it was, and how many of
/// its deliveries are in each status.
struct NotificationStatusRecord: Sendable, Equatable, Codable {
    var id: Int64
    var ticketID: String
    /// The reply's title; `nil` when the relay does not have it (see ``text``).
    var title: String?
    /// The app's content mode when the webhook came (``PushSettings/Content``).
    var content: String = "full"
    /// `stored`; `not_stored` (a `generic` app's reply text is never stored); or `erased` (an
    /// `encrypted` app's, once every delivery ended).
    var text: String = "stored"
    var createdAt: Date
    /// Deliveries per status; every status is present.
    var counts: [String: Int]
    /// The deliveries, when one notification is asked for; absent from lists.
    var deliveries: [DeliveryStatusRecord]?

    enum CodingKeys: String, CodingKey {
        case id, title, content, text, counts, deliveries
        case ticketID = "ticket_id"
        case createdAt = "created_at"
    }

    /// Writes `title` as `null` when the text is not kept, so no reader takes a missing field
    /// for an empty reply.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(ticketID, forKey: .ticketID)
        try container.encode(title, forKey: .title)
        try container.encode(content, forKey: .content)
        try container.encode(text, forKey: .text)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(counts, forKey: .counts)
        try container.encodeIfPresent(deliveries, forKey: .deliveries)
    }

    /// The select list ``init(row:)`` reads, from `n` the notification and `c` the counts (``countsJoin``).
    static let columns =
        "n.id, n.ticket_id, n.title, n.received_at, n.content, "
        + DeliveryStatus.allCases.map { "c.\($0.rawValue)" }.joined(separator: ", ")

    /// One count per status of the deliveries `d`, each named after it; `over` makes them window
    /// aggregates (`OVER ()`: every row counted, before a `LIMIT`).
    static func counts(over: String = "") -> String {
        DeliveryStatus.allCases.map {
            "count(*) FILTER (WHERE d.status = '\($0.rawValue)')\(over)::int AS \($0.rawValue)"
        }
        .joined(separator: ", ")
    }

    static let countsJoin = """
        CROSS JOIN LATERAL (
            SELECT \(counts())
            FROM deliveries d WHERE \(DeliveryPartitions.ofNotification())
        ) c
        """

    /// Reads ``columns``.
    init(row: PostgresRow) throws {
        try self.init(row: row, counts: Self.counts(row, at: 5))
    }

    /// Reads `n.id, n.ticket_id, n.title, n.received_at, n.content`, with `counts`.
    init(row: PostgresRow, counts: [String: Int]) throws {
        let (id, ticket, title, created, content) = try row.decode((Int64, String, String?, Date, String).self)
        self.init(id: id, ticketID: ticket, title: title, createdAt: created, counts: counts, deliveries: nil)
        self.content = content
        if title == nil { text = content == "generic" ? "not_stored" : "erased" }
    }

    /// The counts of ``counts(over:)``, from column `first` on.
    static func counts(_ row: PostgresRow, at first: Int) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for (offset, status) in DeliveryStatus.allCases.enumerated() {
            counts[status.rawValue] = try row.decode(Int.self, at: first + offset)
        }
        return counts
    }

    init(
        id: Int64,
        ticketID: String,
        title: String?,
        createdAt: Date,
        counts: [String: Int],
        deliveries: [DeliveryStatusRecord]?
    ) {
        self.id = id
        self.ticketID = ticketID
        self.title = title
        self.createdAt = createdAt
        self.counts = counts
        self.deliveries = deliveries
    }
}

/// The status API's reads. Each is a bounded index scan whatever the tables' sizes: a notification
/// by its primary key and its deliveries by primary key in the partition of their id range
/// (migration 0020); a ticket's notifications backwards through
/// `notifications_by_ticket_id`; a device's deliveries backwards through `deliveries_by_device_hash`
/// (keyed by a hash of the token). The last two read each partition's index. Lists are
/// keyset-paginated on the id: a page asks for one row more than it shows, to know whether a next
/// page exists.
struct DeliveryStatusStore: Sendable {
    let client: PostgresClient

    /// The most deliveries one notification's answer lists (a webhook has at most a few hundred).
    static let maxDeliveriesShown = 1000

    /// A notification and the id range of its deliveries (migration 0020): parameters $1 its id,
    /// $2 its app.
    static let notificationStatement = """
        SELECT n.id, n.ticket_id, n.title, n.received_at, n.content, n.first_delivery_id, n.last_delivery_id
        FROM notifications n WHERE n.id = $1 AND n.app_id = $2
        """

    /// A notification's deliveries, oldest first, each with the counts by status of all of them:
    /// parameters $1 its id, $2 and $3 its deliveries' id range (null: not known, read within
    /// ``DeliveryPartitions/unrangedDays`` of its id's day), $4 how many at most, $5 its ticket.
    /// The range is a parameter, not read from the notification's row in the statement, so that
    /// the plan keeps only the partitions it covers: reading it from the row, the plan would be
    /// made and started for every partition at each call.
    static let deliveriesStatement = """
        SELECT \(DeliveryStatusRecord.columns), \(NotificationStatusRecord.counts(over: " OVER ()"))
        FROM deliveries d CROSS JOIN (SELECT $5::text AS ticket_id) n
        WHERE d.notification_id = $1 AND \(DeliveryPartitions.inRange(id: "$1::bigint", first: "$2::bigint", last: "$3::bigint"))
        ORDER BY d.id LIMIT $4
        """

    func notification(app: String, id: Int64, fullTokens: Bool) async throws -> NotificationStatusRecord? {
        guard let row = try await client.query(Self.notificationStatement, [id, app], prepare: true).first else {
            return nil
        }
        let (ticket, first, last) = try (
            row.decode(String.self, at: 1), row.decode(Int64?.self, at: 5), row.decode(Int64?.self, at: 6)
        )
        let deliveries = try await client.query(
            Self.deliveriesStatement,
            [id, first, last, Self.maxDeliveriesShown, ticket],
            prepare: true
        ).rows
        let counts = try deliveries.first.map {
            try NotificationStatusRecord.counts($0, at: DeliveryStatusRecord.columnCount)
        }
        var notification = try NotificationStatusRecord(
            row: row,
            counts: counts ?? Dictionary(uniqueKeysWithValues: DeliveryStatus.allCases.map { ($0.rawValue, 0) })
        )
        notification.deliveries = try deliveries.map { try DeliveryStatusRecord(row: $0, fullTokens: fullTokens) }
        return notification
    }

    /// A ticket's notifications with their counts, newest first: parameters $1 the app, $2 the
    /// ticket, $3 an id they are older than (null: none), $4 how many at most.
    static let ticketStatement = """
        SELECT \(NotificationStatusRecord.columns) FROM (
            SELECT * FROM notifications WHERE app_id = $1 AND ticket_id = $2 AND id < coalesce($3::bigint, 9223372036854775807)
            ORDER BY id DESC LIMIT $4
        ) n
        \(NotificationStatusRecord.countsJoin)
        ORDER BY n.id DESC
        """

    /// A ticket's notifications, newest first, older than `before` when given.
    func notifications(
        app: String,
        ticket: String,
        before: Int64?,
        limit: Int
    ) async throws -> (page: [NotificationStatusRecord], more: Bool) {
        let rows = try await client.query(Self.ticketStatement, [app, ticket, before, limit + 1], prepare: true)
            .rows.map(NotificationStatusRecord.init(row:))
        return (Array(rows.prefix(limit)), rows.count > limit)
    }

    /// A device's deliveries, newest first, older than `before` when given.
    func deliveries(
        app: String,
        token: String,
        before: Int64?,
        limit: Int,
        fullTokens: Bool
    ) async throws -> (page: [DeliveryStatusRecord], more: Bool) {
        let rows = try await client.query(
            """
            SELECT \(DeliveryStatusRecord.columns) FROM (
                SELECT * FROM deliveries
                WHERE app_id = $1 AND hashtextextended(device_token, 0) = hashtextextended($2, 0) AND device_token = $2
                  AND id < coalesce($3::bigint, 9223372036854775807)
                ORDER BY id DESC LIMIT $4
            ) d
            LEFT JOIN notifications n ON n.id = d.notification_id
            ORDER BY d.id DESC
            """,
            [app, token, before, limit + 1],
            prepare: true
        ).rows.map { try DeliveryStatusRecord(row: $0, fullTokens: fullTokens) }
        return (Array(rows.prefix(limit)), rows.count > limit)
    }
}
