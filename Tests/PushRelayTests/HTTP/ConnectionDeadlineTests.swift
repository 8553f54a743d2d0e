import HTTPTypes
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import Testing

@testable import PushRelay

/// The slow-client guard's timers on an embedded event loop, whose time the test moves: each
/// timeout closes the connection exactly when it is due, whatever phase came before, and never
/// while the relay answers.
@Suite("Connection deadlines")
struct ConnectionDeadlineTests {
    static let limits = {
        var limits = ConnectionLimits()
        limits.idleTimeout = .seconds(60)
        limits.headerTimeout = .seconds(2)
        limits.bodyTimeout = .seconds(3)
        return limits
    }()

    /// A connection with the guard's two handlers around the HTTP decoder, as the server sets it up.
    static func connection() throws -> EmbeddedChannel {
        let deadline = ConnectionDeadline(limits: limits, logger: Logger(label: "test"))
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([
            FirstByteHandler(deadline: deadline),
            ByteToMessageHandler(HTTPRequestDecoder()),
            HTTP1ToHTTPServerCodec(secure: false),
            RequestProgressHandler(deadline: deadline),
        ])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    static func send(_ channel: EmbeddedChannel, _ text: String) throws {
        try channel.writeInbound(ByteBuffer(string: text))
    }

    /// Moves the loop's time on and tells whether the connection is still open.
    static func open(after duration: TimeAmount, _ channel: EmbeddedChannel) -> Bool {
        channel.embeddedEventLoop.advanceTime(by: duration)
        return channel.isActive
    }

    /// Sends `piece` every 100 ms of the loop's clock until `timeout` has passed since the first
    /// bytes: the connection stays open to the last millisecond and is closed at it.
    static func expectCutAfterTrickle(_ channel: EmbeddedChannel, _ piece: String, timeout: TimeAmount) throws {
        let step = TimeAmount.milliseconds(100)
        for _ in 1..<(timeout.nanoseconds / step.nanoseconds) {
            #expect(open(after: step, channel))
            try send(channel, piece)
        }
        #expect(open(after: step - .milliseconds(1), channel))
        #expect(!open(after: .milliseconds(1), channel))
    }

    @Test("an idle connection is closed at the idle timeout, not before")
    func idle() throws {
        let channel = try Self.connection()
        #expect(Self.open(after: .seconds(60) - .milliseconds(1), channel))
        #expect(!Self.open(after: .milliseconds(1), channel))
    }

    @Test("a head begun after a second's idleness gets the header timeout from its first byte, not what was left of the idle one")
    func headerAfterIdle() throws {
        let channel = try Self.connection()
        #expect(Self.open(after: .seconds(1), channel))
        try Self.send(channel, "GET /health HTTP/1.1\r\nHost: x\r\n")
        #expect(Self.open(after: .seconds(2) - .milliseconds(1), channel))
        #expect(!Self.open(after: .milliseconds(1), channel))
    }

    @Test("more header bytes do not extend the header timeout")
    func trickledHead() throws {
        let channel = try Self.connection()
        try Self.send(channel, "GET /health HTTP/1.1\r\n")
        try Self.expectCutAfterTrickle(channel, "X-Pad: 1\r\n", timeout: .seconds(2))
    }

    @Test("a trickled body is closed at the body timeout from the end of the head")
    func trickledBody() throws {
        let channel = try Self.connection()
        try Self.send(channel, "POST /v1/webhooks/zendesk/support/x HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n")
        try Self.expectCutAfterTrickle(channel, " ", timeout: .seconds(3))
    }

    @Test("a request being answered is never cut, however long; the idle timeout starts again with its response's end")
    func answering() throws {
        let channel = try Self.connection()
        try Self.send(channel, "GET /v1/apps/support/users/u/unread/stream HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(Self.open(after: .hours(2), channel))
        try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        #expect(Self.open(after: .seconds(60) - .milliseconds(1), channel))
        #expect(!Self.open(after: .milliseconds(1), channel))
    }
}
