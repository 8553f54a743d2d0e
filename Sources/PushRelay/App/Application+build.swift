import Configuration
import Foundation
import Hummingbird
import Logging

/// Builds the PushRelay application from configuration.
///
/// Keys (see README for the full list): `http.*` (``HTTPConfiguration``), `database.*`
/// (``DatabaseConfiguration``), `data.directory` (default `./.push-relay-data`, where the embedded
/// cluster lives when `database.url` is not set).
///
/// The logger is passed in: logging is bootstrapped once, by the executable, never here.
public func buildApplication(reader: ConfigReader, logger: Logger) async throws -> some ApplicationProtocol {
    let http = HTTPConfiguration(config: reader.scoped(to: "http"))
    let database = try await Database.open(reader: reader, logger: logger)
    do {
        if reader.bool(forKey: "database.migrate_on_start", default: true) {
            try await database.migrate()
        }
    } catch {
        try? await database.shutdown()
        throw error
    }

    let router = buildRouter(database: database)
    var app = Application(
        router: router,
        configuration: .init(address: .hostname(http.host, port: http.port), serverName: "PushRelay"),
        logger: logger
    )
    app.addServices(database.services)
    return app
}

/// The routes and middleware, separate from the services so tests can drive them directly.
func buildRouter(database: Database) -> Router<AppRequestContext> {
    let router = Router(context: AppRequestContext.self)
    router.addMiddleware {
        RequestIDMiddleware()
        LogRequestsMiddleware(.info)
        ErrorMiddleware()
    }
    router.addRoutes(HealthController(database: database).endpoints)
    return router
}
