import Configuration
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import Synchronization

/// Limits on HTTP connections, so slow or idle clients cannot hold the relay's connections.
///
/// Keys, read from a reader scoped to `http`:
/// - `max_connections` (int, default 2048): connections open at once; more wait in the listen
///   backlog until one closes.
/// - `idle_timeout_seconds` (int, default 75): a connection with no request in progress and no byte
///   of a new one is closed after this long.
/// - `header_timeout_seconds` (int, default 10): a request's head (request line and headers) must
///   be complete this long after its first byte.
/// - `body_timeout_seconds` (int, default 30): a request body must end, or another 64 KiB of it
///   arrive, within this long; a large upload at a steady rate is never cut off, a trickle is.
/// - `intake_reserved_connections` (int, default an eighth of `max_connections`, at least 1):
///   connections only webhook intake (and `/health`, `/ready`) may use. A connection takes a
///   general place with its first other request (the API, polls, live streams, the console) and
///   keeps it until it closes; with `max_connections` less this many places taken, another
///   connection's first such request is answered 503 `over_capacity` with `Retry-After` and the
///   connection closed, so clients of the API can never take the connections intake needs.
/// - `tcp_user_timeout_seconds` (int, default 30, about twice the live stream's heartbeat; 0 for
///   the kernel's defaults): how long sent data may go unacknowledged before the connection is
///   dropped, with keepalive probes from half of it on (``userTimeout``).
public struct ConnectionLimits: Sendable {
    public var maxConnections: Int
    /// Connections kept for webhook intake (``IntakeShareHandler``).
    public var intakeReserved: Int
    public var idleTimeout = TimeAmount.seconds(75)
    public var headerTimeout = TimeAmount.seconds(10)
    public var bodyTimeout = TimeAmount.seconds(30)
    /// Body bytes that must arrive within each `bodyTimeout`.
    public var bodyProgressBytes: Int = 64 * 1024
    /// How long data sent on a connection may stay unacknowledged before the kernel drops the
    /// connection (`TCP_USER_TIMEOUT`), and the keepalive probes' schedule derived from it: a
    /// client that vanished (a phone gone out of coverage, no FIN or RST) frees its connection, and
    /// a live stream its place, after about this long instead of TCP's 15 minutes of retries.
    /// Zero leaves the kernel's defaults.
    public var userTimeout = TimeAmount.seconds(30)

    var shortestTimeout: TimeAmount { min(idleTimeout, headerTimeout, bodyTimeout) }

    /// The defaults, with `maxConnections` when given; `intakeReserved` defaults to an eighth of it.
    public init(maxConnections: Int = 2048, intakeReserved: Int? = nil) {
        self.maxConnections = maxConnections
        self.intakeReserved = intakeReserved ?? Self.defaultIntakeShare(of: maxConnections)
    }

    /// An eighth of the connections.
    static func defaultIntakeShare(of maxConnections: Int) -> Int { maxConnections / 8 }

    /// The socket options of an accepted connection: `TCP_USER_TIMEOUT` of ``userTimeout``, and
    /// keepalive probes from half of it on (every sixth of it, three unanswered ones end the
    /// connection), so an idle connection to a vanished client is found too.
    var socketOptions: [(ChannelOptions.Types.SocketOption, SocketOptionValue)] {
        let milliseconds = userTimeout.nanoseconds / 1_000_000
        guard milliseconds > 0 else { return [] }
        let seconds = max(1, milliseconds / 1000)
        let tcp = { (name: CInt) in
            ChannelOptions.Types.SocketOption(level: .tcp, name: NIOBSDSocket.Option(rawValue: name))
        }
        return [
            (ChannelOptions.socketOption(.so_keepalive), 1),
            (tcp(CInt(TCP_USER_TIMEOUT)), SocketOptionValue(milliseconds)),
            (tcp(CInt(TCP_KEEPIDLE)), SocketOptionValue(max(1, seconds / 2))),
            (tcp(CInt(TCP_KEEPINTVL)), SocketOptionValue(max(1, seconds / 6))),
            (tcp(CInt(TCP_KEEPCNT)), 3),
        ]
    }

    /// Hummingbird's HTTP/1.1 server with these limits, with the `fastPaths` behind each
    /// connection's decoder (the first listed furthest from it).
    func server(
        logger: Logger,
        fastPaths: [FastPath] = [],
        metrics: RelayMetrics? = nil,
        serverName: String = "PushRelay"
    ) -> HTTPServerBuilder {
        let shares = ConnectionShares(
            generalLimit: maxConnections - intakeReserved,
            metrics: metrics,
            serverName: serverName
        )
        return HTTPServerBuilder { responder in
            GuardedHTTP1Channel(
                responder: responder,
                limits: self,
                logger: logger,
                fastPaths: fastPaths,
                shares: shares
            )
        }
    }
}

/// The places of ``ConnectionLimits/maxConnections`` that connections other than webhook
/// intake's may take, shared by every connection of the server.
final class ConnectionShares: Sendable {
    let generalLimit: Int
    let metrics: RelayMetrics?
    let serverName: String
    private let general = Atomic<Int>(0)

    init(generalLimit: Int, metrics: RelayMetrics?, serverName: String) {
        self.generalLimit = max(1, generalLimit)
        self.metrics = metrics
        self.serverName = serverName
    }

    /// Takes a general place; false when all are taken.
    func claim() -> Bool {
        var current = general.load(ordering: .relaxed)
        while current < generalLimit {
            let (exchanged, original) = general.compareExchange(
                expected: current,
                desired: current + 1,
                ordering: .relaxed
            )
            if exchanged { return true }
            current = original
        }
        return false
    }

    func release() { general.subtract(1, ordering: .relaxed) }

    var taken: Int { general.load(ordering: .relaxed) }

    /// Webhook intake and the load balancer's probes: what the reserved places are for.
    static func isIntake(_ head: HTTPRequestHead) -> Bool {
        switch head.method {
        case .POST: head.uri.hasPrefix("/v1/webhooks/")
        case .GET, .HEAD: head.uri == "/health" || head.uri == "/ready"
        default: false
        }
    }
}

/// Right behind the HTTP decoder: gives a connection a general place (``ConnectionShares``) at its
/// first request that is not intake, or answers that request 503 `over_capacity` and closes the
/// connection when none is left. The place is given back when the connection closes.
final class IntakeShareHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let shares: ConnectionShares
    private var holdsPlace = false
    private var refused = false
    /// Requests passed on whose response has not ended: a refusal is written only when there is
    /// none, so answers stay in order (a pipelined request behind an intake one is let through).
    private var passedOn = 0

    init(shares: ConnectionShares) { self.shares = shares }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if refused { return }
        if case .head(let head) = unwrapInboundIn(data), !holdsPlace, !ConnectionShares.isIntake(head) {
            if shares.claim() {
                holdsPlace = true
            } else if passedOn == 0 {
                refuse(context: context, head: head)
                return
            }
        }
        if case .head = unwrapInboundIn(data) { passedOn += 1 }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), passedOn > 0 { passedOn -= 1 }
        context.write(data, promise: promise)
    }

    private func refuse(context: ChannelHandlerContext, head: HTTPRequestHead) {
        refused = true
        shares.metrics?.connectionRefused()
        let body = ByteBuffer(
            string:
                #"{"error":{"code":"over_capacity","message":"the relay's connections for this kind of request are all in use; retry later"}}"#
        )
        var headers: HTTPHeaders = [
            "Content-Type": "application/json", "Content-Length": "\(body.readableBytes)", "Retry-After": "1",
            "Connection": "close",
        ]
        FastPathRequest.addCommonHeaders(
            &headers,
            requestID: RequestIDMiddleware<AppRequestContext>.id(for: head),
            serverName: shares.serverName
        )
        let response = HTTPResponseHead(version: .http1_1, status: .serviceUnavailable, headers: headers)
        context.write(wrapOutboundOut(.head(response)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        giveBack()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { giveBack() }

    private func giveBack() {
        if holdsPlace {
            holdsPlace = false
            shares.release()
        }
    }
}

/// HTTP/1.1 with ``ConnectionLimits``: a handler in front of the HTTP decoder sees the first byte of
/// each request, one behind it sees where heads and bodies end, and both share one deadline.
struct GuardedHTTP1Channel: ServerChildChannel {
    let responder: HTTPChannelHandler.Responder
    let limits: ConnectionLimits
    let logger: Logger
    let fastPaths: [FastPath]
    let shares: ConnectionShares

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1Channel.Value> {
        let deadline = ConnectionDeadline(limits: limits, logger: self.logger)
        let inner = HTTP1Channel(
            responder: responder,
            configuration: .init(
                additionalChannelHandlers: [RequestProgressHandler(deadline: deadline)],
                idleTimeout: nil
            )
        )
        let socketOptions = limits.socketOptions
        return channel.eventLoop.makeCompletedFuture {
            for (option, value) in socketOptions { try channel.syncOptions?.setOption(option, value: value) }
            try channel.pipeline.syncOperations.addHandler(FirstByteHandler(deadline: deadline), position: .first)
        }.flatMap {
            inner.setup(channel: channel, logger: logger)
        }.flatMapThrowing { value in
            // Right behind the decoder, ahead of the conversion to the framework's request type.
            // Each answers only while no earlier request of the connection is with the framework
            // or the other, so answers stay in order.
            let operations = channel.pipeline.syncOperations
            let decoder = try operations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            for path in fastPaths {
                try operations.addHandler(path.makeHandler(deadline), position: .after(decoder))
            }
            // First behind the decoder: a connection refused here reaches no fast path.
            try operations.addHandler(IntakeShareHandler(shares: shares), position: .after(decoder))
            return value
        }
    }

    func handle(value: HTTP1Channel.Value, logger: Logger) async {
        await HTTP1Channel(responder: responder).handle(value: value, logger: logger)
    }
}

/// One connection's deadline: what the connection is waiting for and when it gives up. Used only on
/// the connection's event loop, by its two handlers.
///
/// A phase change only moves `deadline`; one timer per connection follows it lazily (when it fires
/// early it is scheduled again, see ``arm(_:channel:)``), so a request costs no timer scheduling or
/// cancelling: NIO cancels a scheduled task with a linear search of the loop's timers.
final class ConnectionDeadline: @unchecked Sendable {
    enum Phase {
        /// No request in progress and no byte of the next one.
        case idle
        /// Bytes of a request head have arrived; the head is not complete.
        case head
        /// The head is complete, the body is not.
        case body(sinceProgress: Int)
        /// The request is read; the relay is answering (a live stream may answer for hours).
        case answering
    }

    private let limits: ConnectionLimits
    private let logger: Logger
    private(set) var phase = Phase.idle
    /// When the connection is closed unless the phase changes first; `nil` while answering.
    private var deadline: NIODeadline?
    private var timer: Scheduled<Void>?
    private var closed = false

    init(limits: ConnectionLimits, logger: Logger) {
        self.limits = limits
        self.logger = logger
    }

    func enter(_ phase: Phase, context: ChannelHandlerContext) {
        self.phase = phase
        // The loop's time: a test's embedded loop moves it by hand.
        let now = context.eventLoop.now
        switch phase {
        case .idle: deadline = now + limits.idleTimeout
        case .head: deadline = now + limits.headerTimeout
        case .body: deadline = now + limits.bodyTimeout
        case .answering: deadline = nil
        }
        if deadline != nil, timer == nil, !closed { arm(context.eventLoop, channel: context.channel) }
    }

    /// The timer fires at the deadline or after the shortest of the timeouts, whichever is first,
    /// and then again while the connection lives: a deadline set after the timer was armed is never
    /// further off than the shortest timeout, so it is met on time (a head that starts on an idle
    /// connection gets the header timeout, not what was left of the idle one).
    private func arm(_ loop: any EventLoop, channel: any Channel) {
        guard let deadline else { return }
        timer = loop.scheduleTask(deadline: min(deadline, loop.now + limits.shortestTimeout)) { [self] in
            timer = nil
            guard let current = self.deadline, !closed else { return }
            if current > loop.now {
                arm(loop, channel: channel)
                return
            }
            closed = true
            logger.debug("closing a slow or idle connection", metadata: ["http.waited_for": "\(describe(phase))"])
            channel.close(promise: nil)
        }
    }

    private func describe(_ phase: Phase) -> String {
        switch phase {
        case .idle: "a request"
        case .head: "the rest of the request headers"
        case .body: "more of the request body"
        case .answering: "nothing"
        }
    }

    /// Body bytes arrived: a new window once another `bodyProgressBytes` have.
    func bodyBytes(_ count: Int, context: ChannelHandlerContext) {
        guard case .body(let sinceProgress) = phase else { return }
        if sinceProgress + count >= limits.bodyProgressBytes {
            enter(.body(sinceProgress: 0), context: context)
        } else {
            phase = .body(sinceProgress: sinceProgress + count)
        }
    }

    func cancel() {
        closed = true
        timer?.cancel()
        timer = nil
    }
}

/// In front of the HTTP decoder: the first byte of a request while idle starts the head's deadline.
final class FirstByteHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    let deadline: ConnectionDeadline

    init(deadline: ConnectionDeadline) { self.deadline = deadline }

    func handlerAdded(context: ChannelHandlerContext) {
        deadline.enter(.idle, context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .idle = deadline.phase { deadline.enter(.head, context: context) }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline.cancel()
        context.fireChannelInactive()
    }
}

/// Behind the HTTP decoder: a complete head starts the body's deadline, the end of the body stops
/// it, and the end of the response starts the idle one.
final class RequestProgressHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart
    let deadline: ConnectionDeadline
    /// The response being written said `Connection: close`: the connection closes after its end.
    private var closeAfterEnd = false

    init(deadline: ConnectionDeadline) { self.deadline = deadline }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: deadline.enter(.body(sinceProgress: 0), context: context)
        case .body(let buffer): deadline.bodyBytes(buffer.readableBytes, context: context)
        case .end: deadline.enter(.answering, context: context)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            // Hummingbird keeps a connection open after a response with `Connection: close` unless
            // the request asked for it: a refusal (a 429 stream, a 401, a 403) must free its place.
            closeAfterEnd = head.headerFields[.connection]?.lowercased() == "close"
        case .body:
            break
        case .end:
            // Answered before the body was read (a 413, a 404): the rest of the request is the
            // decoder's to skip, still within the body's deadline.
            if case .answering = deadline.phase { deadline.enter(.idle, context: context) }
            if closeAfterEnd {
                closeAfterEnd = false
                let written = promise ?? context.eventLoop.makePromise()
                context.write(data, promise: written)
                written.futureResult.whenComplete { _ in context.close(promise: nil) }
                return
            }
        }
        context.write(data, promise: promise)
    }
}
