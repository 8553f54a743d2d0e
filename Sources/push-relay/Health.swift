import ArgumentParser
import Configuration
import CurlHTTP2
import Foundation
import PushRelay

/// `push-relay health`: asks a running relay's `/health` (or `/ready`) over loopback, with the
/// HTTP client the admin commands use, and exits 0 when it answers 200, so a container's
/// HEALTHCHECK or an exec probe needs no curl in the image.
struct Health: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Exit 0 when a running relay answers its /health (or /ready) with 200; for container health checks.",
        discussion: """
            Asks http://127.0.0.1:<http.port>/health, the port read from the configuration (--config, CONFIG_FILE, \
            HTTP_PORT) as serve reads it, or --port. Prints the status; exits 1 on any other answer, on a refused \
            connection, or after --timeout seconds.
            """
    )

    @Option(name: .customLong("config"), help: ArgumentHelp("YAML configuration file (or CONFIG_FILE).", valueName: "file"))
    var configFile: String?

    @Option(help: ArgumentHelp("A file of NAME=value lines (systemd's EnvironmentFile format) set in the environment first.", valueName: "file"))
    var envFile: String?

    @Option(help: "The port to ask (default: http.port from the configuration, 8080).")
    var port: Int?

    @Flag(help: "Ask /ready (the database is reachable) instead of /health.")
    var ready = false

    @Option(help: "Seconds to wait for the answer.")
    var timeout: Double = 3

    func run() async throws {
        var port = self.port
        if port == nil {
            do {
                if let envFile { try EnvironmentFile.apply(path: envFile) }
                port = try await ConfigReader.pushRelay(configFile: configFile).int(forKey: "http.port", default: 8080)
            } catch {
                throw CommandError("configuration: \(error)", exitStatus: .configuration)
            }
        }
        let path = ready ? "/ready" : "/health"
        let url = "http://127.0.0.1:\(port ?? 8080)\(path)"
        let client = try HTTP2Client(configuration: .init(maxConnectionsPerHost: 1, maxConcurrentStreams: 1))
        defer { Task { await client.shutdown() } }
        let status: Int
        do {
            status = try await client.send(HTTP2Request(url: url, method: "GET", timeout: .milliseconds(Int(timeout * 1000)))).status
        } catch {
            throw CommandError("cannot reach the relay at \(url): \(error)")
        }
        print("\(path): \(status)")
        guard status == 200 else { throw ExitCode.failure }
    }
}
