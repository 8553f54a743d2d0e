import ArgumentParser
import Foundation
import Logging
import PushRelay
import PushSandbox
import ServiceLifecycle
import UnixSignals

/// `push-relay sandbox`: the local APNs stand-in, on its own.
struct Sandbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the local APNs stand-in over HTTP/2 and TLS (for trying clients and for tests).",
        discussion:
            "It writes its CA certificate to <dir>/sandbox-ca.pem; point clients at it (curl --cacert, tls.ca_file). GET /sandbox/received lists what it received; PUT /sandbox/behaviours/{token} makes it answer a token with an error. POST /events receives an app's feedback events (an app's events.url) and checks their signature with --events-secret-file."
    )

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on.")
    var port = 8443

    @Option(help: ArgumentHelp("Where to write the CA certificate.", valueName: "dir"))
    var directory = ".push-relay-data/sandbox"

    @Option(
        help: ArgumentHelp(
            "A file holding the secret feedback events are signed with (an app's events.signing_secret_file). Without it, POST /events answers 401.",
            valueName: "file"
        )
    )
    var eventsSecretFile: String?

    func run() async throws {
        LoggingSystem.bootstrap { RelayLogHandler.standardError(label: $0) }
        var logger = Logger(label: "push-relay.sandbox")
        logger.logLevel = .info
        var eventSecret: String?
        if let eventsSecretFile {
            guard let data = FileManager.default.contents(atPath: eventsSecretFile) else {
                throw ValidationError("cannot read --events-secret-file \(eventsSecretFile)")
            }
            eventSecret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let configuration = SandboxConfiguration(host: host, port: port, directory: directory, eventSigningSecret: eventSecret)
        let service = SandboxService(configuration: configuration, logger: logger) { server in
            print("sandbox: https://localhost:\(server.port)  CA: \(server.certificates.caFile)")
            fflush(nil)
        }
        let group = ServiceGroup(configuration: .init(services: [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}
