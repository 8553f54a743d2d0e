import Configuration
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Postgres
import Synchronization
import TestSupport
import Testing

@testable import PushRelay

/// The history partitioned by id range (migration 0019, ``HistoryPartitions``): partitions made
/// ahead, ids in the partition of their day, whole partitions dropped by retention, an upgrade with
/// rows in every state, and a relay whose partitions ran out.
@Suite("History partitions: made ahead, dropped whole, upgraded, run out")
struct HistoryPartitionTests {
    /// The first id of the day `days` from today (UTC), as migration 0019 counts.
    static func bound(_ test: TestApp, days: Int) async throws -> Int64 {
        try await test.client.query(
            "SELECT push_relay_history_bound((now() AT TIME ZONE 'UTC')::date + $1::int)",
            [days]
        ).first!.decode(Int64.self)
    }

    static func item(_ ticket: String, tokens: [String]) -> IntakeItem {
        IntakeItem(
            appID: "support",
            notification: PushNotification(
                title: "t",
                body: "b",
                ticketID: ticket,
                devices: tokens.map { .init(token: $0, platform: .ios) }
            ),
            requestID: nil
        )
    }

    static func partitions(_ test: TestApp) async throws -> [HistoryPartitions.Partition] {
        try await HistoryPartitions(client: test.client).list()
    }

    @Test("a new database has partitions from today to two weeks ahead; ids fall in today's; extending again makes only what is missing")
    func partitionsAhead() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()
        let today = try await Self.bound(test, days: 0)
        let week = try await Self.bound(test, days: 7) - today
        for table in ["notifications", "deliveries"] {
            let ranges = try await Self.partitions(test).filter { $0.parent == table && $0.lower != nil }
            #expect(ranges.map(\.lower) == [today, today + week, today + 2 * week], "\(table)")
            #expect(ranges.map(\.upper) == [today + week, today + 2 * week, today + 3 * week], "\(table)")
        }
        let queue = DeliveryQueue(client: test.client)
        let (receipts, _) = try await queue.enqueue([Self.item("p-1", tokens: [apnsToken()])], reservation: nil)
        let notification = try #require(receipts.first?.notificationID)
        #expect(notification >= today && notification < today + week)
        let delivery = try await test.client.query("SELECT id, tableoid::regclass::text FROM deliveries").first!.decode((Int64, String).self)
        #expect(delivery.0 >= today && delivery.0 < today + week)
        #expect(delivery.1 == ranges(named: "deliveries", from: try await Self.partitions(test)).first)

        let partitions = HistoryPartitions(client: test.client)
        #expect(try await partitions.extend(periodDays: 7, aheadDays: 14) == 0)
        #expect(try await partitions.daysAhead() == 21)
        // Two more weeks per table; the sequences stay where they are.
        #expect(try await partitions.extend(periodDays: 7, aheadDays: 30) == 4)
        #expect(try await partitions.daysAhead() == 35)
        let (again, _) = try await queue.enqueue([Self.item("p-2", tokens: [apnsToken()])], reservation: nil)
        #expect(try #require(again.first?.notificationID) == notification + 1)
        // A new partition checks statuses as the table always did.
        await #expect(throws: PostgresError.self) {
            _ = try await test.client.query(
                "INSERT INTO deliveries (app_id, device_token, platform, kind, status) VALUES ('support', 't', 'ios', 'badge_sync', 'lost')"
            )
        }
    }

    private func ranges(named table: String, from list: [HistoryPartitions.Partition]) -> [String] {
        list.filter { $0.parent == table && $0.lower != nil }.map(\.name)
    }

    @Test(
        "an outcome updates its own delivery, not the row at the same place in another partition; a batch across partitions, one made since, updates all"
    )
    func outcomeStaysInItsPartition() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()
        let queue = DeliveryQueue(client: test.client)
        let reservation = DeliveryReservation(owner: "me", lease: .seconds(60), granted: ["support": 1])
        let (_, claimed) = try await queue.enqueue([Self.item("ctid-1", tokens: [apnsToken()])], reservation: reservation)
        let mine = try #require(claimed.first)
        // The first row of next week's partition: the same ctid, (0,1), also leased to "me".
        let next = try await Self.bound(test, days: 7)
        _ = try await test.client.query(
            """
            INSERT INTO deliveries (id, app_id, device_token, platform, kind, status, lease_owner, lease_expires_at)
            VALUES ($1, 'support', 'other-token', 'ios', 'badge_sync', 'sending', 'me', now() + interval '1 minute')
            """,
            [next]
        )
        let places = try await test.client.query("SELECT ctid::text FROM deliveries ORDER BY id").rows.map { try $0.decode(String.self) }
        #expect(places == ["(0,1)", "(0,1)"])
        try await queue.store(
            [DeliveryResult(delivery: mine, status: .delivered, outcome: .delivered, providerID: "p")],
            owner: "me"
        )
        let rows = try await test.client.query("SELECT id, status FROM deliveries ORDER BY id").rows.map {
            try $0.decode((Int64, String).self)
        }
        #expect(rows.map(\.1) == ["delivered", "sending"], "\(rows)")

        // A batch across two partitions, one of them made after the queue read the partitions.
        #expect(try await HistoryPartitions(client: test.client).extend(periodDays: 7, aheadDays: 30) == 4)
        let later = try await Self.bound(test, days: 28)
        _ = try await test.client.query(
            """
            INSERT INTO deliveries (id, app_id, device_token, platform, kind, status, lease_owner, lease_expires_at)
            VALUES ($1, 'support', 'later-token', 'ios', 'badge_sync', 'sending', 'me', now() + interval '1 minute')
            """,
            [later]
        )
        let pending = try await test.client.query(
            """
            SELECT \(ClaimedDelivery.columns) FROM deliveries c LEFT JOIN notifications n ON n.id = c.notification_id
            LEFT JOIN devices dv ON false CROSS JOIN (SELECT 0 AS badge) b WHERE c.status = 'sending' ORDER BY c.id
            """
        ).rows.map { try ClaimedDelivery(row: $0, at: 0, claimedAt: ContinuousClock.now) }
        #expect(pending.map(\.id) == [next, later])
        try await queue.store(
            pending.map { DeliveryResult(delivery: $0, status: .delivered, outcome: .delivered, providerID: "q") },
            owner: "me"
        )
        let after = try await test.client.query("SELECT status, coalesce(provider_id, '') FROM deliveries ORDER BY id").rows.map {
            try $0.decode((String, String).self)
        }
        #expect(after.map(\.0) == ["delivered", "delivered", "delivered"] && after.map(\.1) == ["p", "q", "q"], "\(after)")
    }

    @Test(
        "retention drops whole partitions whose rows are all past their age, keeps those with failures younger than failed_days, due rows or recent rows"
    )
    func dropsExpiredPartitions() async throws {
        let test = try await TestApp.make()
        _ = try await test.application(extra: ["retention.enabled": .init(.bool(false), isSecret: false)])
        let service = RetentionService(client: test.client, settings: RetentionSettings(), metrics: RelayMetrics(), logger: TestDatabase.logger)
        // A new database's unpartitioned tables are empty: the first run drops them.
        let first = try #require(try await service.runOnce())
        #expect(Set(first.partitionsDropped) == ["deliveries_unpartitioned", "notifications_unpartitioned"])
        _ = try await test.client.query("DELETE FROM leases")

        // Past weeks, each with a notification and deliveries stored `age` days ago.
        let weeks: [(name: String, age: Int, statuses: [String])] = [
            ("old", 100, ["delivered", "failed"]),  // past failed_days (90): dropped
            ("failures", 60, ["delivered", "dead_token"]),  // a failure younger than 90 days: kept
            ("delivered", 50, ["delivered", "skipped"]),  // past delivered_days (30) + a day: dropped
            ("retrying", 40, ["delivered", "pending"]),  // a due row: kept
            ("recent", 20, ["delivered"]),  // kept
        ]
        for week in weeks {
            let lower = try await Self.bound(test, days: -week.age)
            let upper = try await Self.bound(test, days: -week.age + 7)
            for table in ["notifications", "deliveries"] {
                _ = try await test.client.query("CREATE TABLE \(table)_\(week.name) PARTITION OF \(table) FOR VALUES FROM (\(lower)) TO (\(upper))")
            }
            _ = try await test.client.query(
                "INSERT INTO notifications (id, app_id, ticket_id, received_at) VALUES ($1, 'support', 'x', now() - make_interval(days => $2))",
                [lower, week.age]
            )
            for (index, status) in week.statuses.enumerated() {
                _ = try await test.client.query(
                    """
                    INSERT INTO deliveries (id, notification_id, app_id, device_token, platform, status, due, created_at, updated_at)
                    VALUES ($1, $2, 'support', 't', 'ios', $3, $3 = 'pending', now() - make_interval(days => $4), now() - make_interval(days => $4))
                    """,
                    [lower + Int64(index), lower, status, week.age]
                )
            }
            // Two weeks' notifications with their delivery id range, as intake stores it (0020);
            // the others without one, as before 0020.
            if ["failures", "delivered"].contains(week.name) {
                _ = try await test.client.query(
                    "UPDATE notifications SET first_delivery_id = $1, last_delivery_id = $2 WHERE id = $1",
                    [lower, lower + Int64(week.statuses.count - 1)]
                )
            }
        }
        let report = try #require(try await service.runOnce())
        #expect(report.complete)
        #expect(
            Set(report.partitionsDropped) == ["deliveries_old", "deliveries_delivered", "notifications_old", "notifications_delivered"],
            "\(report.partitionsDropped)"
        )
        let left = Set(try await Self.partitions(test).map(\.name))
        for week in ["failures", "retrying", "recent"] {
            #expect(left.contains("deliveries_\(week)") && left.contains("notifications_\(week)"), "\(week): \(left)")
        }
        #expect(try await test.count("SELECT count(*) FROM deliveries") == 5)
        #expect(try await test.count("SELECT count(*) FROM notifications") == 3)
        // The partitions ahead are open (ids will be allocated there): never dropped, even empty.
        #expect(ranges(named: "deliveries", from: try await Self.partitions(test)).count == 6)
    }

    /// Whether a session of this test's database waits for a lock: on a table (`relation`), or on
    /// any kind (a detach waiting for the transactions before it waits on their `virtualxid`).
    static func waiting(_ test: TestApp, onTable: Bool) async throws -> Bool {
        try await test.client.query(
            """
            SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                           WHERE a.datname = current_database() AND NOT l.granted AND (NOT $1 OR l.locktype = 'relation'))
            """,
            [onTable]
        ).first!.decode(Bool.self)
    }

    /// A transaction that stores a delivery (as intake does) and stays open until `release`.
    struct OpenWriter {
        final class Flags: Sendable {
            let stored = Atomic<Bool>(false)
            let released = Atomic<Bool>(false)
            let failure = Mutex<String?>(nil)
        }
        let flags = Flags()
        let task: Task<Void, any Error>

        init(_ test: TestApp) {
            let client = PostgresClient(configuration: .test(conninfo: test.conninfo, maxConnections: 1), logger: TestDatabase.logger)
            let flags = self.flags
            task = Task {
                defer { flags.stored.store(true, ordering: .releasing) }
                do {
                    try await client.withTransaction { session in
                        try await session.query(
                            "INSERT INTO deliveries (app_id, device_token, platform, kind) VALUES ('support', 'held', 'ios', 'badge_sync')"
                        )
                        flags.stored.store(true, ordering: .releasing)
                        _ = await eventually { flags.released.load(ordering: .acquiring) }
                    }
                } catch {
                    flags.failure.withLock { $0 = "\(error)" }
                }
                await client.close()
            }
        }

        /// Whether it stored its row (or failed, which ``failure`` says).
        var stored: Bool { flags.stored.load(ordering: .acquiring) }
        var failure: String? { flags.failure.withLock { $0 } }

        func release() async throws {
            flags.released.store(true, ordering: .releasing)
            try await task.value
        }
    }

    @Test(
        "retention's partition work makes no statement wait: new partitions are attached, a drop detaches concurrently; a detach interrupted, or done and not followed by the drop, is finished by the next run"
    )
    func partitionWorkNeverBlocksIntake() async throws {
        let test = try await TestApp.make()
        _ = try await test.application(extra: ["retention.enabled": .init(.bool(false), isSecret: false)])
        // Its own connections: a statement of it waiting must not keep this test from looking.
        let client = PostgresClient(configuration: .test(conninfo: test.conninfo, maxConnections: 4), logger: TestDatabase.logger)
        defer { Task { await client.close() } }
        let partitions = HistoryPartitions(client: client)
        let service = RetentionService(client: test.client, settings: RetentionSettings(), metrics: RelayMetrics(), logger: TestDatabase.logger)
        // The empty unpartitioned tables go first (they cover every past id).
        #expect(try await service.runOnce()?.partitionsDropped.count == 2)
        _ = try await test.client.query("DELETE FROM leases")
        // Three past weeks, named as push_relay_extend_history names partitions.
        var names: [String] = []
        for age in [100, 93, 86] {
            let name = try await test.client.query(
                "SELECT 'deliveries_' || to_char((now() AT TIME ZONE 'UTC')::date - $1::int, 'YYYYMMDD')",
                [age]
            ).first!.decode(String.self)
            names.append(name)
            let lower = try await Self.bound(test, days: -age)
            _ = try await test.client.query(
                "CREATE TABLE \(name) PARTITION OF deliveries FOR VALUES FROM (\(lower)) TO (\(try await Self.bound(test, days: -age + 7)))"
            )
        }
        let writer = OpenWriter(test)
        #expect(await eventually { writer.stored })
        try #require(writer.failure == nil, "\(writer.failure ?? "")")

        // Two more weeks of partitions while a write is open: done without waiting for it.
        let extended = Task { try await partitions.extend(periodDays: 7, aheadDays: 30) }
        let extendedFirst = try await eventually {
            if try await Self.waiting(test, onTable: true) { return true }
            return (try? await test.count("SELECT count(*) FROM history_partitions WHERE parent = 'deliveries'")) == 8
        }
        #expect(extendedFirst)
        #expect(try await !Self.waiting(test, onTable: true), "extending the history waits for a table lock")

        // A drop waits for the open write, and makes no new write wait behind it.
        let old = try #require(try await partitions.list().first { $0.name == names[0] })
        let dropped = Task { try await partitions.drop(old) }
        #expect(try await eventually { try await Self.waiting(test, onTable: false) })
        let stored = Task {
            try await client.query(
                "INSERT INTO deliveries (app_id, device_token, platform, kind) VALUES ('support', 'new', 'ios', 'badge_sync')"
            )
        }
        let storedFirst = try await eventually {
            if try await Self.waiting(test, onTable: true) { return true }
            return (try? await test.count("SELECT count(*) FROM deliveries WHERE device_token = 'new'")) == 1
        }
        #expect(storedFirst)
        #expect(try await !Self.waiting(test, onTable: true), "a write waits behind the drop")
        try await writer.release()
        #expect(try await extended.value == 4)
        _ = try await stored.value
        #expect(try await dropped.value)
        #expect(try await test.client.query("SELECT to_regclass($1) IS NULL", [names[0]]).first!.decode(Bool.self))

        // A detach cancelled while it waits is left pending: out of the table's queries already.
        let stalledWriter = OpenWriter(test)
        #expect(await eventually { stalledWriter.stored })
        try #require(stalledWriter.failure == nil, "\(stalledWriter.failure ?? "")")
        let stalled = try #require(try await partitions.list().first { $0.name == names[1] })
        let ended = Atomic<Bool>(false)
        let cancelled = Task {
            defer { ended.store(true, ordering: .releasing) }
            return try await partitions.drop(stalled)
        }
        #expect(
            try await eventually {
                if ended.load(ordering: .acquiring) { return true }
                return try await test.client.query(
                    """
                    SELECT count(pg_cancel_backend(pid)) > 0 FROM pg_stat_activity
                    WHERE datname = current_database() AND query LIKE 'ALTER TABLE%DETACH PARTITION%' AND wait_event_type = 'Lock'
                    """
                ).first!.decode(Bool.self)
            }
        )
        #expect(try await cancelled.value == false)
        try await stalledWriter.release()
        #expect(try await partitions.list().first { $0.name == names[1] }?.detaching == true)
        // Detached and then not dropped, as by a relay stopped between the two.
        _ = try await test.client.query("ALTER TABLE deliveries DETACH PARTITION \(names[2])")

        let report = try #require(try await service.runOnce())
        #expect(report.complete)
        #expect(Set(names.dropFirst()).isSubset(of: report.partitionsDropped), "\(report.partitionsDropped)")
        for name in names {
            #expect(try await test.client.query("SELECT to_regclass($1) IS NULL", [name]).first!.decode(Bool.self), "\(name)")
        }
        #expect(try await test.count("SELECT count(*) FROM deliveries") == 3, "the two writers' rows and the one stored during the drop")
    }

    @Test(
        "a version 18 database with rows in every state is upgraded: rows kept in place, claims finish, new ids in today's partition, old rows pruned row by row"
    )
    func upgradeKeepsHistory() async throws {
        let test = try await TestApp.make()
        let all = try Migrator.parse(EmbeddedAssets.migrations, source: "the migrations built into push-relay")
        _ = try await Migrator(migrations: all.filter { $0.version <= 18 }, logger: TestDatabase.logger).migrate(test.client)
        _ = try await test.client.query(
            """
            INSERT INTO notifications (app_id, ticket_id, title, body, content, received_at) VALUES
                ('support', 'old', 't', 'b', 'full', now() - interval '40 days'),
                ('support', 'new', 'secret title', 'secret body', 'encrypted', now())
            """
        )
        _ = try await test.client.query(
            """
            INSERT INTO deliveries (notification_id, app_id, device_token, platform, kind, status, due, lease_owner, lease_expires_at,
                                    created_at, updated_at)
            SELECT n.id, 'support', s.token, 'ios', s.kind, s.status, s.due, s.owner, s.lease, now() - s.age, now() - s.age
            FROM (VALUES
                ('old', 'a', 'alert', 'delivered', false, NULL, NULL::timestamptz, interval '40 days'),
                ('new', 'b', 'alert', 'pending', true, NULL, NULL, interval '0'),
                ('new', 'c', 'alert', 'sending', false, 'me', now() + interval '1 minute', interval '0'),
                ('new', 'd', 'alert', 'failed', false, NULL, NULL, interval '0'),
                ('new', 'e', 'alert', 'dead_token', false, NULL, NULL, interval '0'),
                ('new', 'f', 'badge_sync', 'pending', true, NULL, NULL, interval '0')
            ) AS s(ticket, token, kind, status, due, owner, lease, age)
            LEFT JOIN notifications n ON n.ticket_id = s.ticket AND s.kind = 'alert'
            ORDER BY s.token
            """
        )
        let before = try await test.client.query("SELECT id, status, due FROM deliveries ORDER BY id").rows.map {
            try $0.decode((Int64, String, Bool).self)
        }
        _ = try await Migrator(migrations: all, logger: TestDatabase.logger).migrate(test.client)
        #expect(try await Migrator(migrations: all, logger: TestDatabase.logger).appliedVersion(test.client) == all.last!.version)
        let after = try await test.client.query("SELECT id, status, due FROM deliveries ORDER BY id").rows.map {
            try $0.decode((Int64, String, Bool).self)
        }
        #expect(after.map(\.0) == before.map(\.0) && after.map(\.1) == before.map(\.1) && after.map(\.2) == before.map(\.2))
        #expect(try await test.count("SELECT count(*) FROM ONLY deliveries_unpartitioned") == 6)
        #expect(try await test.count("SELECT count(*) FROM notifications WHERE title = 'secret title'") == 1)
        // Only the old table keeps an index on `notification_id` (0021): its notifications have no
        // delivery range, and their lookups read it alone, in custom and generic plans.
        let indexed = try await test.client.query(
            "SELECT tablename FROM pg_indexes WHERE tablename LIKE 'deliveries%' AND indexdef LIKE '%(notification_id)' ORDER BY 1"
        ).rows.map { try $0.decode(String.self) }
        #expect(indexed == ["deliveries_unpartitioned"])
        let new = try #require(try await test.client.query("SELECT id FROM notifications WHERE ticket_id = 'new'").rows.first)
            .decode(Int64.self)
        try await test.client.withConnection { session in
            for mode in ["force_custom_plan", "force_generic_plan"] {
                _ = try await session.execute("SET plan_cache_mode = \(mode)")
                _ = try await session.execute("PREPARE old_\(mode) AS \(DeliveryStatusStore.deliveriesStatement)")
                let explain = try await session.execute("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE old_\(mode)(\(new), NULL, NULL, 1000, 'new')")
                    .rows.map { try $0.decode(String.self, at: 0) }.joined()
                #expect(try Self.scanned(explain, started: true) == ["deliveries_unpartitioned"], "\(mode)\n\(explain)")
            }
        }
        let old = try #require(try await DeliveryStatusStore(client: test.client).notification(app: "support", id: new, fullTokens: false))
        #expect(old.deliveries?.count == 4 && old.counts["pending"] == 1 && old.counts["dead_token"] == 1, "\(old)")

        // The claim made before the upgrade finishes in the old table.
        let claimed = try #require(
            try await test.client.query(
                """
                SELECT \(ClaimedDelivery.columns) FROM deliveries c JOIN notifications n ON n.id = c.notification_id
                LEFT JOIN devices dv ON false CROSS JOIN (SELECT 0 AS badge) b WHERE c.device_token = 'c'
                """
            ).rows.first.map { try ClaimedDelivery(row: $0, at: 0, claimedAt: ContinuousClock.now) }
        )
        try await DeliveryQueue(client: test.client).store(
            [DeliveryResult(delivery: claimed, status: .delivered, outcome: .delivered, providerID: "p")],
            owner: "me"
        )
        #expect(try await test.count("SELECT count(*) FROM deliveries_unpartitioned WHERE device_token = 'c' AND status = 'delivered'") == 1)
        // New webhooks go to today's partition.
        let (receipts, _) = try await DeliveryQueue(client: test.client).enqueue([Self.item("after", tokens: [apnsToken()])], reservation: nil)
        #expect(try #require(receipts.first?.notificationID) >= (try await Self.bound(test, days: 0)))
        #expect(try await test.count("SELECT count(*) FROM ONLY deliveries_unpartitioned") == 6)
        // Retention prunes the old table row by row: the 40-day delivered row and its notification.
        let report = try #require(
            try await RetentionService(client: test.client, settings: RetentionSettings(), metrics: RelayMetrics(), logger: TestDatabase.logger)
                .runOnce()
        )
        #expect(report.deliveries == 1 && report.notifications == 1 && report.partitionsDropped.isEmpty, "\(report)")
        #expect(try await test.count("SELECT count(*) FROM deliveries_unpartitioned") == 5)
    }

    @Test("a relay whose partitions ran out accepts webhooks into the newest, reports the gap by metric and warning, and the next run makes today's")
    func partitionsRanOut() async throws {
        let test = try await TestApp.make()
        _ = try await test.application(extra: ["retention.enabled": .init(.bool(false), isSecret: false)])
        // As if no instance had run retention for three weeks: the newest partition ended 13 days ago.
        let lower = try await Self.bound(test, days: -20)
        let upper = try await Self.bound(test, days: -13)
        for table in ["notifications", "deliveries"] {
            for partition in try await Self.partitions(test) where partition.parent == table {
                _ = try await test.client.query("DROP TABLE \(partition.name)")
            }
            _ = try await test.client.query("CREATE TABLE \(table)_stale PARTITION OF \(table) FOR VALUES FROM (\(lower)) TO (\(upper))")
            _ = try await test.client.query("SELECT setval('\(table)_id_seq', \(lower + 100), false)")
        }
        let app = try await test.application(extra: ["retention.enabled": .init(.bool(false), isSecret: false)])
        try await app.test(.router) { client in
            let response = try await client.execute(
                uri: "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)",
                method: .post,
                headers: [.contentType: "application/json"],
                body: jsonBody(webhook(devices: [(apnsToken(), "ios")], ticket: "gap"))
            )
            #expect(response.status == .accepted)
            #expect(
                try await eventually {
                    let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                    return metricValue(metrics, "push_relay_history_partition_days_ahead", [:]) == -13
                }
            )
        }
        #expect(try await test.count("SELECT count(*) FROM deliveries_stale") == 1)

        let lines = OutageLogTests.Lines()
        var logger = Logger(label: "push-relay") { RelayLogHandler(label: $0, stream: lines, format: .text) }
        logger.logLevel = .info
        let metrics = RelayMetrics()
        let service = RetentionService(client: test.client, settings: RetentionSettings(), metrics: metrics, logger: logger)
        await service.checkPartitions()
        let warnings = lines.lines.withLock { $0 }.filter { $0.contains("no history partition covers today") }
        #expect(warnings.count == 1 && warnings[0].contains("warning") && warnings[0].contains("push.partition_days_ahead=-13"), "\(warnings)")
        // The retention lease holder makes today's partitions and moves the ids there.
        let report = try #require(try await service.runOnce())
        #expect(report.partitionsCreated == 6)
        #expect(metricValue(metrics.text, "push_relay_history_partition_days_ahead", [:]) == 21)
        let (receipts, _) = try await DeliveryQueue(client: test.client).enqueue([Self.item("after", tokens: [apnsToken()])], reservation: nil)
        #expect(try #require(receipts.first?.notificationID) >= (try await Self.bound(test, days: 0)))
        // The stale partition holds a row stored today: kept.
        #expect(try await test.count("SELECT count(*) FROM deliveries_stale") == 1)
    }

    /// The partitions of `deliveries` an `EXPLAIN (ANALYZE, FORMAT JSON)` output read: the scans
    /// that ran at least once (a subplan pruned at run time is shown never executed, or not at all);
    /// with `started`, every scan the plan kept, run or not (each is set up at every execution).
    static func scanned(_ explain: String, started: Bool = false) throws -> [String] {
        func walk(_ node: [String: Any]) -> [String] {
            var found: [String] = []
            if let name = node["Relation Name"] as? String, name.hasPrefix("deliveries"), started || (node["Actual Loops"] as? Int ?? 0) > 0 {
                found.append(name)
            }
            for child in node["Plans"] as? [[String: Any]] ?? [] { found += walk(child) }
            return found
        }
        let plans = try JSONSerialization.jsonObject(with: Data(explain.utf8)) as? [[String: Any]] ?? []
        return plans.flatMap { ($0["Plan"] as? [String: Any]).map(walk) ?? [] }.sorted()
    }

    @Test(
        "intake stores each notification's delivery id range; a notification's deliveries, a ticket's counts and the erase of a text read only its partition, in custom and generic plans; a notification without a range (stored before 0020) is read from every partition"
    )
    func lookupsReadTheRangesPartitions() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()
        let gone = apnsToken()
        _ = try await test.client.query("INSERT INTO devices (app_id, token, platform, status) VALUES ('support', $1, 'ios', 'invalid')", [gone])
        let queue = DeliveryQueue(client: test.client)
        let (receipts, _) = try await queue.enqueue(
            [Self.item("r-1", tokens: [apnsToken(), apnsToken()]), Self.item("r-2", tokens: [apnsToken()]), Self.item("r-3", tokens: [gone])],
            reservation: nil
        )
        try #require(receipts.map(\.deliveries) == [2, 1, 0])
        let ranges = try await test.client.query(
            """
            SELECT n.first_delivery_id, n.last_delivery_id, coalesce(min(d.id), 0), coalesce(max(d.id), 0)
            FROM notifications n LEFT JOIN deliveries d ON d.notification_id = n.id WHERE n.id = ANY($1)
            GROUP BY n.id ORDER BY n.id
            """,
            [receipts.map(\.notificationID)]
        ).rows.map { try $0.decode((Int64?, Int64?, Int64, Int64).self) }
        #expect(ranges.count == 3)
        for range in ranges { #expect(range.0 == range.2 && range.1 == range.3, "\(range)") }

        let id = receipts[0].notificationID
        _ = try await test.client.query("UPDATE notifications SET content = 'encrypted' WHERE id = $1", [id])
        let holding = try await test.client.query("SELECT DISTINCT tableoid::regclass::text FROM deliveries WHERE notification_id = $1", [id])
            .rows.map { try $0.decode(String.self) }
        let every = try await test.client.query("SELECT partition FROM history_partitions WHERE parent = 'deliveries' ORDER BY 1")
            .rows.map { try $0.decode(String.self) }
        try #require(holding.count == 1 && every.count == 4, "\(holding) of \(every)")
        try await test.client.withConnection { session in
            for (ranged, expected) in [(true, holding), (false, every)] {
                if !ranged {
                    _ = try await session.execute("UPDATE notifications SET first_delivery_id = NULL, last_delivery_id = NULL WHERE id = \(id)")
                }
                // The range as DeliveryStatusStore.notification passes it, read from the notification.
                let range = try await session.query("SELECT first_delivery_id, last_delivery_id FROM notifications WHERE id = $1", [id])
                    .rows.map { try $0.decode((Int64?, Int64?).self) }.first
                let bounds = [range?.0, range?.1].map { $0.map(String.init) ?? "NULL" }.joined(separator: ", ")
                let statements = [
                    ("deliveries", DeliveryStatusStore.deliveriesStatement, "\(id), \(bounds), 1000, 'r-1'"),
                    ("ticket", DeliveryStatusStore.ticketStatement, "'support', 'r-1', NULL, 51"),
                    ("erase", DeliveryQueue.eraseTextStatement, "ARRAY[\(id)]::bigint[]"),
                ]
                for mode in ["force_custom_plan", "force_generic_plan"] {
                    _ = try await session.execute("SET plan_cache_mode = \(mode)")
                    // Without a range, the erase stops at the first live delivery it finds.
                    for (offset, (name, statement, arguments)) in statements.enumerated() where ranged || name != "erase" {
                        let prepared = "s\(offset)_\(mode)_\(ranged)"
                        _ = try await session.execute("PREPARE \(prepared) AS \(statement)")
                        let explain = try await session.execute("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE \(prepared)(\(arguments))")
                            .rows.map { try $0.decode(String.self, at: 0) }.joined()
                        // A notification's deliveries are looked up with the range as parameters: the plan
                        // keeps the range's partitions only.
                        let scanned = try Self.scanned(explain, started: name == "deliveries")
                        #expect(scanned == expected, "\(name), \(mode), range stored: \(ranged): \(scanned)\n\(explain)")
                    }
                }
            }
        }
        // Without a range the answer is the same, read from every partition; with one, too.
        let store = DeliveryStatusStore(client: test.client)
        let status = try #require(try await store.notification(app: "support", id: id, fullTokens: false))
        #expect(status.counts["pending"] == 2 && status.deliveries?.count == 2)
        let ranged = try #require(try await store.notification(app: "support", id: receipts[1].notificationID, fullTokens: false))
        #expect(ranged.counts["pending"] == 1 && ranged.deliveries?.map(\.ticketID) == ["r-2"])
        let none = try #require(try await store.notification(app: "support", id: receipts[2].notificationID, fullTokens: false))
        #expect(none.counts.count == DeliveryStatus.allCases.count && none.counts.values.allSatisfy { $0 == 0 } && none.deliveries == [])
    }
}
