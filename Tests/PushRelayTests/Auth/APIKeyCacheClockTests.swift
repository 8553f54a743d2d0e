import Foundation
import Synchronization
import TestSupport
import Testing

@testable import PushRelay

/// ``APIKeyCache`` on a clock the test moves: when the copy is trusted and when it reads the
/// generation again, with no waiting.
@Suite("API key cache: freshness and the pace of checks, on a test clock")
struct APIKeyCacheClockTests {
    /// A database as far as the cache sees it: a generation and the live keys, and how often each was read.
    final class Keys: Sendable {
        let state = Mutex<(generation: Int64, prefixes: [String], generationReads: Int, keyReads: Int)>((1, ["prk_live"], 0, 0))

        var loader: APIKeyCache.Loader {
            APIKeyCache.Loader(
                generation: {
                    self.state.withLock { state in
                        state.generationReads += 1
                        return (state.generation, 0)
                    }
                },
                keys: { _ in
                    self.state.withLock { state in
                        state.keyReads += 1
                        let record = { (prefix: String) in
                            APIKeyRecord(id: UUID(), prefix: prefix, appID: "support", scopes: [], label: nil, createdAt: Date(), revokedAt: nil)
                        }
                        return APIKeyCache.Snapshot(
                            generation: state.generation,
                            keys: Dictionary(uniqueKeysWithValues: state.prefixes.map { ($0, APIKeyCache.Entry(hash: [], record: record($0))) }),
                            complete: true
                        )
                    }
                },
                sessions: { _ in APIKeyCache.Sessions() }
            )
        }

        func revokeAll() { state.withLock { $0 = ($0.generation + 1, [], $0.generationReads, $0.keyReads) } }
        /// Reads so far, as "generation/keys".
        var reads: String { state.withLock { "\($0.generationReads)/\($0.keyReads)" } }
    }

    @Test("a copy is trusted for one second: a key revoked meanwhile works until then, and is refused from the first request after it")
    func freshness() async throws {
        let time = ManualTime()
        let cache = APIKeyCache(clock: RelayClock(time))
        let keys = Keys()
        func lookup() async throws -> Bool {
            try await cache.snapshot(notBefore: time.now - cache.freshness, rateLimited: false, loader: keys.loader).keys["prk_live"] != nil
        }
        #expect(try await lookup())
        #expect(keys.reads == "1/1")
        keys.revokeAll()
        time.advance(by: .milliseconds(999))
        #expect(try await lookup(), "within the second the copy answers, with no query")
        #expect(keys.reads == "1/1")
        time.advance(by: .milliseconds(2))
        #expect(try await !lookup(), "after the second the generation is read, and the new keys")
        #expect(keys.reads == "2/2")
        time.advance(by: .milliseconds(500))
        #expect(try await !lookup())
        #expect(keys.reads == "2/2", "an unchanged copy is trusted for another second")
    }

    @Test("checks for unknown prefixes are paced: the second within 100 ms waits on the clock until the interval has passed")
    func missesArePaced() async throws {
        let time = ManualTime()
        let cache = APIKeyCache(clock: RelayClock(time))
        let keys = Keys()
        _ = try await cache.snapshot(notBefore: time.now, rateLimited: true, loader: keys.loader)
        time.advance(by: .milliseconds(30))
        let second = Task { try await cache.snapshot(notBefore: time.now, rateLimited: true, loader: keys.loader) }
        #expect(await eventually { time.sleepers == 1 }, "the second check did not wait on the clock")
        #expect(keys.reads == "1/1")
        time.advance(by: .milliseconds(69))
        #expect(time.sleepers == 1, "woken before the interval passed")
        time.advance(by: .milliseconds(1))
        #expect(await eventually { keys.reads == "2/1" }, "the second check did not run once the interval had passed")
        // Ends a check still asleep (a failure above) instead of waiting for ever.
        second.cancel()
        _ = try? await second.value
    }
}
