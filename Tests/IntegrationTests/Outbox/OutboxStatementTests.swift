import Foundation
import Postgres
import TestSupport
import Testing

@testable import PushRelay

@Suite("Outbox statements: the outcome update")
struct OutboxStatementTests {
    @Test(
        "generic plans of the outcome statements, made on an empty table, find deliveries by primary key, partition and ctid, never by a sequential scan"
    )
    func outcomePlansAreStable() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // applies the migrations; `deliveries` is empty
        let outcomeTypes = "bigint[], text[], timestamptz[], text[], text[], int[], text"
        let eventTypes = "bigint[], text[], text[], text[], text[], text[], text[]"
        let current = try await test.client.query(
            "SELECT partition FROM history_partitions WHERE parent = 'deliveries' AND lower <= (SELECT last_value FROM deliveries_id_seq) "
                + "ORDER BY lower DESC LIMIT 1"
        ).first!.decode(String.self)
        // The partitioned table (an id in no known partition) and the partition of today's ids.
        for (table, lookup, target) in [
            ("deliveries", "Index Scan using deliveries_unpartitioned_pkey on deliveries_unpartitioned", "Tid Scan on deliveries_unpartitioned d_1"),
            (current, "Index Scan using \(current)_pkey on \(current) x", "Tid Scan on \(current) d"),
        ] {
            let plans = try await test.client.withConnection { session -> [String] in
                // What a connection does with `planning: .cached`: one generic plan, kept.
                _ = try await session.execute("SET plan_cache_mode = force_generic_plan")
                _ = try await session.execute("PREPARE outcomes(\(outcomeTypes)) AS \(DeliveryQueue.storeOutcomes(in: table))")
                _ = try await session.execute(
                    "PREPARE outcomes_events(\(outcomeTypes), \(eventTypes)) AS \(DeliveryQueue.storeOutcomesAndEvents(in: table))"
                )
                let outcomes = "'{1}', '{delivered}', '{NULL}', '{a}', '{NULL}', '{0}', 'me'"
                let events = "'{1}', '{support}', '{delivered}', '{5}', '{ios}', '{abcd}', '{NULL}'"
                var plans: [String] = []
                for statement in ["EXPLAIN EXECUTE outcomes(\(outcomes))", "EXPLAIN EXECUTE outcomes_events(\(outcomes), \(events))"] {
                    plans.append(try await session.execute(statement).rows.map { try $0.decode(String.self, at: 0) }.joined(separator: "\n"))
                }
                _ = try await session.execute("DEALLOCATE ALL")
                return plans
            }
            #expect(plans.count == 2)
            for plan in plans {
                // By primary key, and the target by partition and ctid.
                #expect(plan.contains(lookup), "\(plan)")
                #expect(plan.contains(target), "\(plan)")
                #expect(plan.contains("(found.tableoid = tableoid)"), "\(plan)")
                #expect(!plan.contains("Seq Scan on deliveries"), "\(plan)")
            }
        }
    }

    @Test(
        "retention's erase of ended texts looks up each kept text's live deliveries (a subplan per text), never joins the history, which read every partition whole"
    )
    func eraseEndedTextProbesPerText() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()
        let statement = RetentionStore.eraseEndedTextStatement.replacingOccurrences(of: "$1", with: "2000")
        let plan = try await test.client.withConnection { session in
            try await session.execute("EXPLAIN \(statement)").rows.map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")
        }
        #expect(plan.contains("SubPlan"), "\(plan)")
        #expect(!plan.contains("Anti Join"), "\(plan)")
    }

    @Test(
        "the claim reaches each claimed delivery's notification and device by primary key, with 18 partitions and 20,000 devices, in custom and generic plans; the relay keeps one generic plan of the claim and of the sweep"
    )
    func claimPlansLookUpByKey() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()
        // 18 weekly partitions per table, as a relay keeping 90 days has, and a registry large
        // enough that hashing it looks cheap next to 18 primary-key lookups per claimed row.
        _ = try await HistoryPartitions(client: test.client).extend(periodDays: 7, aheadDays: 119)
        _ = try await test.client.query(
            "INSERT INTO devices (app_id, token, platform) SELECT 'support', md5(i::text) || md5((i + 1)::text), 'ios' FROM generate_series(1, 20000) i"
        )
        let tokens = try await test.client.query("SELECT token FROM devices ORDER BY token LIMIT 100").rows.map { try $0.decode(String.self) }
        let queue = DeliveryQueue(client: test.client)
        let items = try stride(from: 0, to: tokens.count, by: 5).map { start in
            IntakeItem(
                appID: "support",
                notification: try PushNotification(
                    title: "t",
                    body: "b",
                    ticketID: "claim-\(start)",
                    devices: tokens[start..<start + 5].map { .init(token: $0, platform: .ios) }
                ),
                requestID: nil
            )
        }
        _ = try await queue.enqueue(items, reservation: nil)
        _ = try await test.client.query("ANALYZE")

        // The plans a connection makes of the claim, generic and custom, each executed (rolled back).
        let plans = try await test.client.withConnection { session -> [String] in
            var plans: [String] = []
            for mode in ["force_generic_plan", "force_custom_plan"] {
                _ = try await session.execute("SET plan_cache_mode = \(mode)")
                _ = try await session.execute("PREPARE claim(text[], int[], text, float8) AS \(DeliveryQueue.claimStatement)")
                _ = try await session.execute("BEGIN")
                let plan = try await session.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE claim('{support}', '{100}', 'me', 60)")
                plans.append(try plan.rows.map { try $0.decode(String.self, at: 0) }.joined(separator: "\n"))
                _ = try await session.execute("ROLLBACK")
                _ = try await session.execute("DEALLOCATE claim")
            }
            _ = try await session.execute("RESET plan_cache_mode")
            return plans
        }
        #expect(plans.count == 2)
        for plan in plans {
            #expect(plan.contains("CTE Scan on claimed c (actual rows=100 loops=1)"), "\(plan)")
            #expect(plan.contains("Index Scan using devices_pkey on devices (actual rows=1 loops=100)"), "\(plan)")
            #expect(!plan.contains("Seq Scan on devices"), "\(plan)")
            // Looked up for each claimed row, never hashed against the claimed rows.
            #expect(!plan.contains("Hash Cond: ((c.") && !plan.contains("Hash Cond: (c."), "\(plan)")
            #expect(plan.contains("(id = c.notification_id)"), "\(plan)")
        }

        // The relay's own calls, on one connection: the claim and the sweep planned once each.
        let one = PostgresClient(configuration: .test(conninfo: test.conninfo, maxConnections: 1), logger: TestDatabase.logger)
        let single = DeliveryQueue(client: one)
        var claimed = 0
        for _ in 1...3 {
            claimed += try await single.claim(apps: ["support"], limits: [40], owner: "me", lease: .seconds(60)).count
            _ = try await single.sweep(upTo: Date())
        }
        #expect(claimed == 100)
        let counts = try await one.query(
            "SELECT statement LIKE '%WITH wanted AS%', generic_plans, custom_plans FROM pg_prepared_statements "
                + "WHERE statement LIKE '%WITH wanted AS%' OR statement LIKE '%WITH mark AS MATERIALIZED%' ORDER BY 1"
        ).rows.map { try $0.decode((Bool, Int, Int).self) }
        await one.close()
        // The sweep's, then the claim's: three executions each, no custom plan.
        #expect(counts.map(\.1) == [3, 3], "\(counts)")
        #expect(counts.map(\.2) == [0, 0], "\(counts)")
    }

    @Test("outcomes update this instance's rows, leave a row another instance has taken over, and change nothing of a finished row")
    func outcomesRespectTheLease() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()
        let queue = DeliveryQueue(client: test.client)
        let webhook = PushNotification(
            title: "t",
            body: "b",
            ticketID: "lease-1",
            devices: [.init(token: apnsToken(), platform: .ios), .init(token: apnsToken(), platform: .ios)]
        )
        let reservation = DeliveryReservation(owner: "me", lease: .seconds(60), granted: ["support": 2])
        let (_, claimed) = try await queue.enqueue([IntakeItem(appID: "support", notification: webhook, requestID: nil)], reservation: reservation)
        try #require(claimed.count == 2)
        let (mine, takenOver) = (claimed[0], claimed[1])
        // Another instance claimed the second after this one's lease ran out.
        _ = try await test.client.query("UPDATE deliveries SET lease_owner = 'other' WHERE id = $1", [takenOver.id])

        func delivered(_ delivery: ClaimedDelivery, _ providerID: String) -> DeliveryResult {
            DeliveryResult(delivery: delivery, status: .delivered, outcome: .delivered, providerID: providerID)
        }
        // Twice: the second store finds both rows no longer this instance's, and changes nothing.
        for attempt in 1...2 {
            try await queue.store([delivered(mine, "p\(attempt)"), delivered(takenOver, "q\(attempt)")], owner: "me")
            let rows = try await test.client.query(
                "SELECT status, coalesce(lease_owner, ''), coalesce(provider_id, ''), attempts FROM deliveries WHERE id = ANY($1) ORDER BY id",
                [[mine.id, takenOver.id]]
            ).rows.map { try $0.decode((String, String, String, Int).self) }
            try #require(rows.count == 2)
            #expect(rows[0] == ("delivered", "", "p1", 1), "attempt \(attempt)")
            #expect(rows[1] == ("sending", "other", "", 1), "attempt \(attempt)")
        }
    }
}
