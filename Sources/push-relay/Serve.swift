import ArgumentParser
import Configuration
import Foundation
import Hummingbird
import Logging
import PushRelay
import PushSandbox

#if canImport(Glibc)
import Glibc
#endif

/// `push-relay serve`: runs the relay until SIGTERM or SIGINT.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the relay: HTTP API, webhook intake and background services.",
        discussion: """
            Applies pending migrations first (unless database.migrate_on_start is false). SIGTERM or SIGINT stops intake, lets the background \
            services finish, closes the pool and, if this process started it, stops the embedded PostgreSQL server.
            """
    )

    @OptionGroup var common: CommonOptions

    @Option(help: ArgumentHelp("Address to listen on (or HTTP_HOST; default 127.0.0.1).", valueName: "address"))
    var host: String?

    @Option(help: ArgumentHelp("Port to listen on (or HTTP_PORT; default 8080).", valueName: "port"))
    var port: Int?

    @Option(help: ArgumentHelp("Port of the built-in sandbox gateway used by the demo app (default: a free port).", valueName: "port"))
    var sandboxPort: Int?

    func run() async throws {
        Allocator.configure()
        var overrides: [AbsoluteConfigKey: ConfigValue] = [:]
        if let host { overrides["http.host"] = .init(.string(host), isSecret: false) }
        if let port { overrides["http.port"] = .init(.int(port), isSecret: false) }
        var reader = try await common.reader(overrides)
        let logger = try common.logger(reader)
        let started = ContinuousClock.now
        // First, before anything is made (the demo's sandbox keys, an embedded cluster) or read (the
        // apps' key files): a relay with no database to use is told so before anything else.
        let database = DatabaseSettings(config: reader.scoped(to: "database"))
        try database.checkNamed()
        var apps = try await AppConfiguration.loadChecked(reader: reader)
        let demo = apps.isEmpty && database.url == nil
        logger.info(
            "starting PushRelay",
            metadata: [
                "version": "\(PushRelayVersion.build)", "commit": "\(PushRelayVersion.commit ?? "none")", "allocator": "\(Allocator.description)",
                "database": "\(Database.summary(reader: reader))", "apps": "\(demo ? DemoApp.id : apps.map(\.id).joined(separator: ","))",
            ]
        )
        var sandbox: SandboxServer?
        if demo {
            // A local run with nothing configured: a demo app whose APNs and FCM are the built-in
            // sandbox, so a webhook can be followed to a delivered push with no credentials.
            let dataDirectory = reader.string(forKey: "data.directory", default: Database.defaultDataDirectory)
            var demo = try DemoApp.configuration(dataDirectory: dataDirectory)
            let directory = (dataDirectory as NSString).appendingPathComponent("sandbox")
            let credentials = try SandboxCredentials.generate(directory: directory)
            let server = try await SandboxServer.start(
                configuration: .init(
                    port: sandboxPort ?? 0,
                    directory: directory,
                    apnsKeys: credentials.apnsKeys,
                    serviceAccountKeys: credentials.serviceAccountKeys
                ),
                logger: logger
            )
            sandbox = server
            let gateway = "https://localhost:\(server.port)"
            demo.apns = APNsSettings(
                topic: "com.example.pushrelay.demo",
                url: gateway,
                token: .init(keyFile: credentials.apnsKeyFile, keyID: SandboxCredentials.apnsKeyID, teamID: SandboxCredentials.apnsTeamID)
            )
            demo.fcm = FCMSettings(serviceAccountFile: try credentials.writeServiceAccount(sandboxURL: gateway), url: gateway)
            apps = [demo]
            overrides["tls.ca_file"] = .init(.string(server.certificates.caFile), isSecret: false)
            reader = try await common.reader(overrides)
            printDemoBanner(demo, http: HTTPSettings(config: reader.scoped(to: "http")), sandbox: server, dataDirectory: dataDirectory)
        } else if reader.bool(forKey: "console.enabled", default: true) {
            logger.notice("operator console", metadata: ["url": "\(Self.baseURL(HTTPSettings(config: reader.scoped(to: "http"))))/console"])
        }
        do {
            // The demo's app is made here, not read from a file: there is nothing to reload.
            let reload = sandbox == nil && reader.string(forKey: "config.file") != nil ? common.readConfiguration(overrides) : nil
            let app = try await buildApplication(reader: reader, logger: logger, apps: apps, reload: reload)
            try await app.runService()
        } catch {
            await sandbox?.shutdown()
            logger.error(
                "PushRelay stopped on an error",
                metadata: ["error": "\(error)", "uptime_s": "\((ContinuousClock.now - started).components.seconds)"]
            )
            // Said once, in the log's format: no second "Error:" line on standard error.
            throw ExitCode(ExitStatus.of(error).rawValue)
        }
        await sandbox?.shutdown()
        logger.info("PushRelay stopped", metadata: ["uptime_s": "\((ContinuousClock.now - started).components.seconds)"])
    }

    /// Where a browser on this machine reaches the server.
    static func baseURL(_ http: HTTPSettings) -> String {
        "http://\(http.host == "0.0.0.0" ? "127.0.0.1" : http.host):\(http.port)"
    }

    /// Printed on stdout, not logged: the URL carries the demo app's webhook secret.
    private func printDemoBanner(_ demo: AppConfiguration, http: HTTPSettings, sandbox: SandboxServer, dataDirectory: String) {
        let base = Self.baseURL(http)
        let dataOption = dataDirectory == Database.defaultDataDirectory ? "" : " --data-dir \(dataDirectory)"
        let url = "\(base)/v1/webhooks/zendesk/\(demo.id)/\(demo.webhookSecrets[0])"
        print(
            """
            No apps configured: serving the demo app '\(demo.id)', which delivers to the built-in sandbox gateway
            (APNs + FCM stand-in) at https://localhost:\(sandbox.port).
            Webhook URL: \(url)
            Try it:
              curl -s -X POST -H 'Content-Type: application/json' \\
                -d '{"devices":[{"identifier":"6b1c0f5e8d2a4b7c9e3f1a0d5c8b2e4f6a9d1c3b5e7f0a2d4c6b8e1f3a5c7d9e","type":"ios"},\
                {"identifier":"android-demo-token","type":"android"}],"notification":{"title":"Agent replied","body":"Hello","ticket_id":"5"}}' \\
                \(url)
            Then see the pushes the sandbox received:
              curl -s --cacert \(sandbox.certificates.caFile) https://localhost:\(sandbox.port)/sandbox/received
            Console: \(base)/console
              sign in with an admin key from: \(CommandLine.arguments[0]) keys create --admin\(dataOption)
            """
        )
        fflush(nil)  // flush every output stream; stdout may be a file or a pipe
    }
}
