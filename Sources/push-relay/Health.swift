import ArgumentParser
import Configuration
import Foundation
import PushRelay

#if canImport(Glibc)
import Glibc
#endif

/// `push-relay health`: asks a running relay's `/health` (or `/ready`) over loopback and exits 0
/// when it answers 200, so a container's HEALTHCHECK or an exec probe needs no curl in the image.
struct Health: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Exit 0 when a running relay answers its /health (or /ready) with 200; for container health checks.",
        discussion: """
            Asks http://127.0.0.1:<http.port>/health, the port read from the configuration (--config, CONFIG_FILE, \
            HTTP_PORT) as serve reads it, or --port. Prints the status line; exits 1 on any other answer, on a refused \
            connection, or after --timeout seconds.
            """
    )

    @Option(name: .customLong("config"), help: ArgumentHelp("YAML configuration file (or CONFIG_FILE).", valueName: "file"))
    var configFile: String?

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
                port = try await ConfigReader.pushRelay(configFile: configFile).int(forKey: "http.port", default: 8080)
            } catch {
                throw CommandError("configuration: \(error)")
            }
        }
        let path = ready ? "/ready" : "/health"
        let status = try Self.get(port: port ?? 8080, path: path, timeout: timeout)
        print("\(path): \(status)")
        guard status.hasPrefix("HTTP/1.1 200") || status.hasPrefix("HTTP/1.0 200") else { throw ExitCode.failure }
    }

    /// The status line of `GET path` on 127.0.0.1:`port`.
    static func get(port: Int, path: String, timeout: Double) throws -> String {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw CommandError("socket: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(clamping: port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw CommandError("127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        guard send(descriptor, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else {
            throw CommandError("127.0.0.1:\(port): \(String(cString: strerror(errno)))")
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while !answer.contains(UInt8(ascii: "\n")) {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            guard count > 0 else {
                throw CommandError("127.0.0.1:\(port): \(count == 0 ? "closed without an answer" : String(cString: strerror(errno)))")
            }
            answer += buffer[..<count]
        }
        let line = answer.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }
        return String(decoding: line, as: UTF8.self)
    }
}
