import Foundation
import Postgres
@testable import PushRelay
import TestSupport
import Testing

@Suite("Intake group commit")
struct IntakeWriterTests {
    @Test("webhooks that arrive while every write slot is busy are stored by one statement, not one taken early and the rest after it")
    func waitingWebhooksJoinOneBatch() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // applies the migrations
        // The writer has its own connections: the test's two hold the lock and look at pg_locks.
        let writerClient = PostgresClient(configuration: .init(conninfo: test.conninfo, maxConnections: 2), logger: TestDatabase.logger)
        let writer = IntakeWriter(queue: DeliveryQueue(client: writerClient), logger: TestDatabase.logger, maxBatch: 500, maxConcurrentWrites: 1)
        try await withThrowingTaskGroup(of: Void.self) { service in
            service.addTask { try await writer.run() }
            try await withThrowingTaskGroup(of: IntakeReceipt.self) { submissions in
                try await test.client.withTransaction { session in
                    // The first webhook's statement waits for this lock and holds the only slot.
                    _ = try await session.query("LOCK TABLE notifications IN SHARE ROW EXCLUSIVE MODE")
                    submissions.addTask { try await writer.submit(Self.item(0)) }
                    let blocked = try await eventually {
                        try await test.count("SELECT count(*) FROM pg_locks WHERE relation = 'notifications'::regclass AND NOT granted") == 1
                    }
                    #expect(blocked, "the first batch's statement waits for the lock")
                    // One webhook, time for the writer to look at it, then ten more: all eleven
                    // wait for the slot, so all eleven form the next batch.
                    submissions.addTask { try await writer.submit(Self.item(1)) }
                    try await Task.sleep(for: .milliseconds(300))
                    for n in 2...11 { submissions.addTask { try await writer.submit(Self.item(n)) } }
                    try await Task.sleep(for: .milliseconds(300))
                }
                var receipts = 0
                for try await receipt in submissions {
                    #expect(receipt.deliveries == 1)
                    receipts += 1
                }
                #expect(receipts == 12)
            }
            service.cancelAll()
        }
        #expect(try await test.count("SELECT count(*) FROM notifications") == 12)
        // Rows one statement wrote share its transaction id.
        #expect(try await test.count("SELECT count(DISTINCT xmin::text) FROM notifications") == 2)
        #expect(try await test.count("SELECT count(DISTINCT xmin::text) FROM notifications WHERE ticket_id <> 'w0'") == 1)
    }

    @Test("a second group commit starts beside one in flight only once that one has taken overlapAfter")
    func overlapOnlyAfterTheDelay() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // applies the migrations
        let writerClient = PostgresClient(configuration: .init(conninfo: test.conninfo, maxConnections: 2), logger: TestDatabase.logger)
        let writer = IntakeWriter(
            queue: DeliveryQueue(client: writerClient), logger: TestDatabase.logger, maxBatch: 500, maxConcurrentWrites: 2,
            overlapAfter: .seconds(2)
        )
        let waiting = "SELECT count(*) FROM pg_locks WHERE relation = 'notifications'::regclass AND NOT granted"
        try await withThrowingTaskGroup(of: Void.self) { service in
            service.addTask { try await writer.run() }
            try await withThrowingTaskGroup(of: IntakeReceipt.self) { submissions in
                try await test.client.withTransaction { session in
                    _ = try await session.query("LOCK TABLE notifications IN SHARE ROW EXCLUSIVE MODE")
                    submissions.addTask { try await writer.submit(Self.item(0)) }
                    #expect(try await eventually { try await test.count(waiting) == 1 }, "the first batch's statement waits for the lock")
                    let firstWaiting = ContinuousClock.now
                    for n in 1...5 { submissions.addTask { try await writer.submit(Self.item(n)) } }
                    try await Task.sleep(for: .milliseconds(300))
                    #expect(try await test.count(waiting) == 1, "the second batch waits while the first has taken less than overlapAfter")
                    #expect(try await eventually { try await test.count(waiting) == 2 }, "then it starts beside the first")
                    #expect(ContinuousClock.now - firstWaiting >= .milliseconds(1900))
                    // Both slots busy: these form a third batch.
                    for n in 6...10 { submissions.addTask { try await writer.submit(Self.item(n)) } }
                    try await Task.sleep(for: .milliseconds(300))
                }
                var receipts = 0
                for try await _ in submissions { receipts += 1 }
                #expect(receipts == 11)
            }
            service.cancelAll()
        }
        #expect(try await test.count("SELECT count(*) FROM notifications") == 11)
        #expect(try await test.count("SELECT count(DISTINCT xmin::text) FROM notifications") == 3)
        for batch in [["w0"], (1...5).map { "w\($0)" }, (6...10).map { "w\($0)" }] {
            #expect(try await test.count("SELECT count(DISTINCT xmin::text) FROM notifications WHERE ticket_id = ANY($1)", [batch]) == 1, "\(batch)")
        }
    }

    static func item(_ n: Int) -> IntakeItem {
        IntakeItem(
            appID: "support", webhook: ZendeskWebhook(title: "t", body: "b", ticketID: "w\(n)", devices: [.init(token: apnsToken(), platform: .ios)]),
            requestID: nil
        )
    }
}
