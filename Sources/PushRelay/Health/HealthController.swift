import Hummingbird
import Logging
import Postgres

/// Liveness and readiness probes.
///
/// `/health` answers while the process serves HTTP at all. `/ready` answers 200 only when the
/// database answers and its schema is at the version this build expects, so a load balancer stops
/// sending webhooks that could not be stored.
///
/// `/ready` answers from a check at most a second old (``RecentResult``): however often it is
/// asked, it costs PostgreSQL at most two small queries a second.
struct HealthController<Context: RequestContext>: Sendable {
    let client: PostgresClient
    let migrator: Migrator
    /// The database's answers as of at most a second ago: the applied schema version and whether
    /// it takes writes.
    let recent: RecentResult<(applied: Int, writable: Bool)>
    /// This build's version (`PushRelayVersion.build`), in both answers: after an upgrade, which
    /// binary answers.
    let version: String

    init(
        client: PostgresClient,
        migrator: Migrator,
        version: String,
        recent: RecentResult<(applied: Int, writable: Bool)> = RecentResult()
    ) {
        self.client = client
        self.migrator = migrator
        self.version = version
        self.recent = recent
    }

    struct Health: ResponseEncodable {
        var status: String
        var version: String
    }

    struct Readiness: ResponseEncodable, Decodable {
        var status: String
        var schemaVersion: Int
        var expectedSchemaVersion: Int
        var version: String

        enum CodingKeys: String, CodingKey {
            case status, version
            case schemaVersion = "schema_version"
            case expectedSchemaVersion = "expected_schema_version"
        }
    }

    var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .get("health", use: health)
            .get("ready", use: ready)
    }

    @Sendable func health(_ request: Request, context: Context) async throws -> Health {
        Health(status: "ok", version: version)
    }

    @Sendable func ready(_ request: Request, context: Context) async throws -> Readiness {
        let applied: Int
        let writable: Bool
        do {
            (applied, writable) = try await recent.value { [client, migrator] in
                let applied = try await migrator.appliedVersion(client)
                // A standby, or a primary demoted during failover, answers reads and refuses writes.
                let writable =
                    try await client.query(
                        "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'"
                    ).rows.first?.decode(Bool.self, at: 0) ?? false
                return (applied, writable)
            }
        } catch let error as PostgresError {
            context.logger.debug("readiness check failed", metadata: PostgresError.metadata(error))
            throw APIError.databaseUnavailable()
        }
        guard writable else { throw APIError.databaseUnavailable(because: "the database is read-only") }
        // Refusals a read cannot see (a full disk, no memory) show in the writes that failed.
        if let refusal = client.recentWriteRefusal() { throw APIError.databaseUnavailable(because: refusal) }
        let expected = migrator.latestVersion
        guard applied >= expected else {
            throw APIError(
                .serviceUnavailable,
                code: "migrations_pending",
                message:
                    "database schema is at version \(applied), this build needs \(expected); run push-relay migrate",
                headers: [.retryAfter: "5"]
            )
        }
        return Readiness(status: "ready", schemaVersion: applied, expectedSchemaVersion: expected, version: version)
    }
}
