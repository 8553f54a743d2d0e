import Foundation
import Logging
import TestSupport
import Testing

@testable import Postgres

@Suite("PostgresClient against a real server")
struct PostgresClientTests {
    private func client(maxConnections: Int = 4, acquireTimeout: Duration = .seconds(10)) async throws -> PostgresClient {
        let conninfo = try await TestDatabase.makeDatabase()
        return PostgresClient(
            configuration: .test(conninfo: conninfo, maxConnections: maxConnections, acquireTimeout: acquireTimeout),
            logger: TestDatabase.logger
        )
    }

    @Test("more callers than connections all succeed, and the pool never exceeds its bound")
    func poolUnderConcurrency() async throws {
        let marker = "pool-\(UUID().uuidString.prefix(8))"
        let conninfo = try await TestDatabase.makeDatabase()
        // Forty callers take turns on three connections: on a loaded machine the last waited over 60 s
        // (each turn also waits for the observer's one connection), and how long is not what this
        // test is about. Both pools' waits bound a hang only.
        let client = PostgresClient(
            configuration: .test(conninfo: conninfo, maxConnections: 3, acquireTimeout: hangCeiling, applicationName: marker),
            logger: TestDatabase.logger
        )
        let observer = PostgresClient(
            configuration: .test(conninfo: conninfo, maxConnections: 1, acquireTimeout: hangCeiling),
            logger: TestDatabase.logger
        )
        let results = try await withThrowingTaskGroup(of: (Int, Int32, Int).self) { group in
            for caller in 0..<40 {
                group.addTask {
                    try await client.withConnection { session in
                        let row = try await session.query("SELECT $1::int * 2, pg_backend_pid(), pg_sleep(0.02)::text IS NOT NULL", [caller]).first!
                        let seen = try await observer.query(
                            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                            [marker]
                        ).first!.decode(Int.self, at: 0)
                        return (try row.decode(Int.self, at: 0) - caller * 2, try row.decode(Int32.self, at: 1), seen)
                    }
                }
            }
            var all: [(Int, Int32, Int)] = []
            for try await result in group { all.append(result) }
            return all
        }
        #expect(results.count == 40)
        #expect(results.allSatisfy { $0.0 == 0 })
        #expect(Set(results.map(\.1)).count <= 3)
        #expect(results.map(\.2).max()! <= 3)
        #expect(client.openConnections <= 3)
        await client.close()
        await observer.close()
    }

    @Test("a refused write is on record when the failed call throws, and for 15 s of the client's clock after it")
    func refusalWindow() async throws {
        let conninfo = try await TestDatabase.makeDatabase()
        let time = ManualTime()
        let client = PostgresClient(configuration: .test(conninfo: conninfo, maxConnections: 1), logger: TestDatabase.logger, now: { time.now })
        try await client.query("CREATE TABLE refusal_probe (n int)")
        #expect(client.recentWriteRefusal() == nil)
        do {
            try await client.withConnection { session in
                try await session.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
                try await session.execute("INSERT INTO refusal_probe VALUES (1)")
            }
            Issue.record("a read-only session took the write")
        } catch let error as PostgresError {
            #expect(error.sqlState == "25006")
            // Whoever answers this failure (a webhook's 503) finds it on record for `/ready`.
            #expect(client.recentWriteRefusal() == "the database is read-only")
        }
        // However long the callers take in real time, the window is the clock's.
        time.advance(by: .seconds(14))
        #expect(client.recentWriteRefusal() == "the database is read-only")
        time.advance(by: .seconds(1))
        #expect(client.recentWriteRefusal() == nil)
        await client.close()
    }

    @Test("prepared statements are planned per execution unless they ask for a cached plan, on the same connection")
    func planningPerStatement() async throws {
        let client = try await client(maxConnections: 1)
        let mode = "SELECT current_setting('plan_cache_mode'), $1::int"
        let other = "SELECT current_setting('plan_cache_mode'), $1::int + 0"
        func run(_ sql: String, _ planning: PostgresPlanning) async throws -> String {
            try await client.query(sql, [1], prepare: true, planning: planning).first!.decode(String.self, at: 0)
        }
        #expect(try await run(mode, .perExecution) == "force_custom_plan")
        #expect(try await run(other, .cached) == "force_generic_plan")
        #expect(try await run(other, .cached) == "force_generic_plan")
        #expect(try await run(mode, .perExecution) == "force_custom_plan")
        // The server's own counts: the cached statement ran on its generic plan, the other never did.
        let plans = try await client.query("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements").rows.map {
            (try $0.decode(String.self, at: 0), try $0.decode(Int.self, at: 1), try $0.decode(Int.self, at: 2))
        }
        #expect(plans.first { $0.0.contains("+ 0") }.map { $0.1 > 0 && $0.2 == 0 } == true)
        #expect(plans.first { !$0.0.contains("+ 0") }.map { $0.1 == 0 && $0.2 == 2 } == true)
        await client.close()
    }

    @Test("a prepared statement runs on an idle connection that prepared it, not on the one returned last; an unprepared one takes the last")
    func preparedStatementFindsItsConnection() async throws {
        let client = try await client(maxConnections: 2)
        let pid = "SELECT pg_backend_pid()"
        func backend(prepare: Bool) async throws -> Int32 {
            try await client.query(pid, prepare: prepare).first!.decode(Int32.self)
        }
        // Prepared on the second connection while the first is held; the first is returned last.
        let (held, prepared) = try await client.withConnection { session in
            (try await session.query(pid).first!.decode(Int32.self), try await backend(prepare: true))
        }
        #expect(held != prepared)
        #expect(try await backend(prepare: true) == prepared)
        #expect(try await backend(prepare: false) == prepared, "the connection returned last")
        await client.close()
    }

    @Test("sessions run without JIT (compiling took 50-100 ms of a 1 ms outcome statement on partitioned tables)")
    func noJIT() async throws {
        let client = try await client(maxConnections: 1)
        #expect(try await client.query("SELECT current_setting('jit')").first!.decode(String.self) == "off")
        await client.close()
    }

    @Test("sessions start no parallel workers, even where the planner costs a parallel plan cheaper (9 ms to start them for a 0.1 ms page)")
    func noParallelWorkers() async throws {
        let client = try await client(maxConnections: 1)
        let plan = try await client.withConnection { session in
            _ = try await session.query("CREATE TABLE parallel_probe AS SELECT g AS id FROM generate_series(1, 20000) g")
            _ = try await session.query("ANALYZE parallel_probe")
            // Workers cost nothing here: a session that may start them plans a Gather.
            for setting in ["parallel_setup_cost", "parallel_tuple_cost", "min_parallel_table_scan_size"] {
                _ = try await session.query("SET \(setting) = 0")
            }
            return try await session.query("EXPLAIN SELECT count(*) FROM parallel_probe").rows.map { try $0.decode(String.self) }
        }
        #expect(!plan.contains { $0.contains("Gather") }, "\(plan)")
        #expect(plan.contains { $0.contains("Seq Scan on parallel_probe") }, "\(plan)")
        await client.close()
    }

    @Test("a caller that cannot get a connection in time gets a pool timeout")
    func acquireTimeout() async throws {
        let client = try await client(maxConnections: 1, acquireTimeout: .milliseconds(200))
        try await client.withConnection { _ in
            let error = await #expect(throws: PostgresError.self) { try await client.query("SELECT 1") }
            #expect(error?.code == .poolTimeout)
        }
        // The connection came back and serves again.
        #expect(try await client.query("SELECT 7").first?.decode(Int.self, at: 0) == 7)
        await client.close()
    }

    @Test("a thrown error rolls the transaction back; success commits")
    func transactionRollback() async throws {
        let client = try await client()
        try await client.query("CREATE TABLE items (name text PRIMARY KEY)")
        struct Abort: Error {}
        await #expect(throws: Abort.self) {
            try await client.withTransaction { session in
                try await session.query("INSERT INTO items VALUES ($1)", ["rolled-back"])
                throw Abort()
            }
        }
        // A failing statement inside the transaction rolls back earlier statements too.
        await #expect(throws: PostgresError.self) {
            try await client.withTransaction { session in
                try await session.query("INSERT INTO items VALUES ($1)", ["also-rolled-back"])
                try await session.query("INSERT INTO items VALUES ($1)", ["also-rolled-back"])
            }
        }
        _ = try await client.withTransaction { session in
            try await session.query("INSERT INTO items VALUES ($1)", ["committed"])
        }
        let names = try await client.query("SELECT name FROM items ORDER BY name").rows.map { try $0.decode(String.self, at: 0) }
        #expect(names == ["committed"])
        await client.close()
    }

    @Test("bad SQL fails with the server's SQLSTATE, and the description leaves the SQL out")
    func badSQL() async throws {
        let client = try await client()
        let syntax = await #expect(throws: PostgresError.self) { try await client.query("SELEKT secret_column_name FROM x") }
        #expect(syntax?.code == .server)
        #expect(syntax?.sqlState == "42601")
        #expect(syntax?.description.contains("secret_column_name") == false)
        let missing = await #expect(throws: PostgresError.self) { try await client.query("SELECT * FROM no_such_table") }
        #expect(missing?.sqlState == "42P01")
        let unique = await #expect(throws: PostgresError.self) {
            try await client.query("CREATE TABLE u (v int PRIMARY KEY)")
            try await client.query("INSERT INTO u VALUES (1), (1)")
        }
        #expect(unique?.sqlState == "23505")
        // The pool stays usable after errors.
        #expect(try await client.query("SELECT 1").first?.decode(Int.self, at: 0) == 1)
        await client.close()
    }

    @Test("an unreachable server is a connection failure that reads as unavailable")
    func unreachableServer() async throws {
        let client = PostgresClient(
            configuration: .test(conninfo: "host=127.0.0.1 port=1 user=nobody password=hunter2 dbname=x connect_timeout=2"),
            logger: TestDatabase.logger
        )
        let error = await #expect(throws: PostgresError.self) { try await client.query("SELECT 1") }
        #expect(error?.code == .connectionFailed)
        #expect(error?.isUnavailable == true)
        #expect(error?.description.contains("hunter2") == false)
        #expect(client.openConnections == 0)
    }

    @Test("values round-trip through parameters and text results")
    func valueRoundTrip() async throws {
        let client = try await client()
        let uuid = UUID()
        let date = Date(timeIntervalSince1970: 1_795_000_000.123456)
        let data = Data([0, 1, 0xfe, 0xff, 0x10])
        let text = "emoji 🎉, quote \" backslash \\ tab \t newline \n done"
        let row = try await client.query(
            "SELECT $1::text, $2::bigint, $3::bool, $4::uuid, $5::timestamptz, $6::bytea, $7::text[], $8::text, $9::float8",
            [text, Int64.max, true, uuid, date, data, ["a", "b c", "d\"e", "f\\g", "é 🎉 \"ü\"", "NULL", ""], String?.none, 2.5]
        ).first!
        let (decodedText, big, flag, decodedUUID, decodedDate, decodedData, array, null, double) =
            try row.decode((String, Int64, Bool, UUID, Date, Data, [String], String?, Double).self)
        #expect(decodedText == text)
        #expect(big == Int64.max)
        #expect(flag)
        #expect(decodedUUID == uuid)
        #expect(abs(decodedDate.timeIntervalSince(date)) < 0.000_01)
        #expect(decodedData == data)
        #expect(array == ["a", "b c", "d\"e", "f\\g", "é 🎉 \"ü\"", "NULL", ""])
        #expect(null == nil)
        #expect(double == 2.5)
        let error = #expect(throws: PostgresError.self) { try row.decode(Int.self, at: 7) }
        #expect(error?.code == .decoding)
        await client.close()
    }

    @Test("arrays round-trip for the element types with specialized encodings and for one without (UUID)")
    func arrayRoundTrip() async throws {
        let client = try await client()
        let strings: [String?] = ["a", nil, "q\"b\\", "NULL", ""]
        let dates: [Date?] = [Date(timeIntervalSince1970: 1_795_000_000.25), nil]
        let uuids = [UUID(), UUID()]
        let row = try await client.query(
            """
            SELECT $1::text[], $2::bigint[], $3::bigint[], $4::bool[], $5::timestamptz[], $6::uuid[],
                   $1::text[] IS NOT DISTINCT FROM ARRAY['a', NULL, 'q"b\\', 'NULL', '']::text[], cardinality($7::int[])
            """,
            [strings, [1, -2, Int.max], [Int64.min, 0], [true, false], dates, uuids, [Int]()]
        ).first!
        let (decodedStrings, ints, bigs, flags, decodedDates, decodedUUIDs, sameOnServer, emptyCount) =
            try row.decode(([String?], [Int], [Int64], [Bool], [Date?], [UUID], Bool, Int).self)
        #expect(decodedStrings == strings)
        #expect(ints == [1, -2, Int.max])
        #expect(bigs == [Int64.min, 0])
        #expect(flags == [true, false])
        #expect(decodedDates.count == 2 && decodedDates[1] == nil)
        #expect(abs(try #require(decodedDates[0]).timeIntervalSince(try #require(dates[0]))) < 0.000_01)
        #expect(decodedUUIDs == uuids)
        #expect(sameOnServer)
        #expect(emptyCount == 0)
        await client.close()
    }
}

@Suite("Statement parameters in C")
struct ParameterCopyTests {
    @Test("a parameter whose copy fails is an error, not SQL NULL; NULL parameters stay NULL")
    func failedCopyThrows() throws {
        let copies = try LibPQConnection.cStrings(["a", nil, "b"])
        defer { for pointer in copies { free(pointer) } }
        #expect(copies.map { $0.map { String(cString: $0) } } == ["a", nil, "b"])
        // The second value cannot be copied (as strdup answers when memory runs out).
        #expect(throws: PostgresError.self) {
            _ = try LibPQConnection.cStrings(["a", "owner", nil]) { $0 == "owner" ? nil : strdup($0) }
        }
    }
}
