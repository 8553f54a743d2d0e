import Foundation
import Logging
import PushSandbox

/// Runs a sandbox on a free port for the duration of `body`.
struct SandboxHarness: Sendable {
    let port: Int
    let caFile: String
    let state: SandboxState

    var base: String { "https://localhost:\(port)" }

    static let logger: Logger = {
        var logger = Logger(label: "push-relay.sandbox-tests")
        logger.logLevel = .warning
        return logger
    }()

    static func with<T: Sendable>(_ body: @Sendable (SandboxHarness) async throws -> T) async throws -> T {
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-sandbox-\(UUID().uuidString)")
        let server = try await SandboxServer.start(configuration: .init(directory: directory), logger: logger)
        do {
            let result = try await body(SandboxHarness(port: server.port, caFile: server.certificates.caFile, state: server.state))
            await server.shutdown()
            return result
        } catch {
            await server.shutdown()
            throw error
        }
    }
}
