import Configuration
import Foundation
import Postgres
import TestSupport
import Testing

@testable import PushRelay

/// Each test locks `notifications` in a transaction of its own, so the writer's statements wait
/// for the lock (seen in `pg_locks`) and its writes stay in flight as long as the test needs.
/// Webhooks are queued with the completion form of `submit`, which queues before it returns, so
/// what is queued when does not depend on how fast a task is scheduled.
@Suite("Intake group commit")
struct IntakeWriterTests {
    static let waiting = "SELECT count(*) FROM pg_locks WHERE relation = 'notifications'::regclass AND NOT granted"

    @Test("webhooks that arrive while every write slot is busy are stored by one statement, not one taken early and the rest after it")
    func waitingWebhooksJoinOneBatch() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // applies the migrations
        let writer = Self.writer(test, maxConcurrentWrites: 1, overlapAfter: .zero)
        let results = Results()
        try await withThrowingTaskGroup(of: Void.self) { service in
            service.addTask { try await writer.run() }
            try await test.client.withTransaction { session in
                // The first webhook's statement waits for this lock and holds the only slot.
                _ = try await session.query("LOCK TABLE notifications IN SHARE ROW EXCLUSIVE MODE")
                results.submit(0, to: writer)
                #expect(try await eventually { try await test.count(Self.waiting) == 1 }, "the first batch's statement waits for the lock")
                // One webhook, time for the writer to look at it, then ten more: all eleven wait
                // for the slot, so all eleven form the next batch.
                results.submit(1, to: writer)
                try await Task.sleep(for: .milliseconds(300))
                for n in 2...11 { results.submit(n, to: writer) }
            }
            #expect(try await results.collect(12).allSatisfy { $0.deliveries == 1 })
            service.cancelAll()
        }
        #expect(try await test.count("SELECT count(*) FROM notifications") == 12)
        // Rows one statement wrote share its transaction id.
        #expect(try await test.count("SELECT count(DISTINCT xmin::text) FROM notifications") == 2)
        #expect(try await test.count("SELECT count(DISTINCT xmin::text) FROM notifications WHERE ticket_id <> 'w0'") == 1)
    }

    @Test("a second group commit starts beside one in flight only once that one has taken overlapAfter on the writer's clock")
    func overlapOnlyAfterTheDelay() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // applies the migrations
        let overlapAfter = Duration.seconds(4)
        // The writer times its writes on this clock; the test moves it.
        let time = ManualTime()
        let writer = Self.writer(test, maxConcurrentWrites: 2, overlapAfter: overlapAfter, clock: RelayClock(time))
        let results = Results()
        try await withThrowingTaskGroup(of: Void.self) { service in
            service.addTask { try await writer.run() }
            try await test.client.withTransaction { session in
                _ = try await session.query("LOCK TABLE notifications IN SHARE ROW EXCLUSIVE MODE")
                let started = time.now
                results.submit(0, to: writer)
                #expect(try await eventually { try await test.count(Self.waiting) == 1 }, "the first batch's statement waits for the lock")
                for n in 1...5 { results.submit(n, to: writer) }
                // The second batch waits on the clock for the first write to have taken overlapAfter.
                #expect(await eventually { time.deadlines == [started + overlapAfter] }, "\(time.deadlines)")
                time.advance(by: overlapAfter - .milliseconds(1))
                #expect(time.deadlines == [started + overlapAfter], "still waiting a millisecond before")
                #expect(try await test.count(Self.waiting) == 1, "the second batch has not started")
                time.advance(by: .milliseconds(1))
                #expect(try await eventually { try await test.count(Self.waiting) == 2 }, "then it starts beside the first")
                // Both slots busy: these form a third batch.
                for n in 6...10 { results.submit(n, to: writer) }
            }
            #expect(try await results.collect(11).count == 11)
            service.cancelAll()
        }
        #expect(try await test.count("SELECT count(*) FROM notifications") == 11)
        #expect(try await test.count("SELECT count(DISTINCT xmin::text) FROM notifications") == 3)
        for batch in [["w0"], (1...5).map { "w\($0)" }, (6...10).map { "w\($0)" }] {
            #expect(try await test.count("SELECT count(DISTINCT xmin::text) FROM notifications WHERE ticket_id = ANY($1)", [batch]) == 1, "\(batch)")
        }
    }

    @Test("webhooks.concurrent_write_after_ms: 5 ms unless set, 0 to 1000 ms")
    func overlapSetting() {
        func settings(_ value: Int?) -> WebhookSettings {
            var values: [AbsoluteConfigKey: ConfigValue] = [:]
            if let value { values["concurrent_write_after_ms"] = .init(.int(value), isSecret: false) }
            return WebhookSettings(config: ConfigReader(provider: InMemoryProvider(values: values)))
        }
        #expect(settings(nil).concurrentWriteAfter == .milliseconds(5))
        #expect(settings(0).concurrentWriteAfter == .zero)
        #expect(settings(20).concurrentWriteAfter == .milliseconds(20))
        #expect(settings(-3).concurrentWriteAfter == .zero)
        #expect(settings(60_000).concurrentWriteAfter == .milliseconds(1000))
    }

    /// A writer on connections of its own: the test's two hold the lock and look at `pg_locks`.
    static func writer(_ test: TestApp, maxConcurrentWrites: Int, overlapAfter: Duration, clock: RelayClock = .system) -> IntakeWriter {
        let client = PostgresClient(configuration: .test(conninfo: test.conninfo, maxConnections: 2), logger: TestDatabase.logger)
        return IntakeWriter(
            queue: DeliveryQueue(client: client),
            logger: TestDatabase.logger,
            settings: WebhookSettings(batchSize: 500, concurrentWrites: maxConcurrentWrites, concurrentWriteAfter: overlapAfter),
            clock: clock
        )
    }

    /// The answers to webhooks queued with ``submit(_:to:)``.
    final class Results: Sendable {
        let stream: AsyncStream<Result<IntakeReceipt, any Error>>
        let continuation: AsyncStream<Result<IntakeReceipt, any Error>>.Continuation

        init() { (stream, continuation) = AsyncStream.makeStream() }

        /// Queues webhook `n` (ticket `w<n>`, one new iOS device) before it returns.
        func submit(_ n: Int, to writer: IntakeWriter) {
            let webhook = PushNotification(title: "t", body: "b", ticketID: "w\(n)", devices: [.init(token: apnsToken(), platform: .ios)])
            writer.submit(IntakeItem(appID: "support", notification: webhook, requestID: nil)) { [continuation] in continuation.yield($0) }
        }

        /// The first `count` answers; throws the first failure.
        func collect(_ count: Int) async throws -> [IntakeReceipt] {
            var receipts: [IntakeReceipt] = []
            for await result in stream {
                receipts.append(try result.get())
                if receipts.count == count { break }
            }
            return receipts
        }
    }
}
