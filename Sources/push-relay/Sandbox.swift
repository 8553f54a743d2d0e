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
        discussion: "It writes its CA certificate to <dir>/sandbox-ca.pem; point clients at it (curl --cacert, tls.ca_file). GET /sandbox/received lists what it received; PUT /sandbox/behaviours/{token} makes it answer a token with an error."
    )

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on.")
    var port = 8443

    @Option(help: ArgumentHelp("Where to write the CA certificate.", valueName: "dir"))
    var directory = ".push-relay-data/sandbox"

    func run() async throws {
        LoggingSystem.bootstrap { RelayLogHandler.standardError(label: $0) }
        var logger = Logger(label: "push-relay.sandbox")
        logger.logLevel = .info
        let service = SandboxService(configuration: .init(host: host, port: port, directory: directory), logger: logger) { server in
            print("sandbox: https://localhost:\(server.port)  CA: \(server.certificates.caFile)")
            fflush(nil)
        }
        let group = ServiceGroup(configuration: .init(services: [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}
