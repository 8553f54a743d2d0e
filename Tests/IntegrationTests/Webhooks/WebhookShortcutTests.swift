import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Postgres
import TestSupport
import Testing

@testable import PushRelay

/// Webhooks taken on the connection's event loop (``WebhookShortcut``). `WebhookTests` runs every
/// intake test through a live server as well as through the router; these check what only this path
/// has: which requests it takes, that it answers them itself and passes the rest on unchanged, and
/// the order of answers on one connection.
@Suite("Webhooks taken on the event loop", .serialized)
struct WebhookShortcutTests {
    static let url = "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)"
    static let body = Array(
        #"{"devices":[{"identifier":"shortcut-1","type":"android"}],"notification":{"title":"t","body":"b","ticket_id":"7"}}"#.utf8
    )

    /// A migrated database, the shortcut over it and its running writer.
    static func withShortcut(
        signing: Bool = false,
        _ body: @escaping @Sendable (_ test: TestApp, _ shortcut: WebhookShortcut) async throws -> Void
    ) async throws {
        let test = try await TestApp.make(signing: signing)
        let database = try await Database.open(
            configuration: DatabaseSettings(url: test.conninfo),
            dataDirectory: NSTemporaryDirectory(),
            logger: TestDatabase.logger
        )
        _ = try await database.migrate()
        let writer = IntakeWriter(queue: DeliveryQueue(client: database.client), logger: TestDatabase.logger)
        let shortcut = WebhookShortcut(
            apps: try await AppDirectory(apps: test.apps),
            writer: writer,
            settings: WebhookSettings(),
            metrics: RelayMetrics(),
            logger: TestDatabase.logger,
            serverName: "PushRelay"
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await database.client.run() }
            group.addTask { try await writer.run() }
            try await body(test, shortcut)
            group.cancelAll()
        }
    }

    static func head(
        _ method: HTTPMethod = .POST,
        uri: String = url,
        headers: [(String, String)] = [("Content-Type", "application/json")],
        length: Int? = body.count
    ) -> HTTPRequestHead {
        var head = HTTPRequestHead(version: .http1_1, method: method, uri: uri)
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        if let length { head.headers.add(name: "Content-Length", value: String(length)) }
        return head
    }

    @Test("it takes a plain webhook with a good secret, and leaves every other head to the router")
    func whatIsTaken() async throws {
        try await Self.withShortcut { _, shortcut in
            #expect(shortcut.take(Self.head()) != nil)
            #expect(shortcut.take(Self.head(headers: [])) != nil, "no Content-Type is read as JSON, as by the router")
            #expect(shortcut.take(Self.head(headers: [("content-type", "Application/JSON; charset=utf-8")])) != nil)
            #expect(shortcut.take(Self.head(uri: "/v1/webhooks/zendesk/support/\(TestApp.rotatedSecret)")) != nil)
            let id = shortcut.take(Self.head(headers: [("X-Request-Id", "helpdesk-42")]))?.requestID
            #expect(id == "helpdesk-42")

            let refused: [(String, HTTPRequestHead)] = [
                ("wrong secret", Self.head(uri: "/v1/webhooks/zendesk/support/not-the-secret")),
                ("another app's secret", Self.head(uri: "/v1/webhooks/zendesk/support/\(TestApp.otherSecret)")),
                ("unknown app", Self.head(uri: "/v1/webhooks/zendesk/nobody/\(TestApp.webhookSecret)")),
                ("GET", Self.head(.GET)),
                ("a query", Self.head(uri: Self.url + "?x=1")),
                ("an extra segment", Self.head(uri: Self.url + "/more")),
                ("an empty segment", Self.head(uri: "/v1/webhooks/zendesk//\(TestApp.webhookSecret)")),
                ("a doubled slash", Self.head(uri: "//v1/webhooks/zendesk/support/\(TestApp.webhookSecret)")),
                ("no Content-Length", Self.head(length: nil)),
                ("chunked", Self.head(headers: [("Transfer-Encoding", "chunked")], length: nil)),
                ("over the upload limit", Self.head(length: AppRequestContext.uploadLimit + 1)),
                ("an empty body", Self.head(length: 0)),
                ("two Content-Lengths", Self.head(headers: [("Content-Length", "5")])),
                ("a form", Self.head(headers: [("Content-Type", "application/x-www-form-urlencoded")])),
                ("two content types", Self.head(headers: [("Content-Type", "application/json"), ("Content-Type", "application/json")])),
                ("Expect", Self.head(headers: [("Expect", "100-continue")])),
                ("Connection: close", Self.head(headers: [("Connection", "close")])),
            ]
            for (name, head) in refused {
                #expect(shortcut.take(head) == nil, "\(name)")
            }
            var http10 = Self.head()
            http10.version = .http1_0
            #expect(shortcut.take(http10) == nil, "HTTP/1.0")
        }
    }

    /// The handler in a channel of its own: what it passes on comes out as inbound parts, what it
    /// writes as outbound ones. `inFront` goes between it and the socket's end of the pipeline.
    /// The test's task moves between threads and the writer answers from its own, so the channel
    /// is a thread-safe testing channel: its loop runs what was sent to it when the test says so.
    static func channel(_ shortcut: WebhookShortcut, inFront: (any ChannelHandler & Sendable)? = nil) async throws -> NIOAsyncTestingChannel {
        let limits = ConnectionLimits()
        let deadline = ConnectionDeadline(limits: limits, logger: TestDatabase.logger)
        return try await NIOAsyncTestingChannel { channel in
            if let inFront { try channel.pipeline.syncOperations.addHandler(inFront) }
            try channel.pipeline.syncOperations.addHandler(WebhookShortcutHandler(shortcut: shortcut, deadline: deadline))
        }
    }

    static func send(_ channel: NIOAsyncTestingChannel, _ head: HTTPRequestHead, _ body: [UInt8]) async throws {
        try await channel.writeInbound(HTTPServerRequestPart.head(head))
        try await channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(bytes: body)))
        try await channel.writeInbound(HTTPServerRequestPart.end(nil))
    }

    /// Asks the channel for a read, as the socket's reader does, on the channel's loop.
    static func read(_ channel: NIOAsyncTestingChannel) async throws {
        try await channel.testingEventLoop.executeInContext { channel.pipeline.read() }
    }

    /// Runs the loop until the handler has written a whole answer.
    static func answer(_ channel: NIOAsyncTestingChannel) async throws -> (HTTPResponseHead, String) {
        var parts: [HTTPServerResponsePart] = []
        _ = try await eventually {
            await channel.testingEventLoop.run()
            while let part = try await channel.readOutbound(as: HTTPServerResponsePart.self) { parts.append(part) }
            if case .end = parts.last { return true }
            return false
        }
        guard case .head(let head) = parts.first, case .end = parts.last else { throw CancellationError() }
        var text = ""
        for case .body(.byteBuffer(let buffer)) in parts { text += String(buffer: buffer) }
        return (head, text)
    }

    @Test("a webhook it takes is stored and answered by the handler: 202, the receipt, the router's headers; nothing reaches the router")
    func answeredHere() async throws {
        try await Self.withShortcut { test, shortcut in
            let channel = try await Self.channel(shortcut)
            try await Self.send(channel, Self.head(headers: [("Content-Type", "application/json"), ("X-Request-Id", "helpdesk-7")]), Self.body)
            #expect(try await channel.readInbound(as: HTTPServerRequestPart.self) == nil, "the router sees nothing of it")
            let (head, text) = try await Self.answer(channel)
            #expect(head.status == .accepted)
            #expect(head.headers["Content-Type"] == ["application/json; charset=utf-8"])
            #expect(head.headers["X-Request-Id"] == ["helpdesk-7"])
            #expect(head.headers["Content-Length"] == [String(text.utf8.count)])
            #expect(head.headers["Server"] == ["PushRelay"])
            #expect(head.headers["Date"].count == 1)
            let id = try #require(Int(text.split(separator: ":")[1].split(separator: ",")[0]))
            #expect(text == #"{"notification_id":\#(id),"deliveries":1,"skipped":0}"#)
            #expect(try await test.count("SELECT count(*) FROM deliveries WHERE notification_id = $1 AND device_token = 'shortcut-1'", [id]) == 1)
            _ = try? await channel.finish()
        }
    }

    @Test("a large body arriving in many parts is collected whole and stored exactly")
    func largeBodyInParts() async throws {
        try await Self.withShortcut { test, shortcut in
            let channel = try await Self.channel(shortcut)
            let text = String(repeating: "0123456789", count: 60_000)
            let body = Array(
                #"{"devices":[{"identifier":"shortcut-large","type":"android"}],"notification":{"title":"t","body":"\#(text)","ticket_id":"9"}}"#.utf8
            )
            try await channel.writeInbound(HTTPServerRequestPart.head(Self.head(length: body.count)))
            for start in stride(from: 0, to: body.count, by: 8_192) {
                try await channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(bytes: body[start..<min(start + 8_192, body.count)])))
            }
            try await channel.writeInbound(HTTPServerRequestPart.end(nil))
            let (head, _) = try await Self.answer(channel)
            #expect(head.status == .accepted)
            let stored = try await test.client.query("SELECT body FROM notifications WHERE ticket_id = '9'").first?.decode(String.self, at: 0)
            #expect(stored == text)
            _ = try? await channel.finish()
        }
    }

    @Test("a webhook whose body fails a check goes on to the router exactly as it was read, and nothing is stored")
    func failedCheckPassedOn() async throws {
        try await Self.withShortcut(signing: true) { test, shortcut in
            let channel = try await Self.channel(shortcut)
            // A signed app and no signature: the router is to answer 401.
            let head = Self.head()
            try await Self.send(channel, head, Self.body)
            #expect(try await channel.readInbound(as: HTTPServerRequestPart.self) == .head(head))
            #expect(try await channel.readInbound(as: HTTPServerRequestPart.self) == .body(ByteBuffer(bytes: Self.body)))
            #expect(try await channel.readInbound(as: HTTPServerRequestPart.self) == .end(nil))
            #expect(try await channel.readOutbound(as: HTTPServerResponsePart.self) == nil)
            #expect(try await test.count("SELECT count(*) FROM notifications") == 0)
            _ = try? await channel.finish()
        }
        try await Self.withShortcut { _, shortcut in
            let channel = try await Self.channel(shortcut)
            let broken = Array(#"{"devices":[],"notification":{}}"#.utf8)
            try await Self.send(channel, Self.head(length: broken.count), broken)
            #expect(try await channel.readInbound(as: HTTPServerRequestPart.self) == .head(Self.head(length: broken.count)))
            #expect(try await channel.readInbound(as: HTTPServerRequestPart.self) == .body(ByteBuffer(bytes: broken)))
            _ = try? await channel.finish()
        }
    }

    @Test("a request that arrives while a webhook is stored waits, and reaches the router after the webhook's answer")
    func laterRequestWaits() async throws {
        try await Self.withShortcut { test, shortcut in
            let channel = try await Self.channel(shortcut)
            let health = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/health")
            // The webhook cannot be stored while notifications is locked: the later request is
            // seen held whatever the machine's speed.
            try await test.client.withTransaction { session in
                _ = try await session.query("LOCK TABLE notifications IN ACCESS EXCLUSIVE MODE")
                try await Self.send(channel, Self.head(), Self.body)
                try await channel.writeInbound(HTTPServerRequestPart.head(health))
                try await channel.writeInbound(HTTPServerRequestPart.end(nil))
                #expect(try await channel.readInbound(as: HTTPServerRequestPart.self) == nil, "held while the webhook is stored")
            }
            let (head, _) = try await Self.answer(channel)
            #expect(head.status == .accepted)
            #expect(try await channel.readInbound(as: HTTPServerRequestPart.self) == .head(health))
            #expect(try await channel.readInbound(as: HTTPServerRequestPart.self) == .end(nil))
            _ = try? await channel.finish()
        }
    }

    /// Counts the reads the handler passes towards the socket.
    final class ReadCounter: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = Any
        var reads = 0
        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }
    }

    @Test("while a webhook is stored, reading goes on until a later request's parts are held, then waits for the answer")
    func readingWhileStored() async throws {
        try await Self.withShortcut { test, shortcut in
            // The webhook's INSERT waits on this lock until the reads are counted: a store that
            // finished first would answer (and read again) before the test looks.
            let locked = AsyncStream.makeStream(of: Void.self)
            let gate = AsyncStream.makeStream(of: Void.self)
            let holder = Task {
                try await test.client.withTransaction { session in
                    _ = try await session.query("LOCK TABLE notifications IN EXCLUSIVE MODE")
                    locked.continuation.yield()
                    for await _ in gate.stream { break }
                }
            }
            for await _ in locked.stream { break }
            let counter = ReadCounter()
            let channel = try await Self.channel(shortcut, inFront: counter)
            try await Self.send(channel, Self.head(), Self.body)
            // Stored until the loop runs the writer's answer: nothing held, so a read goes through.
            try await Self.read(channel)
            #expect(counter.reads == 1)
            let health = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/health")
            try await channel.writeInbound(HTTPServerRequestPart.head(health))
            try await Self.read(channel)
            #expect(counter.reads == 1, "held parts: the read waits for the answer")
            gate.continuation.yield()
            try await holder.value
            let (head, _) = try await Self.answer(channel)
            #expect(head.status == .accepted)
            #expect(counter.reads == 2, "the read that waited is made after the answer")
            #expect(try await channel.readInbound(as: HTTPServerRequestPart.self) == .head(health))
            _ = try? await channel.finish()
        }
    }

    @Test("on a live relay, webhooks and other requests pipelined on one connection are answered in order")
    func pipelinedLive() async throws {
        let test = try await TestApp.make()
        try await test.application().testLive { client in
            let port = try #require(client.port)
            let json = ("Content-Type", "application/json")
            let second = Array(
                #"{"devices":[{"identifier":"shortcut-2","type":"ios"}],"notification":{"title":"t","body":"b","ticket_id":"8"}}"#.utf8
            )
            let bytes =
                RawConnection.request("POST", Self.url, headers: [json], body: Self.body)
                + RawConnection.request("GET", "/health")
                + RawConnection.request("POST", Self.url, headers: [json], body: second)
                + RawConnection.request("POST", Self.url, headers: [json], body: Array(#"{"devices":[]}"#.utf8))
            let answers = try await RawConnection.with(port: port) { connection in
                try await connection.send(bytes)
                var answers: [RawHTTP.Answer] = []
                for _ in 0..<4 { if let answer = try await connection.next() { answers.append(answer) } }
                return answers
            }
            try #require(answers.map(\.status) == [202, 200, 202, 400])
            #expect(answers[1].text.contains("ok"))
            #expect(answers[3].text.contains("notification is required"), "the router's own 400")
            let ids = answers.filter { $0.status == 202 }.compactMap { answer in
                (try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["notification_id"] as? Int
            }
            #expect(ids.count == 2 && ids[0] < ids[1], "stored in the order sent")
            #expect(try await test.count("SELECT count(*) FROM notifications") == 2)
        }
    }
}
