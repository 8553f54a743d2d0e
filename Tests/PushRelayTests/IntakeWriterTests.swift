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
        @Sendable func item(_ n: Int) -> IntakeItem {
            IntakeItem(
                appID: "support", webhook: ZendeskWebhook(title: "t", body: "b", ticketID: "w\(n)", devices: [.init(token: apnsToken(), platform: .ios)]),
                requestID: nil
            )
        }
        try await withThrowingTaskGroup(of: Void.self) { service in
            service.addTask { try await writer.run() }
            try await withThrowingTaskGroup(of: IntakeReceipt.self) { submissions in
                try await test.client.withTransaction { session in
                    // The first webhook's statement waits for this lock and holds the only slot.
                    _ = try await session.query("LOCK TABLE notifications IN SHARE ROW EXCLUSIVE MODE")
                    submissions.addTask { try await writer.submit(item(0)) }
                    let blocked = try await eventually {
                        try await test.count("SELECT count(*) FROM pg_locks WHERE relation = 'notifications'::regclass AND NOT granted") == 1
                    }
                    #expect(blocked, "the first batch's statement waits for the lock")
                    // One webhook, time for the writer to look at it, then ten more: all eleven
                    // wait for the slot, so all eleven form the next batch.
                    submissions.addTask { try await writer.submit(item(1)) }
                    try await Task.sleep(for: .milliseconds(300))
                    for n in 2...11 { submissions.addTask { try await writer.submit(item(n)) } }
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
}
