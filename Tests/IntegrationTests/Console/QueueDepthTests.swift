import Foundation
import Postgres
import Synchronization
import TestSupport
import Testing

@testable import PushRelay

/// The Overview's queue depth reads the live queue only: waiting and retrying deliveries through
/// the due index, and what is being sent from the instances' own reports, so no delivered row is
/// read however many there are (scripts/bench/history.sh measures it against a large history).
@Suite("Overview: queue depths")
struct QueueDepthTests {
    static func writer(_ client: PostgresClient, _ instance: String) -> ActivityWriter {
        ActivityWriter(client: client, tally: ActivityTally(), instance: instance, logger: TestDatabase.logger)
    }

    @Test("waiting and retrying are the due pending rows; being sent is the instances' recent reports and the claims whose lease ended")
    func depths() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // migrates
        let sql = test.client
        // Badge syncs of `support`: 2 waiting, 1 retrying, 1 claimed from the due index under a
        // running lease and 1 whose claim's lease ended (its instance stopped), and the not-due rows
        // intake stores claimed: 2 still being sent, 3 delivered.
        _ = try await sql.query(
            """
            INSERT INTO deliveries (app_id, device_token, platform, kind, status, due, attempts, next_attempt_at, lease_expires_at)
            SELECT 'support', 'token-' || s.ord, 'ios', 'badge_sync', s.status, s.due, s.attempts, now(), now() + s.lease
            FROM (VALUES (1, 'pending', true, 0, NULL), (2, 'pending', true, 0, NULL), (3, 'pending', true, 2, NULL),
                         (4, 'sending', true, 1, interval '1 minute'), (5, 'sending', true, 1, interval '-1 minute'),
                         (6, 'sending', false, 1, interval '1 minute'), (7, 'sending', false, 1, interval '1 minute'),
                         (8, 'delivered', false, 1, NULL), (9, 'delivered', false, 1, NULL), (10, 'delivered', false, 1, NULL))
                AS s(ord, status, due, attempts, lease)
            """
        )
        let store = OperatorStore(client: sql)
        #expect(
            try await store.depths(apps: ["support"], cap: 100)["support"] == .init(pending: 2, sending: 1, retrying: 1),
            "no instance reported: only the claim whose lease ended counts as being sent"
        )

        let one = Self.writer(sql, "one")
        let two = Self.writer(sql, "two")
        try await one.report(["support": 3, "other": 1])
        try await two.report(["support": 2, "idle": 0])
        var depths = try await store.depths(apps: ["support", "other", "idle"], cap: 100)
        #expect(depths["support"] == .init(pending: 2, sending: 6, retrying: 1))
        #expect(depths["other"] == .init(pending: 0, sending: 1, retrying: 0))
        #expect(depths["idle"] == .init())
        #expect(try await test.count("SELECT count(*) FROM instance_queue") == 3, "an app with nothing in flight has no row")

        // An instance that stopped reporting (three reports missed) is not counted.
        let lapse = Int(ActivityWriter.reportsLapseAfter.components.seconds)
        _ = try await sql.query(
            "UPDATE instance_queue SET reported_at = now() - make_interval(secs => $1) WHERE instance = 'two'",
            [lapse + 1]
        )
        #expect(try await store.depths(apps: ["support"], cap: 100)["support"]?.sending == 4)

        // A report replaces the instance's rows: an app no longer in it loses its row.
        try await one.report(["support": 1])
        depths = try await store.depths(apps: ["support", "other"], cap: 100)
        #expect(depths["support"]?.sending == 2)
        #expect(depths["other"]?.sending == 0)
        #expect(try await test.count("SELECT count(*) FROM instance_queue WHERE instance = 'one'") == 1)

        // Counted up to the cap, as the other depths are.
        try await one.report(["support": 500])
        #expect(try await store.depths(apps: ["support"], cap: 100)["support"]?.sending == 100)
    }

    @Test("counts already stored are not stored again when the in-flight report after them fails")
    func failedReportKeepsCountsOnce() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // migrates
        let tally = ActivityTally()
        let writer = ActivityWriter(
            client: test.client,
            tally: tally,
            instance: "writer",
            inFlight: { ["support": 1] },
            logger: TestDatabase.logger
        )
        tally.webhook(app: "support")
        _ = try await test.client.query("ALTER TABLE instance_queue RENAME TO instance_queue_elsewhere")
        await writer.writeOnce(prune: false)  // the counts are stored, the report fails
        _ = try await test.client.query("ALTER TABLE instance_queue_elsewhere RENAME TO instance_queue")
        await writer.writeOnce(prune: false)
        #expect(try await test.count("SELECT coalesce(sum(webhooks), 0)::int FROM activity_minutes WHERE app_id = 'support'") == 1)
        #expect(try await test.count("SELECT count(*) FROM instance_queue WHERE instance = 'writer'") == 1)
    }

    @Test("each write reports what the instance has in flight; a report an hour old is deleted")
    func writes() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // migrates
        final class InFlight: Sendable { let apps = Mutex(["support": 4]) }
        let inFlight = InFlight()
        let writer = ActivityWriter(
            client: test.client,
            tally: ActivityTally(),
            instance: "writer",
            inFlight: { inFlight.apps.withLock { $0 } },
            logger: TestDatabase.logger
        )
        _ = try await test.client.query(
            "INSERT INTO instance_queue (instance, app_id, in_flight, reported_at) VALUES ('gone', 'support', 7, now() - interval '61 minutes')"
        )
        await writer.writeOnce(prune: false)
        #expect(try await test.count("SELECT in_flight FROM instance_queue WHERE instance = 'writer' AND app_id = 'support'") == 4)
        #expect(try await test.count("SELECT count(*) FROM instance_queue WHERE instance = 'gone'") == 1)
        inFlight.apps.withLock { $0 = [:] }
        await writer.writeOnce(prune: true)
        #expect(try await test.count("SELECT count(*) FROM instance_queue") == 0, "nothing in flight, and the old report pruned")
        // Idle, with no row left by its last report: the next write sends no statement (a row
        // put there behind its back stays).
        _ = try await test.client.query("INSERT INTO instance_queue (instance, app_id, in_flight) VALUES ('writer', 'other', 1)")
        await writer.writeOnce(prune: false)
        #expect(try await test.count("SELECT count(*) FROM instance_queue WHERE instance = 'writer'") == 1)
        inFlight.apps.withLock { $0 = ["support": 2] }
        await writer.writeOnce(prune: false)
        #expect(try await test.count("SELECT coalesce(sum(in_flight), 0)::int FROM instance_queue WHERE instance = 'writer'") == 2)
    }
}
