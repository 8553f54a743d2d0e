import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Postgres
import TestSupport
import Testing

@testable import PushRelay

/// Nothing a removed app leaves behind waits for ever: its queued deliveries end when it is
/// removed, and retention ends those of apps no instance serves any more.
@Suite("A removed app's queued deliveries")
struct RemovedAppTests {
    @Test("deleting an app ends its queued deliveries at once: failed, saying why, its encrypted text erased; other apps' untouched")
    func deletedManagedApp() async throws {
        let test = try await TestApp.make()
        let (path, _) = try ManagedAppTests.keyFile()
        var extra = ManagedAppTests.keyConfig(path)
        // Nothing is sent: every delivery stays queued until something ends it.
        extra["delivery.enabled"] = .init(.bool(false), isSecret: false)
        try await test.application(extra: extra).test(.router) { client in
            let admin = try await test.key(app: nil)
            var body = ManagedAppTests.configuration("acme")
            body["id"] = nil
            body["push"] = ["content": "encrypted"]
            let created = try await client.execute(
                uri: "/v1/admin/apps/acme",
                method: .put,
                headers: bearer(admin),
                body: ByteBuffer(data: try ManagedAppTests.body(body))
            )
            #expect(created.status == .created, "\(String(buffer: created.body))")
            #expect(try await eventually { try await ManagedAppPickupTests.hook(client, app: "acme") == .accepted })
            #expect(try await ManagedAppPickupTests.hook(client, app: "acme") == .accepted)
            #expect(try await ManagedAppPickupTests.hook(client, app: "support", secret: TestApp.webhookSecret) == .accepted)
            #expect(try await test.count("SELECT count(*) FROM deliveries WHERE app_id = 'acme' AND status = 'pending'") == 2)
            #expect(try await test.count("SELECT count(*) FROM notifications WHERE app_id = 'acme' AND title IS NOT NULL") == 2)

            let deleted = try await client.execute(uri: "/v1/admin/apps/acme", method: .delete, headers: bearer(admin))
            #expect(deleted.status == .noContent)
            let ended = "SELECT count(*) FROM deliveries WHERE app_id = 'acme' AND status = 'failed' AND last_error = $1"
            #expect(try await eventually { try await test.count(ended, [DeliveryQueue.appRemovedReason]) == 2 })
            #expect(try await test.count("SELECT count(*) FROM deliveries WHERE app_id = 'acme' AND (due OR lease_owner IS NOT NULL)") == 0)
            #expect(try await test.count("SELECT count(*) FROM notifications WHERE app_id = 'acme' AND title IS NOT NULL") == 0)
            #expect(try await test.count("SELECT count(*) FROM deliveries WHERE app_id = 'support' AND status = 'pending'") == 1)
        }
    }

    @Test("retention ends the queued deliveries of apps this instance does not serve once older than delivery.max_age_seconds")
    func unservedApps() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // migrates
        let sql = test.client
        // Badge syncs (no notification) queued for a served app and for one removed while no
        // instance ran, long ago and just now.
        _ = try await sql.query(
            """
            INSERT INTO deliveries (app_id, device_token, platform, kind, status, due, created_at, next_attempt_at)
            SELECT s.app, 'token-' || s.ord, 'ios', 'badge_sync', 'pending', true, now() - s.age, now() - s.age
            FROM (VALUES (1, 'support', interval '2 days'), (2, 'gone', interval '2 days'), (3, 'gone', interval '1 minute'))
                AS s(ord, app, age)
            """
        )
        let settings = RetentionSettings()
        let service = RetentionService(
            client: sql,
            settings: settings,
            metrics: RelayMetrics(),
            logger: TestDatabase.logger,
            served: { ["support"] },
            maxAge: .seconds(86400)
        )
        let report = try #require(try await service.runOnce())
        #expect(report.unservedEnded == 1)
        let rows = try await sql.query("SELECT device_token, status, coalesce(last_error, '') FROM deliveries ORDER BY device_token").rows
            .map { try $0.decode((String, String, String).self) }
        #expect(rows.map(\.0) == ["token-1", "token-2", "token-3"])
        #expect(rows.map(\.1) == ["pending", "failed", "pending"], "only the old one of the app no longer served")
        #expect(rows[1].2 == DeliveryQueue.appRemovedReason)
    }
}
