import Foundation
import Postgres
import Synchronization
import TestSupport
import Testing

@testable import PushRelay

@Suite("Provider tokens: a slow token endpoint costs the pool nothing")
struct ProviderTokenStoreTests {
    @Test("40 senders of two instances find the token due while the endpoint takes 3 s: one refresh, and the pool stays free")
    func slowRefreshHoldsNoConnection() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // applies the migrations
        // A small pool, as a relay's: every connection held by a waiting sender would starve intake.
        let pool = PostgresClient(
            configuration: .init(conninfo: test.conninfo, maxConnections: 3, acquireTimeout: .seconds(2)),
            logger: TestDatabase.logger
        )
        let instances = [ProviderTokenStore(client: pool), ProviderTokenStore(client: pool)]
        final class Count: Sendable { let value = Atomic<Int>(0) }
        let made = Count()
        let now = Date()
        let make: @Sendable () async throws -> ProviderTokenStore.Entry = {
            made.value.add(1, ordering: .relaxed)
            try await Task.sleep(for: .seconds(3))
            return .init(token: "fresh-\(UUID().uuidString)", issuedAt: now, expiresAt: now.addingTimeInterval(3600))
        }
        try await withThrowingTaskGroup(of: String?.self) { group in
            for index in 0..<40 {
                group.addTask {
                    try await instances[index % 2].token(credential: "fcm:slow@example.com", now: now, reuseFor: .infinity, rejected: nil, make: make)
                        .token
                }
            }
            // Meanwhile the pool answers other work without waiting for the refresh. A pool held by
            // waiting senders would make a query wait until the refresh ends (2.5 s more), so it
            // fails at the 2 s acquire timeout and this task throws; no shorter bound is timed here,
            // as one query on a loaded machine can take longer than a guess at its speed.
            group.addTask {
                try await Task.sleep(for: .milliseconds(500))
                for _ in 0..<10 {
                    try await pool.query("SELECT 1")
                    try await Task.sleep(for: .milliseconds(100))
                }
                return nil
            }
            var tokens = Set<String>()
            for try await token in group { if let token { tokens.insert(token) } }
            #expect(tokens.count == 1)
        }
        #expect(made.value.load(ordering: .relaxed) == 1)
        await pool.close()
    }
}
