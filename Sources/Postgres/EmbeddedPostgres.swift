import Foundation
import Logging
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// A private PostgreSQL cluster kept in a directory of PushRelay's, for running without a configured
/// database and for tests.
///
/// The cluster lives in `<directory>/pgdata`, listens on 127.0.0.1 only (no unix socket, so several
/// clusters never collide), and requires a password that is generated at `initdb` time and kept in
/// `<directory>/password` (mode 0600). The port is chosen once and kept in
/// `<pgdata>/push-relay.conf`, so `pg_ctl -D <pgdata> start` by hand brings the server back where
/// the relay expects it. As root, the server runs as the `postgres` user, since PostgreSQL refuses
/// to run as root.
public final class EmbeddedPostgres: Sendable {
    /// Settings of an embedded cluster.
    public struct Configuration: Sendable {
        /// The directory holding the cluster, its password and its log.
        public var directory: String
        /// `false` turns off fsync and synchronous commit: faster, for throwaway test clusters only.
        public var durable: Bool
        /// Where `initdb` and `pg_ctl` are; found automatically when `nil`.
        public var binDirectory: String?
        /// The server's `max_connections`.
        public var maxConnections: Int

        public init(directory: String, durable: Bool = true, binDirectory: String? = nil, maxConnections: Int = 200) {
            self.directory = directory
            self.durable = durable
            self.binDirectory = binDirectory
            self.maxConnections = maxConnections
        }
    }

    /// The cluster's name for PushRelay's database and role.
    public static let databaseName = "pushrelay"

    public let configuration: Configuration
    private let logger: Logger

    public init(configuration: Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// The cluster's data directory.
    public var dataDirectory: String { path("pgdata") }
    /// Whether the cluster has been initialised (`start()` would reuse it rather than create it).
    public var exists: Bool { FileManager.default.fileExists(atPath: (dataDirectory as NSString).appendingPathComponent("PG_VERSION")) }
    private var passwordFile: String { path("password") }
    private var settingsFile: String { (dataDirectory as NSString).appendingPathComponent("push-relay.conf") }
    /// The server's log file.
    public var logFile: String { (dataDirectory as NSString).appendingPathComponent("postgres.log") }

    private func path(_ name: String) -> String { (configuration.directory as NSString).appendingPathComponent(name) }

    // MARK: Lifecycle

    /// Initialises the cluster if needed, starts it unless it already runs, makes sure the
    /// `pushrelay` database exists and returns a libpq connection string for it.
    ///
    /// - Returns: the connection string and whether this call started the server (the caller then
    ///   owns stopping it).
    public func start() async throws -> (conninfo: String, startedServer: Bool) {
        let bin = try binDirectory()
        try prepareDirectory()
        if !FileManager.default.fileExists(atPath: (dataDirectory as NSString).appendingPathComponent("PG_VERSION")) {
            try await initialise(bin: bin)
        }
        var started = false
        if try await !isRunning(bin: bin) {
            try writeSettings()
            let port = try port()
            logger.info("starting embedded PostgreSQL", metadata: ["db.data_directory": "\(dataDirectory)", "db.port": "\(port)"])
            let result = try await runAsServerUser(
                bin + "/pg_ctl",
                ["start", "-D", dataDirectory, "-w", "-t", "60", "-l", logFile, "-s"]
            )
            guard result.status == 0 else {
                throw PostgresError(
                    code: .embeddedServer,
                    message: "pg_ctl start failed (exit \(result.status)): \(result.output) — see \(logFile)"
                )
            }
            started = true
        }
        let conninfo = try conninfo(database: "postgres")
        try await ensureDatabase(conninfo: conninfo)
        return (try self.conninfo(database: Self.databaseName), started)
    }

    /// Stops the server. `fast` disconnects clients and shuts down cleanly; `immediate` is a crash.
    public func stop(immediate: Bool = false) async throws {
        let bin = try binDirectory()
        guard try await isRunning(bin: bin) else { return }
        let result = try await runAsServerUser(
            bin + "/pg_ctl",
            ["stop", "-D", dataDirectory, "-w", "-t", "60", "-s", "-m", immediate ? "immediate" : "fast"]
        )
        guard result.status == 0 else {
            throw PostgresError(code: .embeddedServer, message: "pg_ctl stop failed (exit \(result.status)): \(result.output)")
        }
        logger.info("stopped embedded PostgreSQL", metadata: ["db.data_directory": "\(dataDirectory)"])
    }

    /// Restarts the server on the same port (used by tests of reconnection).
    public func restart() async throws {
        try await stop()
        _ = try await start()
    }

    /// Sends SIGQUIT (immediate shutdown) to the postmaster without waiting. Safe to call from an
    /// `atexit` handler, where nothing asynchronous may run.
    ///
    /// - Returns: the postmaster's process id, or `nil` when no server ran.
    @discardableResult
    public func signalImmediateShutdown() -> pid_t? {
        guard let text = try? String(contentsOfFile: (dataDirectory as NSString).appendingPathComponent("postmaster.pid"), encoding: .utf8),
            let first = text.split(separator: "\n").first, let pid = pid_t(first)
        else { return nil }
        return kill(pid, SIGQUIT) == 0 ? pid : nil
    }

    /// Whether a server runs on the data directory.
    public func isRunning() async throws -> Bool { try await isRunning(bin: try binDirectory()) }

    private func isRunning(bin: String) async throws -> Bool {
        guard FileManager.default.fileExists(atPath: (dataDirectory as NSString).appendingPathComponent("PG_VERSION")) else { return false }
        return try await runAsServerUser(bin + "/pg_ctl", ["status", "-D", dataDirectory]).status == 0
    }

    // MARK: Set-up

    private func prepareDirectory() throws {
        let manager = FileManager.default
        try manager.createDirectory(atPath: configuration.directory, withIntermediateDirectories: true)
        // The server user must be able to reach pgdata; the password file stays private.
        chmod(configuration.directory, Self.runsAsRoot ? 0o711 : 0o700)
        if !manager.fileExists(atPath: dataDirectory) {
            try manager.createDirectory(atPath: dataDirectory, withIntermediateDirectories: false)
        }
        chmod(dataDirectory, 0o700)
        if Self.runsAsRoot {
            guard let user = getpwnam("postgres") else {
                throw PostgresError(code: .embeddedServer, message: "running as root needs a 'postgres' system user to run the embedded server")
            }
            chown(dataDirectory, user.pointee.pw_uid, user.pointee.pw_gid)
        }
    }

    private func initialise(bin: String) async throws {
        let password = Self.randomPassword()
        // Beside the data directory, not in it: initdb wants an empty directory.
        let initPasswordFile = path(".initdb-password")
        guard FileManager.default.createFile(atPath: initPasswordFile, contents: Data((password + "\n").utf8), attributes: [.posixPermissions: 0o600])
        else {
            throw PostgresError(code: .embeddedServer, message: "cannot write into \(dataDirectory)")
        }
        if Self.runsAsRoot, let user = getpwnam("postgres") {
            chown(initPasswordFile, user.pointee.pw_uid, user.pointee.pw_gid)
        }
        defer { try? FileManager.default.removeItem(atPath: initPasswordFile) }
        logger.info("initialising embedded PostgreSQL cluster", metadata: ["db.data_directory": "\(dataDirectory)"])
        let result = try await runAsServerUser(
            bin + "/initdb",
            [
                "-D", dataDirectory, "-U", Self.databaseName, "--pwfile=\(initPasswordFile)",
                "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-locale",
            ]
        )
        guard result.status == 0 else {
            throw PostgresError(code: .embeddedServer, message: "initdb failed (exit \(result.status)): \(result.output)")
        }
        guard FileManager.default.createFile(atPath: passwordFile, contents: Data(password.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw PostgresError(code: .embeddedServer, message: "cannot write \(passwordFile)")
        }
        let mainSettings = (dataDirectory as NSString).appendingPathComponent("postgresql.conf")
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: mainSettings))
        try handle.seekToEnd()
        try handle.write(
            contentsOf: Data("\n# Written by PushRelay: port and listen address live here.\ninclude_if_exists = 'push-relay.conf'\n".utf8)
        )
        try handle.close()
    }

    /// Writes the port (kept if still free) and the server settings PushRelay relies on.
    private func writeSettings() throws {
        var port = (try? self.port()) ?? 0
        if port == 0 || !Self.isPortFree(port) { port = try Self.freePort() }
        var settings = """
            # Managed by PushRelay; rewritten each time the relay starts this cluster.
            port = \(port)
            listen_addresses = '127.0.0.1'
            unix_socket_directories = ''
            max_connections = \(configuration.maxConnections)

            """
        if !configuration.durable {
            // Throwaway clusters also keep little WAL: a checkpoint every 64 MB instead of 1 GB,
            // so a test run's clusters fit a small temporary file system.
            settings += "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_wal_size = 64MB\nmin_wal_size = 32MB\n"
        }
        guard FileManager.default.createFile(atPath: settingsFile, contents: Data(settings.utf8), attributes: [.posixPermissions: 0o644]) else {
            throw PostgresError(code: .embeddedServer, message: "cannot write \(settingsFile)")
        }
    }

    /// The port recorded in the cluster's settings.
    public func port() throws -> Int {
        guard let text = try? String(contentsOfFile: settingsFile, encoding: .utf8) else {
            throw PostgresError(code: .embeddedServer, message: "the embedded cluster has no port yet")
        }
        for line in text.split(separator: "\n") where line.hasPrefix("port = ") {
            if let port = Int(line.dropFirst("port = ".count)) { return port }
        }
        throw PostgresError(code: .embeddedServer, message: "no port in \(settingsFile)")
    }

    /// A connection string for `database` on this cluster (which must have been started once).
    public func conninfo(database: String) throws -> String {
        guard let password = try? String(contentsOfFile: passwordFile, encoding: .utf8) else {
            throw PostgresError(code: .embeddedServer, message: "cannot read \(passwordFile)")
        }
        return "host=127.0.0.1 port=\(try port()) user=\(Self.databaseName) password=\(password) dbname=\(database) sslmode=disable"
    }

    private func ensureDatabase(conninfo: String) async throws {
        let connection = try LibPQConnection.connect(conninfo: conninfo, applicationName: "push-relay-embedded")
        let exists = try connection.query("SELECT 1 FROM pg_database WHERE datname = $1", [Self.databaseName])
        if exists.rows.isEmpty {
            _ = try connection.execute("CREATE DATABASE \(try connection.escapeIdentifier(Self.databaseName))")
        }
    }

    // MARK: Helpers

    private static var runsAsRoot: Bool { geteuid() == 0 }

    private static func randomPassword() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in String(format: "%016llx", generator.next() as UInt64) }.joined()
    }

    private func binDirectory() throws -> String {
        var candidates: [String] = []
        if let configured = configuration.binDirectory { candidates.append(configured) }
        if let fromEnvironment = ProcessInfo.processInfo.environment["PUSH_RELAY_PG_BIN"] { candidates.append(fromEnvironment) }
        let debianRoot = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: debianRoot)) ?? [])
            .compactMap(Int.init).sorted(by: >)
        candidates += versions.map { "\(debianRoot)/\($0)/bin" }
        candidates += ["/usr/local/pgsql/bin", "/usr/local/bin", "/usr/bin", "/opt/homebrew/bin"]
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate + "/initdb") {
            return candidate
        }
        throw PostgresError(
            code: .embeddedServer,
            message: "initdb was not found; install the PostgreSQL server (apt-get install postgresql) or set database.url"
        )
    }

    private static func isPortFree(_ port: Int) -> Bool { (try? bind(port: port)) != nil }

    /// A TCP port on 127.0.0.1 that is free now (the cluster's own port, and tests that start servers).
    ///
    /// Not `bind(0)`: the kernel answers that from its ephemeral range (`ip_local_port_range`), the
    /// range it also gives every outgoing connection's local port, so a port seen free here could be
    /// taken by any connection opened before the server binds it ("Address already in use"). The
    /// port comes from below that range instead, and this process never hands out one port twice.
    public static func freePort() throws -> Int {
        try PortPicker.shared.next { (try? bind(port: $0)) != nil }
    }

    /// Binds a TCP socket on 127.0.0.1 to `port` (0 = any) and returns the bound port.
    private static func bind(port: Int) throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw PostgresError(code: .embeddedServer, message: "socket() failed") }
        defer { close(fd) }
        // As PostgreSQL does when it listens: connections of a crashed server in TIME_WAIT must not
        // make its own port look taken, or a restart would move to another port.
        var reuse: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw PostgresError(code: .embeddedServer, message: "port \(port) is taken") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs a PostgreSQL program, as the `postgres` user when this process is root, and returns its
    /// exit status and combined output (kept short for error messages).
    ///
    /// Foundation's `Process` is not used: it learns that a child ended when every holder of an
    /// inherited socket has closed it, and the postmaster that `pg_ctl start` leaves behind holds it
    /// forever. Here the child writes to a file and is reaped with `waitpid` on a pool thread.
    private func runAsServerUser(_ executable: String, _ arguments: [String]) async throws -> (status: Int32, output: String) {
        var command = [executable] + arguments
        if Self.runsAsRoot {
            let runuser = ["/usr/sbin/runuser", "/sbin/runuser"].first { FileManager.default.isExecutableFile(atPath: $0) }
            guard let runuser else {
                throw PostgresError(code: .embeddedServer, message: "running as root needs runuser to start PostgreSQL as 'postgres'")
            }
            command = [runuser, "-u", "postgres", "--"] + command
        }
        let outputPath = NSTemporaryDirectory() + "push-relay-pgctl-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let fullCommand = command
        let status = try await NIOThreadPool.singleton.runIfActive { try Self.spawnAndWait(fullCommand, outputPath: outputPath) }
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        return (status, String(text.trimmingCharacters(in: .whitespacesAndNewlines).suffix(2000)))
    }

    private static func spawnAndWait(_ command: [String], outputPath: String) throws -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = command.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, environ)
        guard spawned == 0 else {
            throw PostgresError(code: .embeddedServer, message: "cannot run \(command[0]): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw PostgresError(code: .embeddedServer, message: "waitpid failed for \(command[0])") }
        }
        // WIFEXITED / WEXITSTATUS, which Swift does not import as macros.
        return status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }
}
