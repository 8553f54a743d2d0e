import Foundation
import TestSupport
import Testing

@testable import Postgres
@testable import PushRelay

/// The hub's ETag cache against announcements, driven through its listener events and its read
/// calls in the order a race would interleave them.
@Suite("UnreadHub: ETags kept only for reads no announcement overtook")
struct UnreadHubTests {
    /// A running hub fed by `events`; stopped when `body` returns.
    static func withHub(
        maxCacheBytes: Int = UnreadHub.defaultCacheBytes,
        _ body: (UnreadHub, AsyncStream<PostgresListenerEvent>.Continuation) async throws -> Void
    ) async throws {
        let (events, feed) = AsyncStream.makeStream(of: PostgresListenerEvent.self)
        let hub = UnreadHub(events: events, settings: UnreadSettings(heartbeat: .seconds(60), cacheBytes: maxCacheBytes))
        let running = Task { try await hub.run() }
        defer { running.cancel() }
        feed.yield(.listening)
        #expect(
            await eventually {
                let generation = hub.beginRead()
                hub.abandonRead(since: generation)
                return generation != nil
            }
        )
        try await body(hub, feed)
    }

    @Test("an announcement's lines: split at each newline byte, empty lines dropped, a carriage return kept in its line")
    func announcementLines() {
        #expect(UnreadHub.lines(of: "support alice\nsupport bob") == ["support alice", "support bob"])
        #expect(UnreadHub.lines(of: "\n\nsupport alice\n\n") == ["support alice"])
        #expect(UnreadHub.lines(of: "") == [])
        // A Character split would see "\r\n" as one character and not split there.
        #expect(UnreadHub.lines(of: "support a\r\nsupport é🎉") == ["support a\r", "support é🎉"])
    }

    @Test("the ETag cache is bounded in bytes: 1 KiB owner ids fill it sooner than short ones, and it never exceeds its bound")
    func cacheBoundedInBytes() async throws {
        try await Self.withHub(maxCacheBytes: 256 << 10) { hub, _ in
            for index in 0..<2000 {
                let owner = String(repeating: "x", count: 1000) + "\(index)"
                let read = hub.beginRead()
                hub.remember(app: "a", owner: owner, etag: "\"0123456789abcdef01234567\"", since: read)
                #expect(hub.cachedBytes <= 256 << 10)
            }
            // The last owners are still cached: past the bound the oldest go, one at a time.
            #expect(hub.cachedETag(app: "a", owner: String(repeating: "x", count: 1000) + "1999") != nil)
            // Announcements kept while a read is in flight count too.
            let inFlight = hub.beginRead()
            for index in 0..<2000 { hub.changed(app: "a", owner: String(repeating: "y", count: 1000) + "\(index)") }
            #expect(hub.cachedBytes <= 2 * (256 << 10))
            hub.abandonRead(since: inFlight)
        }
    }

    @Test("one app filling the ETag cache evicts its own least recently used ETags: another app's within its share stay")
    func cacheSharedFairly() async throws {
        try await Self.withHub(maxCacheBytes: 256 << 10) { hub, _ in
            let etag = "\"0123456789abcdef01234567\""
            for owner in ["alice", "bob", "carol"] {
                hub.remember(app: "quiet", owner: owner, etag: etag, since: hub.beginRead())
            }
            let quietBytes = hub.cachedBytes(app: "quiet")
            // About 58,000 made-up owners' worth of a 64 MiB cache, scaled to this one's 256 KiB.
            for index in 0..<5000 {
                hub.remember(app: "noisy", owner: "made-up-\(index)", etag: etag, since: hub.beginRead())
                #expect(hub.cachedBytes <= 256 << 10)
                // The noisy app polls one owner of its own again and again: recently used, kept.
                if index % 100 == 0 { #expect(hub.cachedETag(app: "noisy", owner: "made-up-0") == etag) }
            }
            for owner in ["alice", "bob", "carol"] {
                #expect(hub.cachedETag(app: "quiet", owner: owner) == etag, "\(owner)'s ETag was evicted by another app")
            }
            #expect(hub.cachedBytes(app: "quiet") == quietBytes)
            #expect(hub.cachedETag(app: "noisy", owner: "made-up-0") == etag, "used again, not evicted")
            #expect(hub.cachedETag(app: "noisy", owner: "made-up-1") == nil, "the least recently used went first")
            #expect(hub.cachedETag(app: "noisy", owner: "made-up-4999") == etag)
        }
    }

    @Test("reads overtaken by an announcement keep no ETag, the last one too after the first has ended; one begun after it does")
    func overtakenReads() async throws {
        try await Self.withHub { hub, _ in
            let first = hub.beginRead()
            let second = hub.beginRead()
            hub.changed(app: "a", owner: "u")
            hub.remember(app: "a", owner: "u", etag: "\"1\"", since: first)
            #expect(hub.cachedETag(app: "a", owner: "u") == nil, "the first read began before the announcement")
            // The first read has ended; the second, still in flight, was overtaken too.
            hub.remember(app: "a", owner: "u", etag: "\"2\"", since: second)
            #expect(hub.cachedETag(app: "a", owner: "u") == nil, "the second read began before the announcement")
            // With no read in flight, an announcement is no obstacle to a read begun after it.
            hub.changed(app: "a", owner: "u")
            let third = hub.beginRead()
            hub.remember(app: "a", owner: "u", etag: "\"3\"", since: third)
            #expect(hub.cachedETag(app: "a", owner: "u") == "\"3\"")
        }
    }

    @Test("announcements by NOTIFY drop the owners' ETags and overtake reads in flight; a failed read ends without an ETag")
    func notifiedOwners() async throws {
        try await Self.withHub { hub, feed in
            for owner in ["u", "v"] {
                let read = hub.beginRead()
                hub.remember(app: "a", owner: owner, etag: "\"\(owner)\"", since: read)
            }
            let inFlight = hub.beginRead()
            let failed = hub.beginRead()
            hub.abandonRead(since: failed)
            feed.yield(.notification(PostgresNotification(channel: UnreadChannel.name, payload: "a u\nb w", processID: 1)))
            #expect(await eventually { hub.cachedETag(app: "a", owner: "u") == nil })
            #expect(hub.cachedETag(app: "a", owner: "v") == "\"v\"")
            hub.remember(app: "b", owner: "w", etag: "\"w\"", since: inFlight)
            #expect(hub.cachedETag(app: "b", owner: "w") == nil, "b w was announced while this read was in flight")
            let after = hub.beginRead()
            hub.remember(app: "b", owner: "w", etag: "\"w2\"", since: after)
            #expect(hub.cachedETag(app: "b", owner: "w") == "\"w2\"")
        }
    }
}
