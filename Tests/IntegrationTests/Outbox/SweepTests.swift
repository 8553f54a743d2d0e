import Foundation
import Postgres
import TestSupport
import Testing

@testable import PushRelay

@Suite("Outbox statements: deliveries stored claimed at intake, and the sweep")
struct SweepTests {
    /// Three deliveries stored claimed for "me" under a 60 s lease.
    static func claimedAtIntake(_ queue: DeliveryQueue) async throws -> [ClaimedDelivery] {
        let webhook = PushNotification(
            title: "t",
            body: "b",
            ticketID: "sweep-1",
            devices: (0..<3).map { _ in .init(token: apnsToken(), platform: .ios) }
        )
        let reservation = DeliveryReservation(owner: "me", lease: .seconds(60), granted: ["support": 3])
        let (_, claimed) = try await queue.enqueue([IntakeItem(appID: "support", notification: webhook, requestID: nil)], reservation: reservation)
        try #require(claimed.count == 3)
        return claimed
    }

    @Test("a delivery claimed at intake is not due; once its lease ended unsent, the sweep makes it due, once, and a claim takes it")
    func sweepBringsBackEndedLeases() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()
        let queue = DeliveryQueue(client: test.client)
        let claimed = try await Self.claimedAtIntake(queue)
        let ids = claimed.map(\.id)
        func states() async throws -> [String] {
            try await test.client.query("SELECT status || ' ' || due FROM deliveries WHERE id = ANY($1) ORDER BY id", [ids]).rows.map {
                try $0.decode(String.self, at: 0)
            }
        }
        #expect(try await states() == ["sending false", "sending false", "sending false"])
        // The console counts them in flight, out of the due index as they are: from the report
        // the instance "me" writes while it runs.
        let console = OperatorStore(client: test.client)
        let me = ActivityWriter(client: test.client, tally: ActivityTally(), instance: "me", logger: TestDatabase.logger)
        try await me.report(["support": 3])
        #expect(try await console.depths(apps: ["support"], cap: 100)["support"]?.sending == 3)

        // The first is delivered; its outcome leaves it out of the due index.
        try await queue.store([DeliveryResult(delivery: claimed[0], status: .delivered, outcome: .delivered, providerID: "p")], owner: "me")
        #expect(try await states() == ["delivered false", "sending false", "sending false"])
        try await me.report(["support": 2])
        #expect(try await console.depths(apps: ["support"], cap: 100)["support"]?.sending == 2)

        // Leases running: the sweep visits nothing, and nothing can be claimed.
        #expect(try await queue.sweep(upTo: try await queue.sweepCutoff()) == (0, 0))
        #expect(try await queue.claim(apps: ["support"], limits: [10], owner: "other", lease: .seconds(60)).isEmpty)

        // The leases end (the instance died, its report with it): the sweep visits all three and
        // makes the two unsent due.
        _ = try await test.client.query("DELETE FROM instance_queue WHERE instance = 'me'")
        _ = try await test.client.query(
            "UPDATE deliveries SET next_attempt_at = now() - interval '1 second', lease_expires_at = now() - interval '1 second' WHERE id = ANY($1)",
            [ids]
        )
        #expect(try await queue.claim(apps: ["support"], limits: [10], owner: "other", lease: .seconds(60)).isEmpty)
        #expect(try await queue.sweep(upTo: try await queue.sweepCutoff()) == (3, 2))
        #expect(try await states() == ["delivered false", "sending true", "sending true"])
        #expect(try await console.depths(apps: ["support"], cap: 100)["support"]?.sending == 2)
        // The watermark moved past them: a second sweep visits nothing.
        #expect(try await queue.sweep(upTo: try await queue.sweepCutoff()) == (0, 0))

        let again = try await queue.claim(apps: ["support"], limits: [10], owner: "other", lease: .seconds(60))
        #expect(Set(again.map(\.id)) == Set(ids[1...]))
        #expect(again.allSatisfy { $0.attempts == 2 })
    }

    @Test("a push stored claimed at intake by an instance that died before sending it is sent by a running instance once the lease ended")
    func deadInstancesClaimIsSent() async throws {
        try await DeliveryHarness.with { harness in
            let app = try await harness.application()  // applies the migrations
            let token = apnsToken()
            let webhook = PushNotification(title: "t", body: "b", ticketID: "7", devices: [.init(token: token, platform: .ios)])
            let dead = DeliveryReservation(owner: "dead-instance", lease: .seconds(60), granted: ["support": 1])
            let queue = DeliveryQueue(client: harness.test.client)
            let (_, claimed) = try await queue.enqueue([IntakeItem(appID: "support", notification: webhook, requestID: nil)], reservation: dead)
            try #require(claimed.count == 1)
            // Its lease ended unsent.
            _ = try await harness.test.client.query(
                "UPDATE deliveries SET next_attempt_at = now() - interval '1 second', lease_expires_at = now() - interval '1 second' WHERE id = $1",
                [claimed[0].id]
            )
            try await app.test(.router) { _ in
                let delivered = try await eventually { try await harness.deliveries(token: token).first?.status == "delivered" }
                #expect(delivered)
            }
            #expect(harness.requests(token: token).map(\.status) == [200])
            #expect(try await harness.deliveries(token: token).first?.attempts == 2)
        }
    }

    @Test("upgrading to 0015: deliveries waiting or in flight stay claimable, finished ones leave the due index, the sweep passes old rows once")
    func upgradeKeepsTheQueue() async throws {
        let client = PostgresClient(
            configuration: .test(conninfo: try await TestDatabase.makeDatabase(), maxConnections: 2),
            logger: TestDatabase.logger
        )
        let all = try Migrator.parse(EmbeddedAssets.migrations, source: "the migrations built into push-relay")
        _ = try await Migrator(migrations: all.filter { $0.version < 15 }, logger: TestDatabase.logger).migrate(client)
        // Rows as the schema before stored them: waiting, in flight with its lease ended, delivered.
        _ = try await client.query(
            """
            INSERT INTO deliveries (app_id, device_token, platform, kind, status, next_attempt_at, lease_owner, lease_expires_at)
            VALUES ('support', 'a', 'ios', 'badge_sync', 'pending', now(), NULL, NULL),
                   ('support', 'b', 'ios', 'badge_sync', 'sending', now() - interval '1 second', 'gone', now() - interval '1 second'),
                   ('support', 'c', 'ios', 'badge_sync', 'delivered', now() - interval '1 hour', NULL, NULL)
            """
        )
        #expect(try await Migrator(migrations: all, logger: TestDatabase.logger).migrate(client).map(\.version).contains(15))
        let due = try await client.query("SELECT device_token FROM deliveries WHERE due ORDER BY device_token").rows.map {
            try $0.decode(String.self, at: 0)
        }
        #expect(due == ["a", "b"])
        let queue = DeliveryQueue(client: client)
        #expect(try await queue.sweep(upTo: try await queue.sweepCutoff()) == (1, 0))
        #expect(try await queue.sweep(upTo: try await queue.sweepCutoff()) == (0, 0))
        let claimed = try await queue.claim(apps: ["support"], limits: [10], owner: "me", lease: .seconds(60))
        #expect(Set(claimed.map(\.token)) == ["a", "b"])
    }

    @Test("one sweep statement visits at most its limit, in key order, and the next goes on from there")
    func sweepGoesOnFromItsWatermark() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()
        let queue = DeliveryQueue(client: test.client)
        let ids = try await Self.claimedAtIntake(queue).map(\.id)
        // One lease end for all three: the id orders them within it.
        _ = try await test.client.query("UPDATE deliveries SET next_attempt_at = now() - interval '1 second' WHERE id = ANY($1)", [ids])
        let cutoff = try await queue.sweepCutoff()
        #expect(try await queue.sweep(upTo: cutoff, limit: 2) == (2, 2))
        #expect(try await test.count("SELECT count(*)::int FROM deliveries WHERE due AND id = ANY($1)", [Array(ids.sorted().prefix(2))]) == 2)
        #expect(try await queue.sweep(upTo: cutoff, limit: 2) == (1, 1))
        #expect(try await queue.sweep(upTo: cutoff, limit: 2) == (0, 0))
    }

    @Test("the sweep's cutoff is held back to the start of a transaction in progress, and moves on once it ends")
    func cutoffWaitsForOpenTransactions() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()
        let queue = DeliveryQueue(client: test.client)
        try await test.client.withConnection { session in
            _ = try await session.execute("BEGIN")
            let started = try #require(try await session.execute("SELECT now()").first?.decode(Date.self, at: 0))
            // A row this transaction inserts, not yet committed, has a key at or after its start.
            #expect(try await queue.sweepCutoff() <= started)
            _ = try await session.execute("COMMIT")
            #expect(try await queue.sweepCutoff() > started)
        }
    }

    @Test("a row keyed at the start of the open transaction that inserts it is not passed by the watermark: the sweep stops before the cutoff")
    func keyAtTheCutoffIsNotPassed() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()
        let queue = DeliveryQueue(client: test.client)
        let insert = """
            INSERT INTO deliveries (app_id, device_token, platform, kind, due, status, next_attempt_at)
            VALUES ('support', $1, 'ios', 'badge_sync', false, 'pending', $2) RETURNING id
            """
        let (inserted, started) = try await test.client.withConnection { session -> (Int64, Date) in
            _ = try await session.execute("BEGIN")
            let started = try #require(try await session.execute("SELECT now()").first?.decode(Date.self, at: 0))
            // Not yet committed: a row keyed at this transaction's start (as an older instance's
            // queued delivery is), and meanwhile a committed one with the same key and a larger id.
            let id = try #require(try await session.query(insert, ["open", started]).first?.decode(Int64.self, at: 0))
            _ = try await test.client.query(insert, ["committed", started])
            let cutoff = try await queue.sweepCutoff()
            #expect(cutoff == started)
            #expect(try await queue.sweep(upTo: cutoff) == (0, 0))
            _ = try await session.execute("COMMIT")
            return (id, started)
        }
        #expect(try await queue.sweepCutoff() > started)
        #expect(try await queue.sweep(upTo: try await queue.sweepCutoff()) == (2, 2))
        #expect(try await test.count("SELECT count(*)::int FROM deliveries WHERE id = $1 AND due", [inserted]) == 1)
    }
}
