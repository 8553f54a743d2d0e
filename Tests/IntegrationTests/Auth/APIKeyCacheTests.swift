import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Postgres
import TestSupport
import Testing

@testable import PushRelay

/// API keys verified from memory: what a request with a key costs the database, and how soon a
/// revocation made elsewhere takes effect.
@Suite("API keys: in-memory verification, revocation across instances", .serialized)
struct APIKeyCacheTests {
    /// A request authenticated by `key` that then needs nothing from the database: the key lacks
    /// `devices:read`, so the route answers 403 right after authentication.
    static func probe(_ client: some TestClientProtocol, _ key: String) async throws -> HTTPResponse.Status {
        try await client.execute(uri: "/v1/apps/support/devices/probe-token", method: .get, headers: bearer(key)).status
    }

    static func bogusKey() -> String {
        let prefix = (0..<6).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        return "prk_\(prefix)_\(UUID().uuidString)"
    }

    @Test("600 requests with one app key read nothing: a revocation the relay has not read shows only once its clock moves a second")
    func oneKeyManyRequests() async throws {
        let test = try await TestApp.make()
        // The relay's clock stands still unless the test moves it, so whether a request reads the
        // database shows in its answer, whatever the machine's speed: the key is revoked in the
        // database behind the relay's back, and a request that read the keys would be refused.
        let time = ManualTime()
        try await test.application(clock: RelayClock(time)).test(.router) { client in
            let key = try await test.key(app: "support", scopes: [.unreadRead])
            #expect(try await Self.probe(client, key) == .forbidden)
            let prefix = try #require(APIKey(presented: key)).prefix
            #expect(try await APIKeyStore(client: test.client).revoke(prefix))
            for _ in 0..<600 {
                #expect(try await Self.probe(client, key) == .forbidden, "a request read the revocation while the copy was fresh")
            }
            // A second later the next request reads the generation, and the keys with it.
            time.advance(by: .seconds(1) + .milliseconds(1))
            #expect(try await Self.probe(client, key) == .unauthorized)
        }
    }

    @Test("a flood of made-up keys reads nothing: one check per miss interval of the relay's clock; nothing remembered; refused with 401")
    func bogusFlood() async throws {
        let test = try await TestApp.make()
        let time = ManualTime()
        try await test.application(clock: RelayClock(time)).test(.router) { client in
            let key = try await test.key(app: "support", scopes: [.unreadRead])
            #expect(try await Self.probe(client, key) == .forbidden)
            // Created behind the relay's back: the first request to read the keys makes it work.
            let created = try await test.key(app: "support", scopes: [.unreadRead])
            let statuses = try await withThrowingTaskGroup(of: [HTTPResponse.Status].self) { group in
                for _ in 0..<32 {
                    group.addTask {
                        var statuses: [HTTPResponse.Status] = []
                        for _ in 0..<25 { statuses.append(try await Self.probe(client, Self.bogusKey())) }
                        return statuses
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(statuses.count == 800)
            #expect(statuses.allSatisfy { $0 == .unauthorized })
            // The copy was checked at this instant of the clock: no made-up key read the keys.
            #expect(try await Self.probe(client, created) == .unauthorized, "a made-up key read the keys")
            // After the miss interval (100 ms) an unknown prefix checks again.
            time.advance(by: .milliseconds(100))
            #expect(try await Self.probe(client, created) == .forbidden)
        }
        // The store remembers live keys only (the two made here), however many unknown ones it was shown.
        let store = APIKeyStore(client: test.client)
        for _ in 0..<30 { #expect(try await store.verify(try #require(APIKey(presented: Self.bogusKey()))) == nil) }
        #expect(store.cache.count == 2)
    }

    @Test("a key revoked through the CLI's path stops working on two other instances once their copy is stale (the second: APIKeyCacheClockTests)")
    func revocationAcrossInstances() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { first in
            try await test.application().test(.router) { second in
                let key = try await test.key(app: "support", scopes: [.unreadRead])
                #expect(try await Self.probe(first, key) == .forbidden)
                #expect(try await Self.probe(second, key) == .forbidden)
                // Both instances now hold the key; `keys revoke` runs this on its own connection.
                let prefix = try #require(APIKey(presented: key)).prefix
                #expect(try await APIKeyStore(client: test.client).revoke(prefix))
                for (name, client) in [("first", first), ("second", second)] as [(String, any TestClientProtocol)] {
                    let refused = try await eventually { try await Self.probe(client, key) == .unauthorized }
                    #expect(refused, "the revoked key still works on the \(name) instance")
                }
                // A key created meanwhile works at once: an unknown prefix makes the instance check again.
                let fresh = try await test.key(app: "support", scopes: [.unreadRead])
                #expect(try await Self.probe(first, fresh) == .forbidden)
                #expect(try await Self.probe(second, fresh) == .forbidden)
            }
        }
    }

    @Test("after a failover that lost the last key change, a key revoked next is refused: the generation never comes back to a value held")
    func generationAfterLostChange() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // applies the migrations
        let admin = APIKeyStore(client: test.client)  // the CLI's, or another instance's
        let instance = APIKeyStore(client: test.client)
        let (doomed, doomedKey) = try await admin.create(appID: "support", scopes: [], label: "doomed")
        let generation = { try await test.client.query("SELECT generation FROM api_key_generation").first?.decode(Int64.self, at: 0) ?? 0 }
        let before = try await generation()
        // A key created on the old primary, and seen by the instance (its copy now holds that generation).
        let (lost, lostKey) = try await admin.create(appID: "support", scopes: [], label: "lost")
        #expect(try await instance.verify(lostKey)?.id == lost.id)
        // The failover: the new primary never got that change (its row and its generation).
        try await test.client.withTransaction { session in
            _ = try await session.query("ALTER TABLE api_keys DISABLE TRIGGER api_keys_changed")
            _ = try await session.query("DELETE FROM api_keys WHERE id = $1", [lost.id])
            _ = try await session.query("UPDATE api_key_generation SET generation = $1", [before])
            _ = try await session.query("ALTER TABLE api_keys ENABLE TRIGGER api_keys_changed")
        }
        // The next change, on the new primary: a revocation. A counter would make the generation
        // the instance holds again, and the instance would keep both keys.
        #expect(try await admin.revoke(doomed.prefix))
        #expect(
            try await eventually { try await instance.verify(doomedKey) == nil },
            "the revoked key is still accepted: the instance kept its copy"
        )
        #expect(try await instance.verify(lostKey) == nil)
    }

    @Test("with more live keys than the copy holds, keys outside it are found in the database")
    func overCapacity() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()
        let keys = try await (0..<3).asyncMap { _ in try await test.key(app: "support", scopes: [.unreadRead]) }
        let store = APIKeyStore(client: test.client, cache: APIKeyCache(capacity: 2))
        for key in keys {
            #expect(try await store.verify(try #require(APIKey(presented: key)))?.appID == "support")
        }
        #expect(store.cache.count == 2)
        #expect(try await store.verify(try #require(APIKey(presented: Self.bogusKey()))) == nil)
        let wrongSecret = try #require(APIKey(presented: String(keys[0].dropLast(3)) + "AAA"))
        #expect(try await store.verify(wrongSecret) == nil)
    }
}

extension Sequence {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
