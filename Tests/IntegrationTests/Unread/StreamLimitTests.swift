import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Postgres
import TestSupport
import Testing

@testable import PushRelay

/// Live unread streams are long-lived connections a user opens at will: they must not take what
/// webhook intake needs, nor outlive their credential.
@Suite("Live stream limits: per user, per instance, and the connections kept for intake", .serialized)
struct StreamLimitTests {
    static let url = "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)"
    static let json: HTTPFields = [.contentType: "application/json"]

    static func setting(_ value: Int) -> ConfigValue { .init(.int(value), isSecret: false) }
    /// How long a request waits for a pool connection in the per-user cap test.
    /// Long beside a free connection's acquisition on a loaded machine, short beside the test's limit.
    static let acquireSeconds = 15
    static func streamPath(_ user: String) -> String { "/v1/apps/support/users/\(user)/unread/stream" }

    /// Once the hub waits for its next heartbeat (a second, `unread.heartbeat_seconds: 1`), moves
    /// the relay's clock on by `step`; false when the hub never waited.
    static func beat(_ time: ManualTime, by step: Duration = .seconds(1)) async -> Bool {
        let waiting = await eventually { time.deadlines.contains(time.now + .seconds(1)) }
        time.advance(by: step)
        return waiting
    }

    /// Posts a webhook and returns its status.
    static func postWebhook(_ client: some TestClientProtocol) async throws -> HTTPResponse.Status {
        try await client.execute(
            uri: url,
            method: .post,
            headers: json,
            body: jsonBody(webhook(devices: [(apnsToken(), "ios")]))
        ).status
    }

    @Test(
        "one user's streams past the cap are 429 with Retry-After; four open streams hold none of a two-connection pool, so webhooks stay 202",
        .timeLimit(.minutes(2))
    )
    func perOwnerCap() async throws {
        let test = try await TestApp.make()
        // A stream whose client has gone is noticed when its next heartbeat is written. The pool is
        // smaller than the streams opened: a stream that kept a connection would leave webhooks
        // waiting out the acquire timeout and answered 503.
        let app = try await test.application(extra: [
            "unread.max_streams_per_owner": Self.setting(3), "unread.heartbeat_seconds": Self.setting(1),
            "database.max_connections": Self.setting(2),
            "database.acquire_timeout_seconds": .init(.double(Double(Self.acquireSeconds)), isSecret: false),
        ])
        let token = try await TestApp.userToken("alice")
        try await app.testLive { client in
            let port = try #require(client.port)
            var open: [SSEReader] = []
            defer { for stream in open { stream.hangUp() } }
            for _ in 0..<3 {
                let stream = try SSEReader(port: port, path: Self.streamPath("alice"), bearer: token)
                #expect(try await stream.nextEvent() != nil)
                open.append(stream)
            }
            let refused = try #require(
                try await RawHTTP.send(port: port, RawHTTP.request("GET", Self.streamPath("alice"), headers: [("Authorization", "Bearer \(token)")]))
            )
            #expect(refused.status == 429)
            #expect(refused.header("Retry-After") != nil)
            #expect(refused.text.contains("too_many_streams"))
            // Another user is not affected.
            let bob = try SSEReader(port: port, path: Self.streamPath("bob"), bearer: try await TestApp.userToken("bob"))
            open.append(bob)
            #expect(try await bob.nextEvent() != nil)
            // Webhooks are not held up: the streams hold no connection (they never release one they
            // took while open), so a webhook that needed one of theirs would wait out the acquire
            // timeout and be 503. The answer itself is the check, not how long it took.
            for _ in 0..<3 {
                let status = try await Self.postWebhook(client)
                #expect(status == .accepted, "a webhook beside four open streams was \(status)")
            }
            // A closed stream frees its place.
            open.removeFirst().hangUp()
            #expect(
                await eventually {
                    let again = try? SSEReader(port: port, path: Self.streamPath("alice"), bearer: token)
                    defer { again?.hangUp() }
                    return (try? await again?.nextEvent()) != nil
                }
            )
        }
    }

    @Test(
        "fair shares: one credential holds at most a quarter of the instance's streams and one app three quarters; another app still gets one",
        .timeLimit(.minutes(2))
    )
    func fairShares() async throws {
        let test = try await TestApp.make()
        // 8 streams: a credential's default share is 2, an app's 6.
        let app = try await test.application(extra: ["unread.max_streams": Self.setting(8), "unread.heartbeat_seconds": Self.setting(1)])
        try await app.testLive { client in
            let port = try #require(client.port)
            var open: [SSEReader] = []
            defer { for stream in open { stream.hangUp() } }
            func refusal(_ path: String, key: String, spelling: String = "Bearer ", extra: [(String, String)] = []) async throws -> RawHTTP.Answer? {
                try await RawHTTP.send(port: port, RawHTTP.request("GET", path, headers: [("Authorization", spelling + key)] + extra))
            }
            // One app key names owners of its choosing: its third stream is past its share.
            let keys = [try await test.key(app: "support"), try await test.key(app: "support"), try await test.key(app: "support")]
            for (index, key) in keys.enumerated() {
                for owner in 0..<2 {
                    let stream = try SSEReader(port: port, path: Self.streamPath("u\(index)-\(owner)"), bearer: key)
                    #expect(try await stream.nextEvent() != nil)
                    open.append(stream)
                }
                if index == 0 {
                    // Spelt otherwise, with a cookie besides: still the same credential.
                    let third = try #require(
                        try await refusal(Self.streamPath("u0-2"), key: key, spelling: "bearer   ", extra: [("Cookie", "junk=1")])
                    )
                    #expect(third.status == 429)
                    #expect(third.text.contains("this credential has 2 live streams open"), "\(third.text)")
                }
            }
            // Three keys of one app hold 6 streams, the app's share: a fourth key is refused too.
            let fourth = try #require(try await refusal(Self.streamPath("u3-0"), key: try await test.key(app: "support")))
            #expect(fourth.status == 429)
            #expect(fourth.text.contains("this app has 6 live streams open"), "\(fourth.text)")
            // Another app still finds a place.
            let other = try SSEReader(port: port, path: "/v1/apps/other/users/bob/unread/stream", bearer: try await test.key(app: "other"))
            open.append(other)
            #expect(try await other.nextEvent() != nil)
        }
    }

    @Test("one key's console sessions share its stream share: signed in twice, it still holds a credential's share", .timeLimit(.minutes(2)))
    func sessionsShareTheirKeysShare() async throws {
        let test = try await TestApp.make()
        // 8 streams: a credential's share is 2.
        let app = try await test.application(extra: ["unread.max_streams": Self.setting(8), "unread.heartbeat_seconds": Self.setting(1)])
        try await app.testLive { client in
            let port = try #require(client.port)
            var open: [SSEReader] = []
            defer { for stream in open { stream.hangUp() } }
            let key = try await test.key(app: "support")
            let first = try #require(try await ConsoleTests.signIn(client, key: key).1)
            let second = try #require(try await ConsoleTests.signIn(client, key: key).1)
            #expect(first.cookie != second.cookie)
            for (index, browser) in [first, second].enumerated() {
                let stream = try SSEReader(port: port, path: Self.streamPath("s\(index)"), header: "Cookie: \(browser.cookie)")
                #expect(try await stream.nextEvent() != nil)
                open.append(stream)
            }
            // Two streams through two sessions of one key: the key's share is used up, by any way in.
            for header in ["Cookie: \(second.cookie)", "Authorization: Bearer \(key)"] {
                let request = RawHTTP.request(
                    "GET",
                    Self.streamPath("s2"),
                    headers: [(String(header.prefix { $0 != ":" }), String(header.drop { $0 != " " }.dropFirst()))]
                )
                let refused = try #require(try await RawHTTP.send(port: port, request))
                #expect(refused.status == 429, "\(header.prefix(6)): \(refused.text)")
                #expect(refused.text.contains("this credential has 2 live streams open"), "\(refused.text)")
            }
        }
    }

    @Test("twice max_connections streams from many users: a new connection's webhook is still 202", .timeLimit(.minutes(2)))
    func streamsCannotTakeIntakeConnections() async throws {
        // A `push-relay serve` process: HummingbirdTesting's server binds an address of its own, and
        // the configuration it copies for that leaves out the accept limit (max_connections).
        let relay = try await HostileRelay.start(
            appYAML: """
                  - id: support
                    webhook_secrets: ["\(HostileRelay.secret)"]
                    user_tokens:
                      secret: "\(TestApp.userTokenKey)"
                """,
            extraYAML: "http:\n  max_connections: 40\n  intake_reserved_connections: 8"
        )
        defer { relay.relay.stop() }
        var streams: [SSEReader] = []
        defer { for stream in streams { stream.hangUp() } }
        for index in 0..<80 {
            streams.append(
                try SSEReader(port: relay.port, path: Self.streamPath("user\(index)"), bearer: try await TestApp.userToken("user\(index)"))
            )
        }
        // Every connection has been answered: a stream, or a refusal that closed it (connections
        // past max_connections wait in the listen backlog until a refused one closes).
        #expect(await eventually { streams.allSatisfy { $0.status != nil } })
        let served = streams.filter { $0.status == 200 && !$0.ended }.count
        let refused = streams.filter { $0.status == 503 }.count
        #expect(served <= 32, "\(served) streams were served past the general share")
        #expect(served + refused == 80)
        // Each webhook comes on a connection of its own, which must be accepted while the streams
        // hold theirs: a starved one would wait in the backlog for a stream to close (none does),
        // so it would never be answered. The client waits for it up to the hang ceiling.
        for _ in 0..<3 {
            let answer = try await relay.send(
                Fuzz.post(Self.url, Array(Fuzz.webhook(devices: [(apnsToken(), "ios")]).utf8)),
                timeout: hangCeiling
            )
            #expect(answer?.status == 202, "\(answer.map { "\($0.status) \($0.text)" } ?? "no answer within \(hangCeiling)")")
            if answer == nil { break }
        }
    }

    @Test("a stream ends when its user token expires", .timeLimit(.minutes(1)))
    func streamEndsWithCredential() async throws {
        let test = try await TestApp.make()
        // Heartbeats and the dates tokens expire at follow the relay's clock, which the test moves.
        let time = ManualTime()
        let app = try await test.application(
            extra: ["unread.heartbeat_seconds": Self.setting(1), "unread.stream_max_seconds": Self.setting(86_400)],
            clock: RelayClock(time)
        )
        let token = try await TestApp.userToken("carol", expiresIn: 600)
        try await app.testLive { client in
            let stream = try SSEReader(port: try #require(client.port), path: Self.streamPath("carol"), bearer: token)
            defer { stream.hangUp() }
            #expect(try await stream.nextEvent() != nil)
            #expect(await Self.beat(time), "the hub waits for the next heartbeat")
            #expect(await eventually { stream.heartbeats > 0 }, "a heartbeat while the token is valid")
            #expect(!stream.ended)
            // The next heartbeat comes after the token's expiry (not the stream's day): it ends the stream.
            #expect(await Self.beat(time, by: .seconds(1200)))
            #expect(await eventually { stream.ended })
        }
    }

    @Test("a stream ends at unread.stream_max_seconds of the relay's clock, not before", .timeLimit(.minutes(1)))
    func streamEndsAtItsLifetime() async throws {
        let test = try await TestApp.make()
        let time = ManualTime()
        let app = try await test.application(
            extra: ["unread.heartbeat_seconds": Self.setting(1), "unread.stream_max_seconds": Self.setting(10)],
            clock: RelayClock(time)
        )
        try await app.testLive { client in
            let stream = try SSEReader(port: try #require(client.port), path: Self.streamPath("gil"), bearer: try await TestApp.userToken("gil"))
            defer { stream.hangUp() }
            #expect(try await stream.nextEvent() != nil)
            // A heartbeat a second for nine seconds: each one sent, the stream open.
            for second in 1...9 {
                #expect(await Self.beat(time))
                #expect(await eventually { stream.heartbeats >= second }, "heartbeat \(second)")
            }
            #expect(!stream.ended)
            #expect(await Self.beat(time))
            #expect(await eventually { stream.ended }, "the stream outlived its ten seconds")
        }
    }

    @Test("a stream ends when its API key is revoked", .timeLimit(.minutes(1)))
    func streamEndsWithRevokedKey() async throws {
        let test = try await TestApp.make()
        let app = try await test.application(extra: ["unread.heartbeat_seconds": Self.setting(1)])
        let key = try await test.key(app: "support")
        try await app.testLive { client in
            let stream = try SSEReader(port: try #require(client.port), path: Self.streamPath("dave"), bearer: key)
            defer { stream.hangUp() }
            #expect(try await stream.nextEvent() != nil)
            try await test.client.query("UPDATE api_keys SET revoked_at = now() WHERE revoked_at IS NULL")
            #expect(await eventually { stream.ended })
        }
    }

    @Test("heartbeats read nothing from PostgreSQL: they go on while the counts cannot be read", .timeLimit(.minutes(1)))
    func heartbeatsWithoutQueries() async throws {
        let test = try await TestApp.make()
        // Heartbeats follow the relay's clock, which the test moves a heartbeat at a time.
        let time = ManualTime()
        let app = try await test.application(extra: ["unread.heartbeat_seconds": Self.setting(1)], clock: RelayClock(time))
        try await app.testLive { client in
            let stream = try SSEReader(port: try #require(client.port), path: Self.streamPath("erin"), bearer: try await TestApp.userToken("erin"))
            defer { stream.hangUp() }
            #expect(try await stream.nextEvent() != nil)
            // A heartbeat that read the counts would fail now, and send nothing.
            try await test.client.query("ALTER TABLE unread_counters RENAME TO unread_counters_away")
            for beat in 1...2 {
                let before = stream.heartbeats
                #expect(await Self.beat(time), "the hub waits for the next heartbeat")
                #expect(await eventually { stream.heartbeats > before }, "heartbeat \(beat) did not arrive")
            }
            try await test.client.query("ALTER TABLE unread_counters_away RENAME TO unread_counters")
        }
    }
}
