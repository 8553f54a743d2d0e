import ArgumentParser
import Configuration
import Hummingbird
import Logging
import PushRelay

/// `push-relay serve`: runs the relay until SIGTERM or SIGINT.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the relay: HTTP API, webhook intake and background services.",
        discussion: """
            Applies pending migrations first (unless database.migrate_on_start is false). SIGTERM or SIGINT stops intake, lets the background services finish, closes the pool and, if this process started it, stops the embedded PostgreSQL server.
            """
    )

    @OptionGroup var common: CommonOptions

    @Option(help: ArgumentHelp("Address to listen on (or HTTP_HOST; default 127.0.0.1).", valueName: "address"))
    var host: String?

    @Option(help: ArgumentHelp("Port to listen on (or HTTP_PORT; default 8080).", valueName: "port"))
    var port: Int?

    func run() async throws {
        var overrides: [AbsoluteConfigKey: ConfigValue] = [:]
        if let host { overrides["http.host"] = .init(.string(host), isSecret: false) }
        if let port { overrides["http.port"] = .init(.int(port), isSecret: false) }
        let reader = try await common.reader(overrides)
        let logger = try common.logger(reader)
        logger.info("starting PushRelay", metadata: ["version": "\(PushRelayVersion.current)"])
        let app = try await buildApplication(reader: reader, logger: logger)
        try await app.runService()
    }
}
