import Postgres

/// The partitions of the history tables, `notifications` and `deliveries` (migration 0019): id
/// ranges of `retention.partition_days` days each, the range of day D starting at id D << 32.
/// The retention lease holder creates them ahead and sets the id sequences to the partition that
/// covers today; a partition whose rows are all past retention is dropped whole, which writes no
/// row to the WAL. The tables as they were before 0019 are one partition each
/// (`*_unpartitioned`, no lower bound), pruned row by row until empty.
struct HistoryPartitions: Sendable {
    let client: PostgresClient

    /// One partition: its table, name and id range (`lower` is `nil` for the unpartitioned one).
    struct Partition: Sendable, Equatable {
        var parent: String
        var name: String
        var lower: Int64?
        var upper: Int64
        /// Its detach began and was interrupted (a statement timeout, a relay stopped midway):
        /// queries no longer see it, and the next ``drop(_:)`` finishes the detach.
        var detaching = false
    }

    /// Every partition of both tables, by table and id range.
    func list() async throws -> [Partition] {
        try await client.query(
            "SELECT parent, partition, lower, upper, detaching FROM history_partitions ORDER BY parent, lower NULLS FIRST"
        ).rows.map {
            let (parent, name, lower, upper, detaching) = try $0.decode((String, String, Int64?, Int64, Bool).self)
            return Partition(parent: parent, name: name, lower: lower, upper: upper, detaching: detaching)
        }
    }

    /// Creates the partitions of both tables, `periodDays` days each, until one covers the day
    /// `aheadDays` from today, and sets each id sequence to the partition covering today when it is
    /// behind (`push_relay_extend_history`, migration 0019). Returns how many it created.
    ///
    /// One statement, outside any transaction of the relay's: the function attaches each new
    /// partition (no insert, update or read waits for that lock) and serialises its callers with an
    /// advisory lock, so it holds nothing intake needs across a round trip.
    func extend(periodDays: Int, aheadDays: Int) async throws -> Int {
        try await client.query(
            "SELECT push_relay_extend_history($1, (now() AT TIME ZONE 'UTC')::date + $2::int)",
            [periodDays, aheadDays]
        ).first?.decode(Int.self) ?? 0
    }

    /// Days from today (UTC) to the end of the newest partition of either table: 0 or less when
    /// none covers today (new rows then go to the newest partition).
    func daysAhead() async throws -> Int {
        try await client.query(
            """
            SELECT coalesce(min(newest), 0)::int FROM (
                SELECT (max(upper) >> 32) - ((now() AT TIME ZONE 'UTC')::date - date '1970-01-01') AS newest
                FROM history_partitions WHERE lower IS NOT NULL GROUP BY parent
            ) t
            """
        ).first?.decode(Int.self) ?? 0
    }

    /// Whether `partition` of `deliveries` may be dropped: no id will be allocated in it any more,
    /// its newest row was stored more than `deliveredDays` days and `margin` ago (or it is empty),
    /// no row in it is due (the due index answers; a row claimed at intake is made due by the sweep
    /// a lease after its claim, long before), and, unless its newest row is older than
    /// `failedDays` too, none is `failed`, `expired` or `dead_token` (those are kept `failed_days`).
    /// That last check reads the partition until it finds one, so only a partition without any is
    /// read whole, once, before it is dropped. `margin` covers a delivery's last change coming
    /// after its storing (its retries, at most `delivery.max_age_seconds`).
    func deliveriesExpired(
        _ partition: Partition,
        deliveredDays: Int,
        failedDays: Int,
        margin: Duration
    ) async throws -> Bool {
        let table = DeliveryQueue.quoted(partition.name)
        let row = try await client.query(
            """
            SELECT (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM deliveries_id_seq) >= $1,
                   newest IS NULL OR newest < now() - make_interval(days => $2, secs => $4),
                   newest IS NULL OR newest < now() - make_interval(days => $3, secs => $4),
                   EXISTS (SELECT 1 FROM \(table) WHERE due)
            FROM (SELECT (SELECT created_at FROM \(table) ORDER BY id DESC LIMIT 1) AS newest) t
            """,
            [partition.upper, deliveredDays, failedDays, Double(margin.components.seconds)]
        ).first
        guard let row else { return false }
        let (closed, deliveredExpired, failedExpired, due) = try row.decode((Bool?, Bool, Bool, Bool).self)
        guard partition.lower == nil || closed == true, !due, deliveredExpired else { return false }
        if failedExpired { return true }
        return try await client.query(
            "SELECT NOT EXISTS (SELECT 1 FROM \(table) WHERE status IN ('failed', 'expired', 'dead_token'))"
        ).first?.decode(Bool.self) ?? false
    }

    /// Whether `partition` of `notifications` may be dropped: no id will be allocated in it any
    /// more, its newest row was received more than `days` days ago (or it is empty), and no
    /// delivery refers to a notification in its range. That last check, made only when the others
    /// pass, looks for deliveries by primary key between the smallest and the largest of its
    /// notifications' delivery ids (``DeliveryPartitions/deliveryIDs(id:first:last:)``, which bound
    /// a notification without a range): it reads the partition once, and the ids of its period's
    /// deliveries until one refers to it (`deliveries` has no index on `notification_id` since 0021).
    func notificationsExpired(_ partition: Partition, days: Int) async throws -> Bool {
        let table = DeliveryQueue.quoted(partition.name)
        let row = try await client.query(
            """
            SELECT (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM notifications_id_seq) >= $1,
                   coalesce((SELECT received_at FROM \(table) ORDER BY id DESC LIMIT 1) < now() - make_interval(days => $2), true)
            """,
            [partition.upper, days]
        ).first
        guard let row else { return false }
        let (closed, expired) = try row.decode((Bool?, Bool).self)
        guard (partition.lower == nil || closed == true) && expired else { return false }
        let ids = DeliveryPartitions.deliveryIDs(id: "id", first: "first_delivery_id", last: "last_delivery_id")
        let referenced = try await client.query(
            """
            WITH ids AS MATERIALIZED (
                SELECT min(\(ids.first)) AS first, max(\(ids.last)) AS last
                FROM \(table) WHERE last_delivery_id IS DISTINCT FROM 0
            )
            SELECT EXISTS (
                SELECT 1 FROM ids CROSS JOIN LATERAL (
                    SELECT 1 FROM deliveries d WHERE d.id BETWEEN ids.first AND ids.last
                    AND d.notification_id >= coalesce($2, -9223372036854775808) AND d.notification_id < $1 LIMIT 1
                ) found
            )
            """,
            [partition.upper, partition.lower]
        ).first?.decode(Bool.self)
        return referenced == false
    }

    /// Drops `partition` without making any other statement wait: it is detached concurrently
    /// (SHARE UPDATE EXCLUSIVE on the parent, which no insert, update or read conflicts with; the
    /// detach itself waits for the transactions already using the table), then dropped as a table
    /// of its own, its files removed while nothing else needs a lock it holds. A detach left
    /// unfinished is finished instead. Both may take longer than the pool's statement timeout (a
    /// long transaction elsewhere, gigabytes of files): they have `waitLimit`, and a detach cut
    /// short by it is left for the next run (false).
    func drop(_ partition: Partition, waitLimit: Duration = .seconds(600)) async throws -> Bool {
        let table = DeliveryQueue.quoted(partition.name)
        let detach =
            "ALTER TABLE \(DeliveryQueue.quoted(partition.parent)) DETACH PARTITION \(table) "
            + (partition.detaching ? "FINALIZE" : "CONCURRENTLY")
        do {
            try await client.withConnection { session in
                try await session.withStatementTimeout(waitLimit) {
                    _ = try await session.query(detach)
                    // A large table's files take seconds to remove.
                    _ = try await session.query("DROP TABLE IF EXISTS \(table)")
                }
            }
            return true
        } catch let error as PostgresError where error.sqlState == "57014" {
            return false
        }
    }

    /// Drops the history tables detached but not dropped (a relay stopped between the two steps of
    /// ``drop(_:)``); returns their names. Only a detach makes such a table: 0019 attaches the
    /// tables it renames in the transaction that renames them, and
    /// `push_relay_extend_history` attaches each table in the statement that creates it.
    func dropDetached() async throws -> [String] {
        let names = try await client.query(
            """
            SELECT relname::text FROM pg_class
            WHERE relnamespace = 'public'::regnamespace AND relkind = 'r' AND NOT relispartition
              AND relname ~ '^(notifications|deliveries)_([0-9]{8}|unpartitioned)$'
            ORDER BY relname
            """
        ).rows.map { try $0.decode(String.self) }
        for name in names { try await client.query("DROP TABLE IF EXISTS \(DeliveryQueue.quoted(name))") }
        return names
    }
}
