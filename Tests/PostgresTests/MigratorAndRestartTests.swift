import Foundation
import Postgres
import TestSupport
import Testing

@Suite("Migrator and server restarts")
struct MigratorAndRestartTests {
    static let migrations = [
        Migration(version: 1, name: "first", sql: "CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a VALUES (1);"),
        Migration(version: 2, name: "second", sql: "CREATE TABLE b (id int PRIMARY KEY);"),
        Migration(version: 3, name: "third", sql: "ALTER TABLE b ADD COLUMN note text;"),
    ]

    @Test("migrating twice applies each migration once; the second run is a no-op")
    func idempotent() async throws {
        let conninfo = try await TestDatabase.makeDatabase()
        let client = PostgresClient(configuration: .test(conninfo: conninfo), logger: TestDatabase.logger)
        let migrator = Migrator(migrations: Self.migrations, logger: TestDatabase.logger)
        #expect(try await migrator.appliedVersion(client) == 0)
        #expect(try await migrator.migrate(client).map(\.version) == [1, 2, 3])
        #expect(try await migrator.migrate(client).isEmpty)
        #expect(try await migrator.appliedVersion(client) == 3)
        #expect(try await client.query("SELECT count(*) FROM a").first?.decode(Int.self, at: 0) == 1)
        await client.close()
    }

    @Test("two instances migrating at once apply each migration exactly once")
    func concurrentStart() async throws {
        let conninfo = try await TestDatabase.makeDatabase()
        let slow = Self.migrations + [Migration(version: 4, name: "slow", sql: "SELECT pg_sleep(0.3); CREATE TABLE c (id int);")]
        let applied = try await withThrowingTaskGroup(of: [Int].self) { group in
            for _ in 0..<3 {
                group.addTask {
                    let client = PostgresClient(configuration: .test(conninfo: conninfo), logger: TestDatabase.logger)
                    let result = try await Migrator(migrations: slow, logger: TestDatabase.logger).migrate(client).map(\.version)
                    await client.close()
                    return result
                }
            }
            var all: [Int] = []
            for try await versions in group { all += versions }
            return all
        }
        #expect(applied.sorted() == [1, 2, 3, 4])
        let client = PostgresClient(configuration: .test(conninfo: conninfo), logger: TestDatabase.logger)
        #expect(try await client.query("SELECT count(*) FROM schema_migrations").first?.decode(Int.self, at: 0) == 4)
        #expect(try await client.query("SELECT count(*) FROM a").first?.decode(Int.self, at: 0) == 1)
        await client.close()
    }

    @Test("a failing migration rolls back and is not recorded; a changed one is refused")
    func failingAndChanged() async throws {
        let conninfo = try await TestDatabase.makeDatabase()
        let client = PostgresClient(configuration: .test(conninfo: conninfo), logger: TestDatabase.logger)
        let broken = [
            Self.migrations[0],
            Migration(version: 2, name: "broken", sql: "CREATE TABLE half (id int); SELECT * FROM missing_table;"),
        ]
        let error = await #expect(throws: PostgresError.self) {
            try await Migrator(migrations: broken, logger: TestDatabase.logger).migrate(client)
        }
        #expect(error?.code == .migration)
        #expect(error?.sqlState == "42P01")
        #expect(try await client.query("SELECT to_regclass('half') IS NULL").first?.decode(Bool.self, at: 0) == true)
        #expect(try await Migrator(migrations: [], logger: TestDatabase.logger).appliedVersion(client) == 1)

        var changed = Self.migrations
        changed[0].sql += " -- edited"
        let refused = await #expect(throws: PostgresError.self) {
            try await Migrator(migrations: changed, logger: TestDatabase.logger).migrate(client)
        }
        #expect(refused?.message.contains("0001_first") == true)
        await client.close()
    }

    @Test("loading reads NNNN_name.sql files in order and rejects duplicate numbers")
    func loading() throws {
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "SELECT 2;".write(toFile: directory + "/0002_later.sql", atomically: true, encoding: .utf8)
        try "SELECT 1;".write(toFile: directory + "/0001_initial.sql", atomically: true, encoding: .utf8)
        try "notes".write(toFile: directory + "/README.md", atomically: true, encoding: .utf8)
        let loaded = try Migrator.load(directory: directory)
        #expect(loaded.map(\.label) == ["0001_initial", "0002_later"])
        try "SELECT 3;".write(toFile: directory + "/0002_clash.sql", atomically: true, encoding: .utf8)
        #expect(throws: PostgresError.self) { try Migrator.load(directory: directory) }
    }

    @Test("the pool reconnects by itself after pg_ctl restart")
    func reconnectAfterRestart() async throws {
        let (cluster, conninfo) = try await TestDatabase.makeCluster()
        let client = PostgresClient(configuration: .test(conninfo: conninfo, maxConnections: 2), logger: TestDatabase.logger)
        let before = try await client.query("SELECT pg_backend_pid()").first!.decode(Int32.self, at: 0)

        try await cluster.stop()
        let down = await #expect(throws: PostgresError.self) { try await client.query("SELECT 1") }
        #expect(down?.isUnavailable == true)

        try await cluster.restart()
        let after = try await client.query("SELECT pg_backend_pid()").first!.decode(Int32.self, at: 0)
        #expect(after != before)
        await client.close()
        try await cluster.stop()
    }
}
