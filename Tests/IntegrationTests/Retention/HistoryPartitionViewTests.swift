import Foundation
import Postgres
import TestSupport
import Testing

@testable import PushRelay

/// The `history_partitions` view, which every reader of the partitions' ranges goes through
/// (``DeliveryPartitions``, ``HistoryPartitions``).
@Suite("History partitions: the view of their ranges")
struct HistoryPartitionViewTests {
    @Test(
        "a partition dropped after a statement's snapshot keeps its bounds in that statement's view: none reads as NULL, which is no lower bound and no row to decode"
    )
    func droppedPartitionKeepsItsBounds() async throws {
        let test = try await TestApp.make()
        _ = try await test.application(extra: ["retention.enabled": .init(.bool(false), isSecret: false)])
        let lower = try await HistoryPartitionTests.bound(test, days: 400)
        let upper = try await HistoryPartitionTests.bound(test, days: 407)
        _ = try await test.client.query("CREATE TABLE deliveries_gone PARTITION OF deliveries FOR VALUES FROM (\(lower)) TO (\(upper))")
        try await test.client.withConnection { reader in
            // The reader's snapshot still has the partition; the drop commits after it, as
            // retention's can while another instance reads the ranges.
            _ = try await reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            _ = try await reader.execute("SELECT count(*) FROM history_partitions")
            _ = try await test.client.query("ALTER TABLE deliveries DETACH PARTITION deliveries_gone")
            _ = try await test.client.query("DROP TABLE deliveries_gone")
            let rows = try await reader.query("SELECT lower, upper FROM history_partitions WHERE partition = 'deliveries_gone'")
                .rows.map { try $0.decode((Int64?, Int64?).self) }
            _ = try await reader.execute("COMMIT")
            #expect(rows.count == 1)
            #expect(rows.first?.0 == lower && rows.first?.1 == upper, "\(rows)")
        }
    }
}
