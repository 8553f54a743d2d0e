import Configuration
import Postgres

/// Where PushRelay's PostgreSQL is and how the pool behaves.
///
/// Keys, read from a reader scoped to `database`:
/// - `url` (string, secret, optional): libpq connection string or `postgresql://` URI. When absent,
///   PushRelay runs an embedded cluster in `<data.directory>/postgres`, if `embedded` allows.
/// - `embedded` (bool, default true): whether a missing `url` means the embedded cluster. False
///   (the packaged units set it) makes a missing `url` an error at once, and nothing is created.
/// - `max_connections` (int, default 10): pool size.
/// - `acquire_timeout_seconds` (double, default 10): wait for a free connection before failing.
/// - `migrate_on_start` (bool, default true): apply pending migrations when `serve` starts.
/// - `migrations_directory` (string, optional): a folder of `NNNN_name.sql` files to use instead
///   of the migrations built into the binary.
/// - `statement_timeout_ms` (int, default 15000, 0 for none): the server ends a statement running
///   longer (`statement_timeout`); the relay gives up on a call unanswered 2 s after that, closes
///   the connection and opens another (a server that vanished without closing the connection).
/// - `connect_timeout_seconds` (int, default 5): per host, libpq's `connect_timeout`.
/// - `keepalives_idle_seconds` (int, default 10), `keepalives_interval_seconds` (int, default 5),
///   `keepalives_count` (int, default 3): TCP keepalives on every connection.
/// - `tcp_user_timeout_ms` (int, default 20000, 0 for the system's): how long sent data may stay
///   unacknowledged before the kernel drops the connection.
/// - `listener_probe_seconds` (int, default 5): the LISTEN connection asks the server a question
///   after this long without a message, to notice a server that is gone.
public struct DatabaseSettings: Sendable {
    public var url: String?
    public var embedded: Bool
    public var maxConnections: Int
    public var acquireTimeout: Duration
    public var migrateOnStart: Bool
    public var migrationsDirectory: String?
    public var connection: PostgresConnectionSettings
    public var listenerProbeInterval: Duration

    /// Where the embedded cluster lives unless `data.directory` says otherwise.
    public static let defaultDataDirectory = ".push-relay-data"

    /// Refuses a configuration that names no database: no `url`, and `embedded` false. Called by
    /// everything that would use one, before anything is made.
    public func checkNamed() throws {
        guard url == nil, !embedded else { return }
        throw ConfigurationError(
            """
            database.url is not set and database.embedded is false: set DATABASE_URL in the environment (the packaged \
            units read /etc/push-relay/environment) or database.url in the configuration file; nothing was created
            """
        )
    }

    public init(config: ConfigReader) {
        self.url = config.string(forKey: "url", isSecret: true).flatMap { $0.isEmpty ? nil : $0 }
        self.embedded = config.bool(forKey: "embedded", default: true)
        self.maxConnections = config.int(forKey: "max_connections", default: 10)
        let acquireSeconds = config.double(forKey: "acquire_timeout_seconds", default: 10)
        self.acquireTimeout = .milliseconds(
            Int((acquireSeconds.isFinite ? min(max(acquireSeconds, 0.001), 3600) : 10) * 1000)
        )
        self.migrateOnStart = config.bool(forKey: "migrate_on_start", default: true)
        self.migrationsDirectory = config.string(forKey: "migrations_directory")
        self.connection = PostgresConnectionSettings(
            connectTimeoutSeconds: config.int(forKey: "connect_timeout_seconds", default: 5),
            statementTimeoutMilliseconds: config.int(forKey: "statement_timeout_ms", default: 15_000),
            keepaliveIdleSeconds: config.int(forKey: "keepalives_idle_seconds", default: 10),
            keepaliveIntervalSeconds: config.int(forKey: "keepalives_interval_seconds", default: 5),
            keepaliveCount: config.int(forKey: "keepalives_count", default: 3),
            tcpUserTimeoutMilliseconds: config.int(forKey: "tcp_user_timeout_ms", default: 20_000)
        )
        self.listenerProbeInterval = .seconds(
            min(max(1, config.int(forKey: "listener_probe_seconds", default: 5)), 3600)
        )
    }
}
