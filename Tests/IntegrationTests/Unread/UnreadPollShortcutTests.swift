import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOHTTP1
import Postgres
import TestSupport
import Testing

@testable import PushRelay

/// The unchanged poll answered on the connection's event loop (``UnreadPollShortcut``): on a live
/// server, byte by byte, since the shortcut sits in the connection's pipeline.
@Suite("Unread polls answered on the event loop", .serialized)
struct UnreadPollShortcutTests {
    static let pollPath = "/v1/apps/support/users/fay/unread"

    /// A live relay where `fay` has one unread reply and an ETag cached for her counts; runs `body`
    /// with the port, her user token and the ETag.
    static func withCachedPoll(
        extra: [AbsoluteConfigKey: ConfigValue] = [:],
        tokenLifetime: TimeInterval = 600,
        time: ManualTime? = nil,
        _ body:
            @escaping @Sendable (_ test: TestApp, _ client: any TestClientProtocol, _ port: Int, _ user: String, _ etag: String) async throws -> Void
    ) async throws {
        let test = try await TestApp.make()
        try await test.application(extra: extra, clock: time.map { RelayClock($0) } ?? .system).testLive { client in
            let port = try #require(client.port)
            let key = try await test.key(app: "support")
            try await UnreadTests.register(client, key: key, token: "android-fay-1", platform: "android", user: "fay")
            let hook = try await client.execute(
                uri: UnreadTests.webhookURL,
                method: .post,
                headers: UnreadTests.json,
                body: jsonBody(webhook(devices: [("android-fay-1", "android")]))
            )
            #expect(hook.status == .accepted)
            let user = try await TestApp.userToken("fay", expiresIn: tokenLifetime)
            let etag = try await UnreadTests.keptETag(client, key: key, user: "fay", token: user)[.ifNoneMatch] ?? ""
            try await body(test, client, port, user, etag)
        }
    }

    static func polls(_ client: some TestClientProtocol, _ answer: String) async throws -> Double {
        let text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
        return metricValue(text, "push_relay_unread_polls_total", ["app": "support", "answer": answer]) ?? 0
    }

    /// Polls answered from a kept ETag, on the event loop or through the router.
    static func cachedAnswers(_ client: some TestClientProtocol) async throws -> Double {
        try await polls(client, "cached") + polls(client, "cached_routed")
    }

    @Test("an unchanged poll is answered on the event loop with the router's headers, the caller's request id, and no query")
    func answeredOnTheEventLoop() async throws {
        try await Self.withCachedPoll { test, client, port, user, etag in
            let before = try await Self.polls(client, "cached")
            let routedBefore = try await Self.polls(client, "cached_routed")
            let readBefore = try await Self.polls(client, "read")
            let request = RawConnection.request(
                "GET",
                Self.pollPath,
                headers: [("Authorization", "Bearer \(user)"), ("If-None-Match", etag), ("X-Request-Id", "poll-42")]
            )
            // While the counters are locked: a poll that queried would wait for the lock.
            let answers = try await test.client.withTransaction { session in
                _ = try await session.query("LOCK TABLE unread_counters IN ACCESS EXCLUSIVE MODE")
                return try await RawConnection.with(port: port) { connection in
                    var answers: [RawHTTP.Answer] = []
                    for _ in 0..<3 {
                        try await connection.send(request)
                        if let answer = try await connection.next() { answers.append(answer) }
                    }
                    return answers
                }
            }
            #expect(answers.count == 3, "the polls waited for the lock, so they queried")
            for answer in answers {
                #expect(answer.status == 304)
                #expect(answer.header("ETag") == etag)
                #expect(answer.header("Cache-Control") == "private, max-age=10")
                #expect(answer.header("X-Request-Id") == "poll-42")
                #expect(answer.header("Server") == "PushRelay")
                #expect(answer.header("Date").map { $0.hasSuffix(" GMT") && $0.count == 29 } == true)
                #expect(answer.header("Content-Length") == nil && answer.header("Transfer-Encoding") == nil && answer.body.isEmpty)
            }
            #expect(try await Self.polls(client, "cached") == before + 3)
            #expect(try await Self.polls(client, "cached_routed") == routedBefore)
            #expect(try await Self.polls(client, "read") == readBefore)

            // The same poll through the router (Connection: close is left to it) gets the same answer.
            let routed = try #require(
                try await RawHTTP.send(
                    port: port,
                    RawHTTP.request("GET", Self.pollPath, headers: [("Authorization", "Bearer \(user)"), ("If-None-Match", etag)])
                )
            )
            #expect(routed.status == 304 && routed.header("ETag") == etag && routed.header("Cache-Control") == "private, max-age=10")
            #expect(try await Self.polls(client, "cached_routed") == routedBefore + 1)
        }
    }

    @Test("a read and a poll pipelined on one connection are answered in order, and the poll sees the read")
    func pipelinedInOrder() async throws {
        try await Self.withCachedPoll { _, _, port, user, etag in
            let auth = ("Authorization", "Bearer \(user)")
            let bytes =
                RawConnection.request("POST", "/v1/apps/support/users/fay/read-all", headers: [auth])
                + RawConnection.request("GET", Self.pollPath, headers: [auth, ("If-None-Match", etag)])
            let (read, poll) = try await RawConnection.with(port: port) { connection in
                try await connection.send(bytes)
                return (try await connection.next(), try await connection.next())
            }
            #expect(read?.status == 200)
            #expect(read?.text.contains(#""total":0"#) == true)
            // Answered before the read, the poll would be a 304 with the old ETag, and first.
            #expect(poll?.status == 200)
            #expect(poll?.text.contains(#""total":0"#) == true)
            #expect(poll?.header("ETag") != etag)
        }
    }

    @Test("polls the event loop must not answer go through the router: another user, a stale ETag, an API key, a query, an expired token")
    func otherPollsAreRouted() async throws {
        // The relay's clock (and the dates it checks tokens' expiry against) moves only when the
        // test moves it: the token expires when the test says, however long the setup took.
        let time = ManualTime()
        try await Self.withCachedPoll(time: time) { test, client, port, user, etag in
            let other = try await TestApp.userToken("gus")
            let key = try await test.key(app: "support")
            // A key made behind the relay's back is read at the first check after the miss interval.
            time.advance(by: .milliseconds(100))
            let routedBefore = try await Self.polls(client, "cached_routed")
            // Each on a connection of its own: a 401 or 403 closes its connection.
            var statuses: [Int] = []
            let cases: [(String, [(String, String)])] = [
                (Self.pollPath, [("Authorization", "Bearer \(other)"), ("If-None-Match", etag)]),
                (Self.pollPath, [("Authorization", "Bearer \(user)"), ("If-None-Match", "\"0000\"")]),
                (Self.pollPath, [("Authorization", "Bearer \(key)"), ("If-None-Match", etag)]),
                (Self.pollPath + "?since=1", [("Authorization", "Bearer \(user)"), ("If-None-Match", etag)]),
                ("/v1/apps/nope/users/fay/unread", [("Authorization", "Bearer \(user)"), ("If-None-Match", etag)]),
            ]
            for (path, headers) in cases {
                statuses.append(try await RawHTTP.send(port: port, RawHTTP.request("GET", path, headers: headers))?.status ?? 0)
            }
            #expect(statuses == [403, 200, 304, 304, 401])
            #expect(try await Self.polls(client, "cached_routed") == routedBefore + 2)

            // Remembered, then expired: refused, not answered from what was remembered.
            time.advance(by: .seconds(3600))
            let expired = try await RawConnection.with(port: port) { connection in
                try await connection.send(
                    RawConnection.request("GET", Self.pollPath, headers: [("Authorization", "Bearer \(user)"), ("If-None-Match", etag)])
                )
                return try await connection.next()
            }
            #expect(expired?.status == 401)
        }
    }

    @Test("after an answer on the event loop the connection is idle again: the header timeout does not close it")
    func connectionStaysUsable() async throws {
        // 2 s, not 1: on a run busy with other suites an event loop may stall for about a second.
        try await Self.withCachedPoll(extra: ["http.header_timeout_seconds": .init(.int(2), isSecret: false)]) { _, _, port, user, etag in
            let poll = RawConnection.request("GET", Self.pollPath, headers: [("Authorization", "Bearer \(user)"), ("If-None-Match", etag)])
            let statuses = try await RawConnection.with(port: port) { connection in
                try await connection.send(poll)
                let first = try await connection.next()?.status ?? 0
                // Past the header timeout: a connection still waiting for a head would be closed.
                try await Task.sleep(for: .milliseconds(3500))
                try await connection.send(poll)
                return [first, try await connection.next()?.status ?? 0]
            }
            #expect(statuses == [304, 304])
        }
    }

    @Test("the route is recognised only in its plain form")
    func pollRoute() {
        #expect(UnreadPollShortcut.pollRoute("/v1/apps/support/users/fay/unread").map { [$0.app, $0.user] } == ["support", "fay"])
        #expect(UnreadPollShortcut.pollRoute("/v1/apps/support/users/a%2Fb/unread").map { [$0.app, $0.user] } == ["support", "a%2Fb"])
        for other in [
            "/v1/apps/support/users/fay/unread/", "/v1/apps/support/users/fay/unread?x", "//v1/apps/support/users/fay/unread",
            "/v1/apps//users/fay/unread", "/v1/apps/support/users//unread", "/v1/apps/support/users/fay/unread/stream",
            "/v1/apps/support/devices/fay/unread", "/v2/apps/support/users/fay/unread", "/v1/apps/support/users/fay",
        ] {
            #expect(UnreadPollShortcut.pollRoute(other) == nil, "\(other)")
        }
        // The webhook's route goes through the same matcher: a segment more, a query or a
        // fragment anywhere, or an empty parameter is for the router.
        #expect(WebhookShortcut.webhookRoute("/v1/webhooks/zendesk/support/s3cret").map { [$0.app, $0.secret] } == ["support", "s3cret"])
        for other in [
            "/v1/webhooks/zendesk/support/s3cret/extra", "/v1/webhooks/zendesk/support/s3cret/", "/v1/webhooks/zendesk/support",
            "/v1/webhooks/zendesk/sup?port/s3cret", "/v1/webhooks/zendesk/support/s3#cret", "/v1/webhooks/zendesk//s3cret",
            "/v1/apps/support/users/f?y/unread",
        ] {
            #expect(WebhookShortcut.webhookRoute(other) == nil && UnreadPollShortcut.pollRoute(other) == nil, "\(other)")
        }
    }

    @Test("header names are matched in any case, and only whole")
    func headerNames() {
        #expect(FastPathRequest.isNamed("If-None-Match", "if-none-match"))
        #expect(FastPathRequest.isNamed("AUTHORIZATION", "authorization"))
        #expect(!FastPathRequest.isNamed("Authorization2", "authorization"))
        #expect(!FastPathRequest.isNamed("Authorizatio", "authorization"))
        #expect(!FastPathRequest.isNamed("If_None_Match", "if-none-match"))
    }

    @Test("the Date header is IMF-fixdate")
    func httpDate() {
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(1_795_498_286) == "Tue, 24 Nov 2026 05:31:26 GMT")
    }
}
