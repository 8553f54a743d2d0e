import Foundation
import Logging
import Postgres
import ServiceLifecycle
import TestSupport
import Testing

@testable import PushRelay

/// A line about work whose statement failed says which of the relay's statements it was and where
/// in the code it is issued, so an operator's report points at one query (docs/runbooks.md).
@Suite("Logs: a failed statement is named")
struct StoreErrorLogTests {
    @Test(
        "a job claim that fails (its table gone) logs the claim's statement name and source line, in both formats",
        arguments: [RelayLogHandler.Format.text, .json]
    )
    func failedClaimIsNamed(format: RelayLogHandler.Format) async throws {
        let test = try await TestApp.make()
        let migrations = try Migrator.parse(EmbeddedAssets.migrations, source: "the migrations built into push-relay")
        _ = try await Migrator(migrations: migrations, logger: TestDatabase.logger).migrate(test.client)
        try await test.client.query("ALTER TABLE jobs RENAME TO jobs_elsewhere")
        let lines = OutageLogTests.Lines()
        var logger = Logger(label: "push-relay") { RelayLogHandler(label: $0, stream: lines, format: format) }
        logger.logLevel = .info
        let runner = JobRunner(
            store: JobStore(client: test.client),
            wakeUps: nil,
            settings: JobSettings(),
            logger: logger
        )
        let services = ServiceGroup(configuration: .init(services: [runner], logger: TestDatabase.logger))
        let running = Task { try await services.run() }
        func failures() -> [OutageLogTests.Line] {
            lines.lines.withLock { $0 }.compactMap { OutageLogTests.Line($0, format: format) }.filter { $0.message == "claiming a job failed" }
        }
        #expect(await eventually { !failures().isEmpty }, "no claim failure was logged")
        await services.triggerGracefulShutdown()
        try await running.value
        let line = try #require(failures().first)
        #expect(line.level == "warning")
        #expect(line.metadata["db.statement"] == "claim(owner:lease:batchSize:)", "\(line.metadata)")
        let source = try #require(line.metadata["db.source"])
        #expect(source.hasPrefix("PushRelay/JobStore.swift:"), "\(source)")
        #expect(line.metadata["error"]?.contains("42P01") == true, "\(line.metadata)")
    }
}
