import Foundation
import Logging
import Postgres
import ServiceLifecycle
import TestSupport
import Testing

@testable import PushRelay

@Suite("Bulk-unregister jobs at shutdown")
struct JobRunnerShutdownTests {
    @Test("shutdown while the runner waits for a database connection logs nothing above info")
    func shutdownWhileWaitingForAConnection() async throws {
        let conninfo = try await TestDatabase.makeDatabase()
        // One connection, held by the test: the runner's first claim waits for it.
        let client = PostgresClient(
            configuration: .test(conninfo: conninfo, maxConnections: 1, acquireTimeout: hangCeiling),
            logger: TestDatabase.logger
        )
        let lines = OutageLogTests.Lines()
        var logger = Logger(label: "push-relay") { RelayLogHandler(label: $0, stream: lines, format: .text) }
        logger.logLevel = .debug
        let runner = JobRunner(
            store: JobStore(client: client),
            wakeUps: nil,
            settings: JobSettings(),
            logger: logger
        )
        let services = ServiceGroup(configuration: .init(services: [runner], logger: TestDatabase.logger))
        try await client.withConnection { _ in
            let running = Task { try await services.run() }
            #expect(await eventually { client.waitingCallers == 1 }, "the runner never asked for a connection")
            await services.triggerGracefulShutdown()
            try await running.value
        }
        await client.close()
        let written = lines.lines.withLock { $0 }
        let loud = written.filter { $0.contains(" warning ") || $0.contains(" error ") || $0.contains(" critical ") }
        #expect(loud.isEmpty, "\(loud)")
    }
}
