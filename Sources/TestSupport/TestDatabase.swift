import Foundation
import Logging
import Postgres
import Synchronization

/// Real PostgreSQL servers for the test suites.
///
/// By default the first caller starts one throwaway embedded cluster for the whole test process
/// (non-durable settings, a temporary directory) and every test gets a database of its own on it.
/// `PUSH_RELAY_TEST_DATABASE_URL` points the suites at an existing server instead; its role must
/// be allowed to create databases. Clusters started here receive an immediate shutdown when the
/// process exits.
public enum TestDatabase {
    /// A logger for test infrastructure, quiet unless `LOG_LEVEL` says otherwise.
    public static let logger: Logger = {
        var logger = Logger(label: "push-relay.tests")
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .warning
        return logger
    }()

    private static let shared = SharedServer()

    /// Creates an empty database with a unique name and returns a connection string for it.
    public static func makeDatabase() async throws -> String {
        let admin = try await shared.adminConninfo()
        let name = "test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let client = PostgresClient(configuration: .init(conninfo: admin, maxConnections: 1), logger: logger)
        // The name is generated above from hex digits only, so it is a safe identifier.
        _ = try await client.withConnection { try await $0.execute("CREATE DATABASE \(name)") }
        await client.close()
        return admin + " dbname=\(name)"
    }

    /// Starts a cluster of its own, for tests that stop or restart the server. The caller stops it.
    ///
    /// - Parameter durable: keep fsync and synchronous commit on. A test that crashes the server
    ///   (immediate stop) and expects its committed rows afterwards needs this; without it the last
    ///   commits may not have reached the WAL yet.
    public static func makeCluster(durable: Bool = false) async throws -> (cluster: EmbeddedPostgres, conninfo: String) {
        // Suites run in parallel, each relay with its pool and listener connections: room for all.
        let cluster = EmbeddedPostgres(
            configuration: .init(directory: temporaryDirectory(), durable: durable, maxConnections: 600),
            logger: logger
        )
        let (conninfo, _) = try await cluster.start()
        registerForExit(cluster)
        return (cluster, conninfo)
    }

    static func temporaryDirectory() -> String {
        (clusterRoot as NSString).appendingPathComponent("push-relay-test-\(getpid())-\(UUID().uuidString.prefix(8))")
    }

    /// Where test clusters live: `PUSH_RELAY_TEST_DIRECTORY` if set, else `/dev/shm` when it is a
    /// writable file system with at least 2 GiB free, else the temporary directory. Clusters in
    /// memory cost no disk (a full disk makes PostgreSQL PANIC mid-run) and skip its latency.
    static let clusterRoot: String = {
        if let configured = ProcessInfo.processInfo.environment["PUSH_RELAY_TEST_DIRECTORY"], !configured.isEmpty {
            return configured
        }
        let memory = "/dev/shm"
        var stats = statvfs()
        if access(memory, W_OK | X_OK) == 0, statvfs(memory, &stats) == 0,
            UInt64(stats.f_bavail) * UInt64(stats.f_frsize) >= 2 << 30
        {
            return memory
        }
        return NSTemporaryDirectory()
    }()

    private static let clusters = Mutex<[EmbeddedPostgres]>([])

    static func registerForExit(_ cluster: EmbeddedPostgres) {
        let first = clusters.withLock { list in
            list.append(cluster)
            return list.count == 1
        }
        if first {
            removeAbandonedClusters()
            atexit {
                let all = TestDatabase.clusters.withLock { $0 }
                let servers = all.compactMap { $0.signalImmediateShutdown() }
                // Give the servers up to 5 s to go, then remove their directories: the clusters
                // are throwaway, and left behind in /dev/shm they would hold memory until reboot.
                for _ in 0..<100 where servers.contains(where: { kill($0, 0) == 0 }) { usleep(50_000) }
                for cluster in all { try? FileManager.default.removeItem(atPath: cluster.configuration.directory) }
            }
        }
    }
}

extension TestDatabase {
    /// Removes the cluster directories of test processes that are gone without their exit
    /// handler (killed, crashed): `push-relay-test-<pid>-…` whose pid no longer runs. Their servers
    /// were stopped by whoever reaped the process (scripts/test/reap.py); in /dev/shm the files
    /// would hold memory until reboot.
    static func removeAbandonedClusters() {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: clusterRoot) else { return }
        for name in names where name.hasPrefix("push-relay-test-") {
            guard let pid = Int32(name.dropFirst("push-relay-test-".count).prefix { $0 != "-" }), pid != getpid() else { continue }
            // ESRCH: no such process. A live process (or one of another user, EPERM) keeps its directory.
            guard kill(pid, 0) != 0, errno == ESRCH else { continue }
            let directory = (clusterRoot as NSString).appendingPathComponent(name)
            // Only when no server runs on it any more: postmaster.pid gone, or naming a dead process.
            if let text = try? String(contentsOfFile: directory + "/pgdata/postmaster.pid", encoding: .utf8),
                let server = text.split(separator: "\n").first.flatMap({ Int32($0) }), kill(server, 0) == 0
            {
                continue
            }
            try? FileManager.default.removeItem(atPath: directory)
        }
    }
}

/// Starts the shared cluster once, however many suites ask at the same time.
private actor SharedServer {
    private var starting: Task<String, any Error>?

    func adminConninfo() async throws -> String {
        if let starting { return try await starting.value }
        let task = Task<String, any Error> {
            if let url = ProcessInfo.processInfo.environment["PUSH_RELAY_TEST_DATABASE_URL"], !url.isEmpty {
                return url
            }
            let (cluster, _) = try await TestDatabase.makeCluster()
            return try cluster.conninfo(database: "postgres")
        }
        starting = task
        return try await task.value
    }
}

extension PostgresClientConfiguration {
    /// A test's pool: waiting for a free connection, opening one and running a statement end only
    /// at the hang ceiling, unless the test passes its own `acquireTimeout`. The defaults (10 s, 5 s
    /// and 15 s) decide the outcome on a loaded machine: a 100,000-row COPY in a debug build took
    /// over 15 s under four busy loops.
    public static func test(
        conninfo: String,
        maxConnections: Int = 10,
        acquireTimeout: Duration = hangCeiling,
        applicationName: String = "push-relay"
    ) -> PostgresClientConfiguration {
        let seconds = Int(hangCeiling.components.seconds)
        return PostgresClientConfiguration(
            conninfo: conninfo,
            maxConnections: maxConnections,
            acquireTimeout: acquireTimeout,
            applicationName: applicationName,
            connection: PostgresConnectionSettings(connectTimeoutSeconds: seconds, statementTimeoutMilliseconds: seconds * 1000)
        )
    }
}
