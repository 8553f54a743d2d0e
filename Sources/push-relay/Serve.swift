import ArgumentParser
import Foundation
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
        var apps = try AppConfiguration.load(reader: reader)
        if apps.isEmpty && reader.string(forKey: "database.url", isSecret: true) == nil {
            // A local run with nothing configured: a demo app so a webhook can be tried at once.
            let demo = try DemoApp.configuration(dataDirectory: reader.string(forKey: "data.directory", default: Database.defaultDataDirectory))
            apps = [demo]
            printDemoBanner(demo, http: HTTPConfiguration(config: reader.scoped(to: "http")))
        }
        let app = try await buildApplication(reader: reader, logger: logger, apps: apps)
        try await app.runService()
    }

    /// Printed on stdout, not logged: the URL carries the demo app's webhook secret.
    private func printDemoBanner(_ demo: AppConfiguration, http: HTTPConfiguration) {
        let base = "http://\(http.host == "0.0.0.0" ? "127.0.0.1" : http.host):\(http.port)"
        let url = "\(base)/v1/webhooks/zendesk/\(demo.id)/\(demo.webhookSecrets[0])"
        print(
            """
            No apps configured: serving the demo app '\(demo.id)'.
            Webhook URL: \(url)
            Try it:
              curl -s -X POST -H 'Content-Type: application/json' \\
                -d '{"devices":[{"identifier":"oiuytrdsdfghjk","type":"ios"}],"notification":{"title":"Agent replied","body":"Hello","ticket_id":"5"}}' \\
                \(url)
            """
        )
        fflush(nil)  // flush every output stream; stdout may be a file or a pipe
    }
}
