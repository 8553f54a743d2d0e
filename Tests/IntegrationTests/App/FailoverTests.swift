import Foundation
import Logging
import Postgres
import Synchronization
import TestSupport
import Testing

@testable import PushRelay

/// A PostgreSQL primary and a streaming standby made from it (`pg_basebackup -R`), both started by
/// the test, the standby synchronous (`synchronous_standby_names`), so a commit the relay
/// acknowledges is on both.
struct ReplicatedPostgres {
    let primary: EmbeddedPostgres
    let standby: EmbeddedPostgres
    let primaryPort: Int
    let standbyPort: Int
    let password: String

    static let bin = "/usr/lib/postgresql/15/bin"
    static let logger = Logger(label: "push-relay.failover-tests")

    /// A `database.url` naming both servers, for whichever accepts writes.
    var url: String {
        "postgresql://\(EmbeddedPostgres.databaseName):\(password)@127.0.0.1:\(primaryPort),127.0.0.1:\(standbyPort)/\(EmbeddedPostgres.databaseName)"
            + "?target_session_attrs=read-write&connect_timeout=2&sslmode=disable"
    }

    static func start() async throws -> ReplicatedPostgres {
        let root = (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-failover-\(UUID().uuidString.prefix(8))")
        let primary = EmbeddedPostgres(configuration: .init(directory: root + "/primary", durable: true, maxConnections: 100), logger: logger)
        let (primaryConninfo, _) = try await primary.start()
        let password = try String(contentsOfFile: root + "/primary/password", encoding: .utf8)
        let primaryPort = try primary.port()

        // The standby: a base backup with the settings to follow the primary (-R), named standby1.
        let standbyDirectory = root + "/standby"
        try FileManager.default.createDirectory(atPath: standbyDirectory + "/pgdata", withIntermediateDirectories: true)
        chmod(standbyDirectory, 0o711)
        chmod(standbyDirectory + "/pgdata", 0o700)
        if let user = getpwnam("postgres"), geteuid() == 0 { chown(standbyDirectory + "/pgdata", user.pointee.pw_uid, user.pointee.pw_gid) }
        try FileManager.default.copyItem(atPath: root + "/primary/password", toPath: standbyDirectory + "/password")
        try await run(
            bin + "/pg_basebackup",
            [
                "-D", standbyDirectory + "/pgdata", "-R", "-X", "stream", "-c", "fast",
                "-d", "host=127.0.0.1 port=\(primaryPort) user=\(EmbeddedPostgres.databaseName) password=\(password) application_name=standby1",
            ]
        )
        // Synchronous from now on: a commit waits until standby1 has it.
        let admin = PostgresClient(configuration: .init(conninfo: primaryConninfo, maxConnections: 1), logger: logger)
        _ = try await admin.query("ALTER SYSTEM SET synchronous_standby_names = 'standby1'")
        _ = try await admin.query("ALTER SYSTEM SET synchronous_commit = 'on'")
        _ = try await admin.query("SELECT pg_reload_conf()")

        let standby = EmbeddedPostgres(configuration: .init(directory: standbyDirectory, durable: true, maxConnections: 100), logger: logger)
        _ = try await standby.start()
        let replicated = ReplicatedPostgres(
            primary: primary,
            standby: standby,
            primaryPort: primaryPort,
            standbyPort: try standby.port(),
            password: password
        )
        let synchronous = await eventually {
            (try? await admin.query("SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'").rows.first?.decode(
                String.self,
                at: 0
            )) == "sync"
        }
        await admin.close()
        guard synchronous else { throw PostgresError(code: .embeddedServer, message: "the standby did not become synchronous") }
        return replicated
    }

    /// Promotes the standby to primary.
    func promote() async throws {
        try await Self.run(Self.bin + "/pg_ctl", ["promote", "-w", "-D", standby.dataDirectory])
    }

    func shutdown() async {
        try? await primary.stop(immediate: true)
        try? await standby.stop(immediate: true)
    }

    /// Runs a PostgreSQL tool as the server's user (`postgres` when the tests run as root).
    static func run(_ executable: String, _ arguments: [String]) async throws {
        let run =
            geteuid() == 0
            ? try await ChildProcess.run("/usr/sbin/runuser", ["-u", "postgres", "--", executable] + arguments)
            : try await ChildProcess.run(executable, arguments)
        guard run.status == 0 else {
            throw PostgresError(code: .embeddedServer, message: "\(executable) failed (\(run.status)): \(run.output)\(run.error)")
        }
    }
}

@Suite("PostgreSQL failover under load", .serialized)
struct FailoverTests {
    /// What one webhook got.
    struct Outcome: Sendable {
        var status: Int
        var retryAfter: String?
        var notificationID: Int?
        var at: ContinuousClock.Instant
    }

    /// What the load saw, shared by its tasks.
    final class Record: Sendable {
        let outcomes = Mutex<[Outcome]>([])
        let readiness = Mutex<[(ContinuousClock.Instant, Int)]>([])
        private let done = Atomic<Bool>(false)
        var stopped: Bool { done.load(ordering: .relaxed) }
        func stop() { done.store(true, ordering: .relaxed) }
    }

    @Test(
        "the primary stops hard under load, the standby is promoted: the relay reconnects by itself, /ready is 503 then 200 within 10 s, webhooks get 503 with Retry-After and never 500, nothing acknowledged is lost"
    )
    func failover() async throws {
        let database = try await ReplicatedPostgres.start()
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-failover-relay-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let configFile = directory + "/push-relay.yaml"
        try """
        database:
          url: "\(database.url)"
          max_connections: 4
        delivery:
          enabled: false
        apps:
          - id: support
            webhook_secrets: ["\(TestApp.webhookSecret)"]
        """.write(toFile: configFile, atomically: true, encoding: .utf8)
        let relay = try await RelayProcess.start(configFile: configFile, port: try EmbeddedPostgres.freePort(), log: directory + "/relay.log")
        let port = relay.port
        let record = Record()
        let path = "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)"

        // A steady load on four connections, and /ready every 100 ms.
        let load = Task {
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<4 {
                    group.addTask {
                        var number = 0
                        while !record.stopped {
                            try? await RawConnection.with(port: port) { connection in
                                while !record.stopped {
                                    number += 1
                                    let body = Array(webhook(devices: [(apnsToken(), "ios")], ticket: "\(worker)-\(number)").utf8)
                                    try await connection.send(
                                        RawConnection.request("POST", path, headers: [("Content-Type", "application/json")], body: body)
                                    )
                                    guard let answer = try await connection.next() else { return }
                                    let id =
                                        (try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["notification_id"] as? Int
                                    record.outcomes.withLock {
                                        $0.append(
                                            Outcome(status: answer.status, retryAfter: answer.header("Retry-After"), notificationID: id, at: .now)
                                        )
                                    }
                                    try await Task.sleep(for: .milliseconds(20))
                                }
                            }
                        }
                    }
                }
                group.addTask {
                    while !record.stopped {
                        let status = (try? await relay.request("GET", "/ready").status) ?? 0
                        record.readiness.withLock { $0.append((.now, status)) }
                        try? await Task.sleep(for: .milliseconds(100))
                    }
                }
            }
        }

        try await Task.sleep(for: .seconds(2))
        try await database.primary.stop(immediate: true)
        let stopped = ContinuousClock.now
        try await Task.sleep(for: .seconds(2))
        try await database.promote()
        let promoted = ContinuousClock.now
        // Until ready again, then two more seconds of load.
        _ = await eventually {
            record.readiness.withLock { $0.contains { $0.0 > promoted && $0.1 == 200 } }
        }
        try await Task.sleep(for: .seconds(2))
        record.stop()
        await load.value

        let all = record.outcomes.withLock { $0 }
        let ready = record.readiness.withLock { $0 }
        let acknowledged = all.compactMap { $0.status == 202 ? $0.notificationID : nil }
        let statuses = Dictionary(grouping: all, by: \.status).mapValues(\.count)
        #expect(relay.process.isRunning)
        #expect(!all.contains { $0.status >= 500 && $0.status != 503 }, "statuses: \(statuses)")
        #expect(all.filter { $0.status == 503 }.allSatisfy { $0.retryAfter != nil })
        #expect(all.contains { $0.status == 202 && $0.at < stopped } && all.contains { $0.status == 202 && $0.at > promoted })
        #expect(ready.contains { $0.0 > stopped && $0.0 < promoted && $0.1 == 503 }, "/ready was never 503 while no primary ran")
        #expect(ready.contains { $0.0 > promoted && $0.1 == 200 }, "never ready again after the promotion")

        // Every acknowledged webhook is on the promoted server.
        let client = PostgresClient(
            configuration: .init(conninfo: try database.standby.conninfo(database: EmbeddedPostgres.databaseName), maxConnections: 1),
            logger: ReplicatedPostgres.logger
        )
        let found = try await client.query("SELECT count(*) FROM notifications WHERE id = ANY($1)", [acknowledged.map(Int64.init)]).rows.first?
            .decode(Int.self, at: 0)
        #expect(found == acknowledged.count, "\(acknowledged.count) acknowledged, \(found ?? -1) on the promoted server")
        print(
            "failover: statuses \(statuses); \(acknowledged.count) acknowledged, \(found ?? -1) found after the promotion"
        )
        await client.close()
        await relay.stop()
        await database.shutdown()
    }
}
