import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Postgres
import Synchronization
import TestSupport
import Testing

@testable import PushRelay

/// A database that stops answering, or answers "not now", costs the helpdesk a 503 with
/// `Retry-After` and nothing else: no hang, no 500, no acknowledged webhook lost.
@Suite("Database faults: a frozen, read-only or full database")
struct DatabaseFaultTests {
    static let url = "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)"
    static let json: HTTPFields = [.contentType: "application/json"]

    static func setting(_ value: Int) -> ConfigValue { .init(.int(value), isSecret: false) }

    struct Answer: Sendable {
        var status: Int
        var retryAfter: String?
        var code: String?
        var notificationID: Int64?
        var sent: ContinuousClock.Instant
        var answered: ContinuousClock.Instant
    }

    struct Accepted: Decodable { var notification_id: Int64 }

    @Test(
        "a database that stops answering without closing: 503 with Retry-After, unread polls no longer from the cache, 202 again after it answers, nothing lost"
    )
    func frozenDatabase() async throws {
        let direct = try await TestDatabase.makeDatabase()
        let port = try #require(direct.split(separator: " ").last(where: { $0.hasPrefix("port=") }).flatMap { Int($0.dropFirst(5)) })
        let proxy = try FreezableProxy(targetPort: port)
        defer { proxy.stop() }
        let test = try await TestApp.make(conninfo: direct + " port=\(proxy.port)")
        let app = try await test.application(extra: [
            "database.statement_timeout_ms": Self.setting(1000),
            "database.acquire_timeout_seconds": Self.setting(2),
            "database.connect_timeout_seconds": Self.setting(2),
            "database.listener_probe_seconds": Self.setting(1),
        ])
        let clock = ContinuousClock()
        let token = try await TestApp.userToken("alice")
        try await app.testLive { client in
            let port = try #require(client.port)
            // An unread poll answered from the cache while the listener is connected.
            func poll(_ etag: String?) async throws -> (status: Int, etag: String?) {
                var headers: HTTPFields = [.authorization: "Bearer \(token)"]
                if let etag { headers[.ifNoneMatch] = etag }
                let response = try await client.execute(uri: "/v1/apps/support/users/alice/unread", method: .get, headers: headers)
                return (Int(response.status.code), response.headers[.eTag])
            }
            let etag = try #require(try await poll(nil).etag)
            #expect(try await poll(etag).status == 304)

            final class Load: Sendable {
                let answers = Mutex<[Answer]>([])
                let stop = Atomic<Bool>(false)
            }
            let load = Load()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<4 {
                    group.addTask {
                        var index = 0
                        while !load.stop.load(ordering: .relaxed) {
                            index += 1
                            let body = webhook(devices: [(apnsToken(), "ios")], ticket: "w\(worker)-\(index)")
                            // A connection of its own per request: the test client's one connection
                            // would queue the workers' requests behind each other.
                            let sent = clock.now
                            let request = RawHTTP.request("POST", Self.url, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
                            guard let response = try await RawHTTP.send(port: port, request) else {
                                // No answer before the hang ceiling: recorded as status 0, which fails below with when it was sent.
                                load.answers.withLock {
                                    $0.append(Answer(status: 0, retryAfter: nil, code: nil, notificationID: nil, sent: sent, answered: clock.now))
                                }
                                continue
                            }
                            let id = try? JSONDecoder().decode(Accepted.self, from: Data(response.body)).notification_id
                            let code = (try? JSONDecoder().decode(ErrorEnvelope.self, from: Data(response.body)))?.error.code
                            load.answers.withLock {
                                $0.append(
                                    Answer(
                                        status: response.status,
                                        retryAfter: response.header("Retry-After"),
                                        code: code,
                                        notificationID: id,
                                        sent: sent,
                                        answered: clock.now
                                    )
                                )
                            }
                            if response.status != 202 { try await Task.sleep(for: .milliseconds(100)) }
                        }
                    }
                }
                // Some webhooks stored before the freeze.
                #expect(await eventually { load.answers.withLock { $0.contains { $0.status == 202 } } })
                proxy.freeze()
                let frozeAt = clock.now
                // Each step waits for what it names; the ceilings only bound a hang. How fast each
                // comes is a benchmark's business, not this test's.
                let refused = await eventually {
                    load.answers.withLock { $0.contains { $0.status == 503 && $0.sent >= frozeAt } }
                }
                #expect(refused, "no 503 for a webhook sent during the freeze")
                // The cache stops answering once the listener finds the server gone.
                let distrusted = try await eventually { try await poll(etag).status != 304 }
                #expect(distrusted, "unread polls were still answered 304 from the cache during the freeze")
                proxy.thaw()
                let thawedAt = clock.now
                let acceptedAgain = await eventually {
                    load.answers.withLock { $0.contains { $0.status == 202 && $0.sent >= thawedAt } }
                }
                #expect(acceptedAgain, "no webhook sent after the thaw was accepted")
                load.stop.store(true, ordering: .relaxed)
                try await group.waitForAll()

                let all = load.answers.withLock { $0 }
                // Everything is either stored or refused as retryable; nothing else, and nothing
                // left without an answer (status 0: the client's 15 s ceiling, a hang).
                for answer in all {
                    #expect(
                        answer.status == 202 || (answer.status == 503 && answer.retryAfter != nil && answer.code == "database_unavailable"),
                        "a webhook sent \(answer.sent - frozeAt) after the freeze: \(answer.status) \(answer.code ?? "")"
                    )
                }
                // A webhook sent during the freeze cannot be committed before the thaw, so none is
                // acknowledged before it.
                #expect(all.filter { $0.status == 202 && $0.sent >= frozeAt && $0.answered < thawedAt }.isEmpty)

                // Every acknowledged webhook is in the database.
                let acknowledged = all.compactMap(\.notificationID)
                let directClient = PostgresClient(configuration: .init(conninfo: direct, maxConnections: 1), logger: TestDatabase.logger)
                defer { Task { await directClient.close() } }
                let stored = try await directClient.query(
                    "SELECT count(*) FROM notifications WHERE id = ANY($1::bigint[])",
                    ["{" + acknowledged.map(String.init).joined(separator: ",") + "}"]
                ).rows.first!.decode(Int.self, at: 0)
                #expect(acknowledged.count >= 2)
                #expect(stored == acknowledged.count)
            }
            // The listener is back: an unchanged poll is answered from the cache again.
            var cachedAgain = false
            for _ in 0..<50 where !cachedAgain {
                let fresh = try await poll(nil)
                cachedAgain = try await poll(fresh.etag).status == 304 && fresh.status == 200
                if !cachedAgain { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(cachedAgain)
        }
    }

    @Test("a read-only database: webhooks and API calls are 503 database_unavailable with Retry-After, /ready is not ready")
    func readOnlyDatabase() async throws {
        let test = try await TestApp.make()
        let app = try await test.application()
        let database = try #require(test.conninfo.split(separator: " ").last(where: { $0.hasPrefix("dbname=") })?.dropFirst(7))
        // The schema exists once the app is built.
        let key = try await test.key(app: "support")
        @Sendable func setReadOnly(_ on: Bool) async throws {
            try await test.client.withConnection { session in
                try await session.execute("ALTER DATABASE \(database) SET default_transaction_read_only = \(on ? "on" : "off")")
                // The relay's open connections keep their setting: end them so new ones read it.
                try await session.query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            }
        }
        try await app.testLive { client in
            #expect(try await client.execute(uri: "/ready", method: .get).status == .ok)
            try await setReadOnly(true)
            let body = webhook(devices: [(apnsToken(), "ios")])
            var refused: TestResponse?
            for _ in 0..<20 {
                let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(body))
                if response.status != .serviceUnavailable || response.errorBody?.code != "database_unavailable" {
                    // A connection the terminate missed may still be writable; try again.
                    #expect(response.status == .accepted || response.status == .serviceUnavailable, "\(response.status)")
                    try await Task.sleep(for: .milliseconds(100))
                    continue
                }
                refused = response
                break
            }
            let response = try #require(refused)
            #expect(response.headers[.retryAfter] != nil)
            let device = try await client.execute(
                uri: "/v1/apps/support/devices/\(apnsToken())",
                method: .put,
                headers: [.authorization: "Bearer \(key)", .contentType: "application/json"],
                body: jsonBody(#"{"platform":"ios"}"#)
            )
            #expect(device.status == .serviceUnavailable)
            #expect(device.errorBody?.code == "database_unavailable")
            #expect(device.headers[.retryAfter] != nil)
            // /ready answers from a check at most a second old: the read-only database shows within it.
            var ready = try await client.execute(uri: "/ready", method: .get)
            #expect(
                try await eventually {
                    ready = try await client.execute(uri: "/ready", method: .get)
                    return ready.status == .serviceUnavailable
                }
            )
            #expect(ready.errorBody?.message.contains("read-only") == true)

            try await setReadOnly(false)
            var accepted = false
            for _ in 0..<50 where !accepted {
                accepted = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(body)).status == .accepted
                if !accepted { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(accepted)
        }
    }

    static let canMountTmpfs: Bool = getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/bin/mount")

    @Test(
        "a full disk under the relay's tables: webhooks are 503 database_unavailable with Retry-After, /ready is not ready",
        .enabled(if: canMountTmpfs, "needs root to mount a small tmpfs for a tablespace")
    )
    func fullDisk() async throws {
        // A cluster of its own: PostgreSQL's checkpointer may PANIC over files of a tablespace that
        // filled up and went away, restarting every connection of the cluster it belongs to.
        let (cluster, conninfo) = try await TestDatabase.makeCluster()
        let directory = "/tmp/push-relay-tiny-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try await Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=3M", "tmpfs", directory])
        do {
            try await Self.fillAndRecover(conninfo: conninfo, directory: directory)
        } catch {
            try? await Self.run("/bin/umount", ["-l", directory])
            throw error
        }
        try? await Self.run("/bin/umount", ["-l", directory])
        try? FileManager.default.removeItem(atPath: directory)
        // Immediately: a shutdown checkpoint has nothing to save in a throwaway cluster.
        try await cluster.stop(immediate: true)
    }

    /// ``fullDisk()`` once the tablespace's directory is mounted: the relay's tables move there, it
    /// fills up, a webhook is refused, and `/ready` says why until the refusal's window has passed
    /// on the relay's clock (which the test moves: on a loaded machine the time between two
    /// requests is anything).
    static func fillAndRecover(conninfo: String, directory: String) async throws {
        let test = try await TestApp.make(conninfo: conninfo)
        let time = ManualTime()
        let app = try await test.application(clock: RelayClock(time))
        try await Self.run("/bin/chown", ["postgres:postgres", directory])
        let space = "tiny_\(UUID().uuidString.prefix(8).lowercased())"
        try await test.client.withConnection { session in
            try await session.execute("CREATE TABLESPACE \(space) LOCATION '\(directory)'")
            for table in ["notifications", "deliveries", "devices", "unread_counters"] {
                _ = try? await session.execute("ALTER TABLE \(table) SET TABLESPACE \(space)")
            }
            try await session.execute("CREATE TABLE filler (junk text) TABLESPACE \(space)")
            // Fill the tablespace until the server refuses.
            for _ in 0..<200 {
                do {
                    try await session.execute("INSERT INTO filler SELECT repeat(md5(random()::text), 30) FROM generate_series(1, 2000)")
                } catch let error as PostgresError where error.sqlState == "53100" {
                    return
                }
            }
            Issue.record("the tablespace never filled up")
        }
        try await app.testLive { client in
            let body = webhook(devices: [(apnsToken(), "ios")], body: String(repeating: "x", count: 20_000))
            let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(body))
            #expect(response.status == .serviceUnavailable)
            #expect(response.errorBody?.code == "database_unavailable")
            #expect(response.headers[.retryAfter] != nil)
            let ready = try await client.execute(uri: "/ready", method: .get)
            #expect(ready.status == .serviceUnavailable)
            #expect(ready.errorBody?.message.contains("disk is full") == true, "\(ready.errorBody?.message ?? "")")
            // The refusal is reported for 15 s after the last refused write (docs/runbooks.md).
            time.advance(by: .seconds(14))
            #expect(try await client.execute(uri: "/ready", method: .get).errorBody?.message.contains("disk is full") == true)
            time.advance(by: .seconds(1))
            #expect(try await client.execute(uri: "/ready", method: .get).status == .ok)

            _ = try await test.client.withConnection { try await $0.execute("DROP TABLE filler") }
            let again = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(body))
            #expect(again.status == .accepted)
        }
        await test.client.close()
    }

    /// Runs `executable` to its end (ChildProcess: posix_spawn and waitpid); throws unless it exits 0.
    static func run(_ executable: String, _ arguments: [String]) async throws {
        let run = try await ChildProcess.run(executable, arguments)
        guard run.status == 0 else {
            throw PostgresError(code: .server, message: "\(executable) \(arguments.joined(separator: " ")) exited \(run.status): \(run.error)")
        }
    }
}
