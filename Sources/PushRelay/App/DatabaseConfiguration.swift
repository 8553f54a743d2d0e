import Configuration

/// Where PushRelay's PostgreSQL is and how the pool behaves.
///
/// Keys, read from a reader scoped to `database`:
/// - `url` (string, secret, optional): libpq connection string or `postgresql://` URI. When absent,
///   PushRelay runs an embedded cluster in `<data.directory>/postgres`.
/// - `max_connections` (int, default 10): pool size.
/// - `acquire_timeout_seconds` (double, default 10): wait for a free connection before failing.
/// - `migrate_on_start` (bool, default true): apply pending migrations when `serve` starts.
/// - `migrations_directory` (string, optional): where the `NNNN_name.sql` files are; found
///   automatically next to the executable or in the working directory otherwise.
public struct DatabaseConfiguration: Sendable {
    public var url: String?
    public var maxConnections: Int
    public var acquireTimeout: Duration
    public var migrateOnStart: Bool
    public var migrationsDirectory: String?

    public init(config: ConfigReader) {
        self.url = config.string(forKey: "url", isSecret: true).flatMap { $0.isEmpty ? nil : $0 }
        self.maxConnections = config.int(forKey: "max_connections", default: 10)
        self.acquireTimeout = .milliseconds(Int(config.double(forKey: "acquire_timeout_seconds", default: 10) * 1000))
        self.migrateOnStart = config.bool(forKey: "migrate_on_start", default: true)
        self.migrationsDirectory = config.string(forKey: "migrations_directory")
    }
}

/// The HTTP listener.
///
/// Keys, read from a reader scoped to `http`:
/// - `host` (string, default `127.0.0.1`): address to bind; `0.0.0.0` for all interfaces.
/// - `port` (int, default 8080).
public struct HTTPConfiguration: Sendable {
    public var host: String
    public var port: Int

    public init(config: ConfigReader) {
        self.host = config.string(forKey: "host", default: "127.0.0.1")
        self.port = config.int(forKey: "port", default: 8080)
    }
}
