import Postgres

/// Where PushRelay's PostgreSQL is and how the pool behaves; the values below are the defaults,
/// and `DatabaseSettings+ConfigReader.swift` reads the keys.
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
    public var embedded = true
    public var maxConnections = 10
    /// 1 ms to an hour.
    public var acquireTimeout = Duration.seconds(10)
    public var migrateOnStart = true
    public var migrationsDirectory: String?
    /// Timeouts and keepalives; their defaults are ``PostgresConnectionSettings``'s.
    public var connection = PostgresConnectionSettings()
    /// 1 s to an hour.
    public var listenerProbeInterval = Duration.seconds(5)

    /// The defaults, with `url` when given.
    public init(url: String? = nil) { self.url = url }

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
}
