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
    /// `n`'s deliveries that intake stores (migration 0020, ``inRange(_:first:last:)``), so that a
    /// lookup reads the partitions of that range only, not every partition's
    /// `deliveries_by_notification` index.
    static func ofNotification(_ d: String = "d", _ n: String = "n") -> String {
        "\(d).notification_id = \(n).id AND "
            + inRange(d, first: "\(n).first_delivery_id", last: "\(n).last_delivery_id")
    }

    /// The condition that delivery `d`'s id is in a notification's delivery id range, `first` and
    /// `last` the SQL of its bounds (migration 0020). Both are NULL for a notification stored before
    /// 0020, whose range is not known: then any id is, and every partition is read.
    static func inRange(_ d: String = "d", first: String, last: String) -> String {
        "\(d).id BETWEEN coalesce(\(first), 0) AND coalesce(\(last), \(Int64.max))"
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
