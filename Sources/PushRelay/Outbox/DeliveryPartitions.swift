import Postgres
import Synchronization

/// Which partition of `deliveries` holds a delivery id (migration 0019), so the outcome statement
/// names its partition rather than the partitioned table: a generic plan over the partitioned
/// table opens and locks every partition at each execution, a cost that grew with their number
/// (0.28 ms for a batch of 8 on an unpartitioned table, 0.49 ms with 16 partitions). Partitions
/// never change their range, they are only made and dropped, so the ranges read once stay right;
/// an id in none of them (a partition made since) reads them again.
final class DeliveryPartitions: Sendable {
    struct Range: Sendable, Equatable {
        /// `nil`: no lower bound (the table 0019 found unpartitioned).
        var lower: Int64?
        var upper: Int64
        var name: String

        func contains(_ id: Int64) -> Bool { id < upper && lower.map { id >= $0 } ?? true }
    }

    private let ranges = Mutex<[Range]>([])

    /// The condition that delivery `d` is one of notification `n`'s, bounded by the id range of
    /// `n`'s deliveries that intake stores (migration 0020, ``inRange(_:id:first:last:)``), so that a
    /// lookup reads the partitions of that range only, by primary key (`deliveries` has no index on
    /// `notification_id` since 0021).
    static func ofNotification(_ d: String = "d", _ n: String = "n") -> String {
        "\(d).notification_id = \(n).id AND "
            + inRange(d, id: "\(n).id", first: "\(n).first_delivery_id", last: "\(n).last_delivery_id")
    }

    /// How many days from a notification's id (ids carry their day, migration 0019) its deliveries'
    /// ids are looked for when it has no range: they were stored in its statement, so their ids were
    /// allocated in the same partition period or the next. A notification stored before 0019 has an
    /// id below any partition's, and so do its deliveries: this reaches only the table 0019 found
    /// unpartitioned, which keeps its index on `notification_id` (migration 0021).
    static let unrangedDays = 100

    /// The SQL of the smallest and the largest id notification `id`'s deliveries can have, `first`
    /// and `last` the SQL of its stored bounds (migration 0020). Both are NULL for a notification
    /// stored before 0020, whose range is not known: then those within ``unrangedDays`` of the
    /// notification's own id's day.
    static func deliveryIDs(id: String, first: String, last: String) -> (first: String, last: String) {
        (
            "coalesce(\(first), ((\(id) >> 32) - \(unrangedDays)) << 32)",
            "coalesce(\(last), ((\(id) >> 32) + \(unrangedDays + 1)) << 32)"
        )
    }

    /// The condition that delivery `d`'s id is in the delivery id range of notification `id`
    /// (``deliveryIDs(id:first:last:)``).
    static func inRange(_ d: String = "d", id: String, first: String, last: String) -> String {
        let ids = deliveryIDs(id: id, first: first, last: last)
        return "\(d).id BETWEEN \(ids.first) AND \(ids.last)"
    }

    /// The partition of each of `ids` among those known, `nil` for an id in none.
    private func known(_ ids: [Int64]) -> [String?] {
        ranges.withLock { ranges in ids.map { id in ranges.first { $0.contains(id) }?.name } }
    }

    /// The partition of each of `ids`, reading the partitions again when one is in none known;
    /// `deliveries` (the partitioned table) for an id that is in none even then.
    func tables(for ids: [Int64], client: PostgresClient) async throws -> [String] {
        let found = known(ids)
        if !found.contains(nil) { return found.map { $0! } }
        try await refresh(client: client)
        return known(ids).map { $0 ?? "deliveries" }
    }

    /// Forgets the ranges (a statement found a partition gone).
    func forget() { ranges.withLock { $0 = [] } }

    private func refresh(client: PostgresClient) async throws {
        let read = try await client.query(
            "SELECT lower, upper, partition FROM history_partitions WHERE parent = 'deliveries'"
        ).rows.map {
            let (lower, upper, name) = try $0.decode((Int64?, Int64, String).self)
            return Range(lower: lower, upper: upper, name: name)
        }
        ranges.withLock { $0 = read }
    }
}
