import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Postgres
import PushSandbox
import TestSupport
import Testing

@testable import PushRelay

extension DeliveryVisibilityTests {
    @Test(
        "retention deletes old finished deliveries and their notifications row by row in the unpartitioned table, keeps recent and unfinished rows and unread counts"
    )
    func retentionPrunes() async throws {
        try await DeliveryHarness.with { harness in
            let token = apnsToken()
            let sql = harness.test.client
            // The relay's own retention service stays off: this test runs it by hand.
            try await harness.application(extra: ["retention.enabled": .init(.bool(false), isSecret: false)]).test(.router) { client in
                // Rows go to the table 0019 found unpartitioned, which retention prunes row by row
                // (partitions are dropped whole: HistoryPartitionTests), as in a database upgraded
                // with a history.
                _ = try await sql.query("SELECT setval('notifications_id_seq', 1, false), setval('deliveries_id_seq', 1, false)")
                // Ids grow with time, which the pruning walk relies on: the old rows come first.
                _ = try await Self.accept(client, webhook(devices: [(token, "ios")], ticket: "old"))
                #expect(try await eventually { try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 1 })
                _ = try await sql.query(
                    """
                    UPDATE deliveries SET created_at = now() - interval '40 days', updated_at = now() - interval '40 days';
                    """
                )
                _ = try await sql.query("UPDATE notifications SET received_at = now() - interval '40 days'")
                // Badge syncs (no notification) finished or waiting long ago.
                _ = try await sql.query(
                    """
                    INSERT INTO deliveries (app_id, device_token, platform, kind, status, created_at, updated_at, next_attempt_at)
                    SELECT 'support', $1, 'ios', 'badge_sync', s.status, now() - s.age, now() - s.age, now() + interval '1 day'
                    FROM (VALUES (1, 'failed', interval '40 days'), (2, 'dead_token', interval '100 days'), (3, 'pending', interval '40 days'))
                        AS s(ord, status, age)
                    ORDER BY s.ord
                    """,
                    [token]
                )
                _ = try await Self.accept(client, webhook(devices: [(token, "ios")], ticket: "new"))
                #expect(try await eventually { try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 2 })
            }
            let unreadBefore = try await harness.test.count("SELECT coalesce(sum(unread), 0)::int FROM unread_counters")
            #expect(unreadBefore == 2)

            var settings = RetentionSettings()
            settings.batchSize = 1
            let service = RetentionService(client: sql, settings: settings, metrics: RelayMetrics(), logger: DeliveryHarness.logger)
            let report = try #require(try await service.runOnce())
            // Gone: the old delivered row and the 100-day dead_token row, and the old notification
            // (it has no delivery left). Kept: the new delivered row, the 40-day failed row (90 days
            // for failures), the pending row, the new notification.
            #expect(report.deliveries == 2)
            #expect(report.notifications == 1)
            let left = try await sql.query("SELECT status FROM deliveries ORDER BY status").rows.map { try $0.decode(String.self) }
            #expect(left == ["delivered", "failed", "pending"])
            #expect(try await harness.test.count("SELECT count(*) FROM notifications") == 1)
            #expect(try await harness.test.count("SELECT coalesce(sum(unread), 0)::int FROM unread_counters") == unreadBefore)
            // A second run finds nothing more; a run while another instance holds the lease does nothing.
            #expect(report.complete)
            let again = try #require(try await service.runOnce())
            #expect(again.deliveries == 0 && again.notifications == 0 && again.events == 0 && again.complete)
            // The complete run keeps the lease for the interval: another instance does not run before then.
            let neighbour = RetentionService(client: sql, settings: settings, metrics: RelayMetrics(), logger: DeliveryHarness.logger)
            #expect(try await neighbour.runOnce() == nil)
            #expect(
                try await harness.test.count("SELECT count(*) FROM leases WHERE name = 'retention' AND expires_at > now() + interval '50 minutes'")
                    == 1
            )
        }
    }
}
