import Configuration
import Postgres

extension DatabaseSettings {
    /// Reads the `database` section; a key that is not set keeps its default.
    public init(config: ConfigReader) {
        self.init(url: config.string(forKey: "url", isSecret: true).flatMap { $0.isEmpty ? nil : $0 })
        embedded = config.bool(forKey: "embedded", default: embedded)
        maxConnections = config.int(forKey: "max_connections", default: maxConnections)
        let acquireSeconds = config.double(forKey: "acquire_timeout_seconds", default: acquireTimeout.timeInterval)
        if acquireSeconds.isFinite {
            acquireTimeout = .milliseconds(Int(min(max(acquireSeconds, 0.001), 3600) * 1000))
        }
        migrateOnStart = config.bool(forKey: "migrate_on_start", default: migrateOnStart)
        migrationsDirectory = config.string(forKey: "migrations_directory")
        let given = connection
        connection = PostgresConnectionSettings(
            connectTimeoutSeconds: config.int(forKey: "connect_timeout_seconds", default: given.connectTimeoutSeconds),
            statementTimeoutMilliseconds: config.int(
                forKey: "statement_timeout_ms",
                default: given.statementTimeoutMilliseconds
            ),
            keepaliveIdleSeconds: config.int(forKey: "keepalives_idle_seconds", default: given.keepaliveIdleSeconds),
            keepaliveIntervalSeconds: config.int(
                forKey: "keepalives_interval_seconds",
                default: given.keepaliveIntervalSeconds
            ),
            keepaliveCount: config.int(forKey: "keepalives_count", default: given.keepaliveCount),
            tcpUserTimeoutMilliseconds: config.int(
                forKey: "tcp_user_timeout_ms",
                default: given.tcpUserTimeoutMilliseconds
            )
        )
        listenerProbeInterval = config.secondsDuration(
            forKey: "listener_probe_seconds",
            default: listenerProbeInterval,
            atLeast: 1,
            atMost: 3600
        )
    }
}
