import Configuration
import Foundation
import Logging
import Postgres
import ServiceLifecycle

/// PushRelay's database: the pool, the migrator, and the embedded cluster when no URL is set.
public struct Database: Sendable {
    /// The connection pool.
    public let client: PostgresClient
    /// The migrations this build knows.
    public let migrator: Migrator
    /// The embedded cluster, when PushRelay runs its own.
    public let embedded: EmbeddedPostgres?
    /// Whether this process started the embedded server (and so stops it at shutdown). A server left
    /// running by another relay process on the same data directory is reused and left alone.
    public let startedEmbedded: Bool
    /// How often the LISTEN connection checks that the server is still there (``PostgresListener``).
    public var listenerProbeInterval: Duration = .seconds(5)

    /// Opens the database described by a reader holding `database.*` and `data.directory`.
    ///
    /// - Parameter createEmbedded: whether an embedded cluster may be created when `database.url`
    ///   is unset and none exists yet. `serve` may (the demo); the commands that act on a relay's
    ///   data may not, so they never quietly work on a database of their own.
    /// - Parameter now: the clock the pool's refusal window runs on (``PostgresClient/recentWriteRefusal(within:)``);
    ///   tests pass one they move.
    public static func open(
        reader: ConfigReader,
        logger: Logger,
        createEmbedded: Bool = true,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) async throws -> Database {
        try await open(
            configuration: DatabaseSettings(config: reader.scoped(to: "database")),
            dataDirectory: reader.string(forKey: "data.directory", default: defaultDataDirectory),
            logger: logger,
            createEmbedded: createEmbedded,
            now: now
        )
    }

    /// The schema migrations: those built into the binary (the package's `Migrations/` folder, by
    /// the EmbedAssets plugin), or the folder `database.migrations_directory` names.
    static func migrations(_ configuration: DatabaseSettings) throws -> [Migration] {
        if let directory = configuration.migrationsDirectory { return try Migrator.load(directory: directory) }
        return try Migrator.parse(EmbeddedAssets.migrations, source: "the migrations built into push-relay")
    }

    /// Where the embedded cluster lives unless `data.directory` says otherwise.
    public static let defaultDataDirectory = DatabaseSettings.defaultDataDirectory

    /// Connects to the configured database, or starts the embedded one in `dataDirectory/postgres`.
    public static func open(
        configuration: DatabaseSettings,
        dataDirectory: String,
        logger: Logger,
        createEmbedded: Bool = true,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) async throws -> Database {
        let migrator = Migrator(migrations: try migrations(configuration), logger: logger)
        var embedded: EmbeddedPostgres?
        var started = false
        let conninfo: String
        if let url = configuration.url {
            conninfo = url
        } else {
            try configuration.checkNamed()
            let cluster = EmbeddedPostgres(
                configuration: .init(directory: (dataDirectory as NSString).appendingPathComponent("postgres")),
                logger: logger
            )
            guard createEmbedded || cluster.exists else {
                let directory = URL(fileURLWithPath: dataDirectory).standardizedFileURL.path
                throw ConfigurationError(
                    """
                    no database is configured: set database.url in the configuration file (or DATABASE_URL) to the relay's \
                    database. Without it this command uses the embedded cluster of `push-relay serve`, and there is none in \
                    \(directory)/postgres (--data-dir names another directory). Where the Debian package is installed, run it as \
                    the service does: runuser -u push-relay -- push-relay … --config /etc/push-relay/push-relay.yaml --env-file \
                    /etc/push-relay/environment
                    """
                )
            }
            (conninfo, started) = try await cluster.start()
            embedded = cluster
        }
        let client = PostgresClient(
            configuration: .init(
                conninfo: conninfo,
                maxConnections: configuration.maxConnections,
                acquireTimeout: configuration.acquireTimeout,
                connection: configuration.connection
            ),
            logger: logger,
            now: now
        )
        var database = Database(client: client, migrator: migrator, embedded: embedded, startedEmbedded: started)
        database.listenerProbeInterval = configuration.listenerProbeInterval
        return database
    }

    /// The database a configuration names, for the start-up line: the server of `database.url`
    /// without its password (``PostgresClientConfiguration/summary(of:)``), or `embedded` and the
    /// cluster's directory.
    public static func summary(reader: ConfigReader) -> String {
        let configuration = DatabaseSettings(config: reader.scoped(to: "database"))
        if let url = configuration.url { return PostgresClientConfiguration.summary(of: url) }
        if !configuration.embedded { return "none (database.url is not set and database.embedded is false)" }
        let dataDirectory = reader.string(forKey: "data.directory", default: defaultDataDirectory)
        return "embedded " + (dataDirectory as NSString).appendingPathComponent("postgres")
    }

    /// Applies pending migrations.
    @discardableResult
    public func migrate() async throws -> [Migration] { try await migrator.migrate(client) }

    /// Applies pending migrations, waiting up to `limit` for a database that is not answering yet
    /// (a relay started before its PostgreSQL, as a supervisor may do): tries again after 1, 2, 4 …
    /// (at most 15) seconds, with a warning per try (the pool's own warning carries the cause, once).
    /// A database that refuses the configuration (a role or password it rejects, no such database,
    /// TLS that cannot work as asked) ends the wait at once with a ``DatabaseRefusal``: waiting
    /// cannot fix it. Other errors, and the last one, are thrown.
    public func migrateWaiting(upTo limit: Duration, logger: Logger) async throws {
        // One connection first, outside the pool: a database that refuses the configuration is
        // said to refuse it, without the pool's "database unavailable" warning before.
        if let cause = await client.diagnoseConnection(), cause.refusesConnection {
            throw DatabaseRefusal(cause: cause)
        }
        let giveUp = ContinuousClock.now + limit
        var delay = Duration.seconds(1)
        while true {
            do {
                try await migrate()
                return
            } catch let error as PostgresError where error.isUnavailable {
                // libpq's blocking connect says why only in words: one closer look for a SQLSTATE.
                if error.code == .connectionFailed, let cause = await client.diagnoseConnection(),
                    cause.refusesConnection
                {
                    throw DatabaseRefusal(cause: cause)
                }
                guard ContinuousClock.now + delay < giveUp else { throw error }
                logger.warning(
                    "database unavailable at start; trying again",
                    metadata: ["retry_in_s": "\(delay.components.seconds)"]
                )
                try await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(15))
            } catch let error as PostgresError where error.refusesConnection {
                // A connection string libpq cannot read: no try can fix it.
                throw DatabaseRefusal(cause: error)
            }
        }
    }

    /// Closes the pool and stops the embedded server if this process started it.
    public func shutdown() async throws {
        await client.close()
        if startedEmbedded, let embedded { try await embedded.stop() }
    }

    /// The services that keep the database alive for the application's lifetime, in start order;
    /// at shutdown the pool closes before the embedded server stops.
    var services: [any Service] {
        var services: [any Service] = []
        if startedEmbedded, let embedded { services.append(EmbeddedPostgresService(server: embedded)) }
        services.append(client)
        return services
    }
}

/// The database refused the relay's configuration at start (credentials, database name, TLS):
/// `serve` exits at once with the configuration's exit status instead of waiting.
public struct DatabaseRefusal: Error, CustomStringConvertible, Sendable {
    /// The refusal, with its SQLSTATE when the server gave one.
    public var cause: PostgresError

    public init(cause: PostgresError) { self.cause = cause }

    public var description: String {
        let what =
            switch cause.sqlState {
            case "28000", "28P01": "the database refused the relay's role or password"
            case "3D000": "the database named in database.url does not exist"
            default: "the database connection settings cannot work"
            }
        return "\(what) (database.url; not retried): \(cause.message)"
            + (cause.sqlState.map { " [SQLSTATE \($0)]" } ?? "")
    }
}

/// Stops the embedded PostgreSQL server on graceful shutdown.
struct EmbeddedPostgresService: Service {
    let server: EmbeddedPostgres

    func run() async throws {
        try? await gracefulShutdown()
        try await server.stop()
    }
}
