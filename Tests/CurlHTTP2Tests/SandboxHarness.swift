import Foundation
import Hummingbird
import Logging
import PushSandbox
import ServiceLifecycle

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
        let state = SandboxState()
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-sandbox-\(UUID().uuidString)")
        let (application, certificates) = try await PushSandbox.makeApplication(
            configuration: .init(directory: directory), state: state, logger: logger,
            onServerRunning: { portContinuation.yield($0) }
        )
        let group = ServiceGroup(configuration: .init(services: [application], gracefulShutdownSignals: [], logger: logger))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            do {
                let result = try await body(SandboxHarness(port: port, caFile: certificates.caFile, state: state))
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                return result
            } catch {
                await group.triggerGracefulShutdown()
                try? await tasks.waitForAll()
                throw error
            }
        }
    }
}
