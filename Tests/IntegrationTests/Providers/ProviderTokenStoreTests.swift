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

    @Test(
        "with the apps-store key, provider tokens are stored sealed: the row holds no token, and only a store with the key (or as its previous key) uses it"
    )
    func sealedAtRest() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // applies the migrations
        let key = try ManagedAppKey(bytes: Data((0..<32).map { UInt8($0) }))
        let otherKey = try ManagedAppKey(bytes: Data((0..<32).map { UInt8(255 - $0) }))
        let sealed = ManagedAppStoreSettings(key: key).providerTokenSealer
        let now = Date()
        let made = Mutex(0)
        func make(_ token: String) -> @Sendable () async throws -> ProviderTokenStore.Entry {
            {
                made.withLock { $0 += 1 }
                return .init(token: token, issuedAt: now, expiresAt: now.addingTimeInterval(3600))
            }
        }
        let credential = "apns:TEAM:KEY:sealed"
        let first = try await ProviderTokenStore(client: test.client, sealer: sealed)
            .token(credential: credential, now: now, reuseFor: 3000, rejected: nil, make: make("eyJ-secret-provider-token"))
        #expect(first.token == "eyJ-secret-provider-token")
        let stored = try #require(
            try await test.client.query("SELECT token FROM provider_tokens WHERE credential = $1", [credential]).first?.decode(String.self, at: 0)
        )
        #expect(!stored.contains("eyJ") && !stored.contains("secret-provider-token"), "\(stored)")
        #expect(stored.hasPrefix(ProviderTokenStore.sealedPrefix))

        // Another instance with the key uses the stored token; so does one after a key rotation.
        let again = try await ProviderTokenStore(client: test.client, sealer: sealed)
            .token(credential: credential, now: now, reuseFor: 3000, rejected: nil, make: make("unused"))
        #expect(again.token == "eyJ-secret-provider-token")
        let rotated = ManagedAppStoreSettings(key: otherKey, previousKey: key).providerTokenSealer
        let afterRotation = try await ProviderTokenStore(client: test.client, sealer: rotated)
            .token(credential: credential, now: now, reuseFor: 3000, rejected: nil, make: make("unused"))
        #expect(afterRotation.token == "eyJ-secret-provider-token")
        #expect(made.withLock { $0 } == 1)

        // Without the key the sealed value is of no use: a fresh token replaces it, in clear.
        let unkeyed = try await ProviderTokenStore(client: test.client)
            .token(credential: credential, now: now, reuseFor: 3000, rejected: nil, make: make("plain-token"))
        #expect(unkeyed.token == "plain-token")
        #expect(made.withLock { $0 } == 2)
        // And a token stored in clear is not used once a key is set: it is replaced, sealed.
        let resealed = try await ProviderTokenStore(client: test.client, sealer: sealed)
            .token(credential: credential, now: now, reuseFor: 3000, rejected: nil, make: make("sealed-again"))
        #expect(resealed.token == "sealed-again")
        let now2 = try #require(
            try await test.client.query("SELECT token FROM provider_tokens WHERE credential = $1", [credential]).first?.decode(String.self, at: 0)
        )
        #expect(now2.hasPrefix(ProviderTokenStore.sealedPrefix) && !now2.contains("sealed-again"))
    }
}
