import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1

/// Takes a well-formed webhook, `POST /v1/webhooks/zendesk/{app}/{secret}`, on the connection's
/// event loop: the body is read there, checked and handed to ``IntakeWriter``, and the `202` is
/// written there once the batch has committed, without the router, the middleware or a task per
/// request.
///
/// Intake is most of the relay's work per notification, and for a small webhook the framework's
/// path around the handler (the request's hand-over to a task and back, the router, three
/// middleware, the conversion to and from the framework's types) cost as much as the webhook's own
/// work. This path makes the same checks with the same code (``AppDirectory/acceptsWebhook(app:secret:)``,
/// ``WebhookSignature``, ``JSONBody``, ``ZendeskWebhook``), stores through the same writer and
/// answers with the same status, body and headers (`X-Request-Id` as ``RequestIDMiddleware`` gives
/// it, `Date`, `Server`), the same request log line and the same metrics.
///
/// Anything else goes the normal way, unchanged: a head it does not take (another route or method,
/// an unknown app or a wrong secret, no `Content-Length`, a body over the upload limit, a content
/// type other than JSON, `Expect`, `Connection: close`, repeated headers), and a webhook it took
/// whose body fails a check: that request is passed on as it was read, so the router answers it
/// with its own error. Only the answer to a failed store is written here, mapped by
/// ``APIError/from(_:logger:)`` as the router's error middleware maps it.
struct WebhookShortcut: Sendable {
    let apps: AppDirectory
    let writer: IntakeWriter
    let settings: WebhookSettings
    let metrics: RelayMetrics
    let logger: Logger
    let serverName: String

    /// A webhook whose head this path takes.
    struct Taken {
        var app: String
        var signingSecrets: [String]
        /// The app's content mode when the head came.
        var content: PushSettings.Content
        var contentLength: Int
        var signature: String?
        var signatureTimestamp: String?
        var requestID: String
    }

    /// The webhook in `head` when this path can take it; `nil` when it goes the normal way.
    func take(_ head: HTTPRequestHead) -> Taken? {
        guard head.method == .POST, head.version == .http1_1, head.isKeepAlive else { return nil }
        guard let (rawApp, rawSecret) = Self.webhookRoute(head.uri) else { return nil }
        var contentLength: Int?
        var contentType: String?
        var signature: String?
        var timestamp: String?
        var requestID: String?
        var seen = 0
        for (name, value) in head.headers {
            // Each header the normal path reads may come once; a repeat is for it to judge.
            if FastPathRequest.isNamed(name, "content-length") {
                guard contentLength == nil, let length = Int(value), length > 0, length <= AppRequestContext.uploadLimit
                else { return nil }
                contentLength = length
            } else if FastPathRequest.isNamed(name, "content-type") {
                guard contentType == nil else { return nil }
                contentType = value
            } else if FastPathRequest.isNamed(name, "x-zendesk-webhook-signature") {
                guard signature == nil else { return nil }
                signature = value
            } else if FastPathRequest.isNamed(name, "x-zendesk-webhook-signature-timestamp") {
                guard timestamp == nil else { return nil }
                timestamp = value
            } else if FastPathRequest.isNamed(name, "x-request-id") {
                seen += 1
                requestID = value
            } else if FastPathRequest.isNamed(name, "transfer-encoding") || FastPathRequest.isNamed(name, "expect") {
                return nil
            }
        }
        guard let contentLength else { return nil }
        if let contentType, !contentType.lowercased().hasPrefix("application/json") { return nil }
        guard let app = try? PathSegment.parameter(rawApp, name: "app"),
            let secret = try? PathSegment.parameter(rawSecret, name: "secret"),
            let configuration = apps.webhookApp(app, secret: secret)
        else { return nil }
        typealias IDs = RequestIDMiddleware<AppRequestContext>
        return Taken(
            app: app,
            signingSecrets: configuration.webhookSigningSecrets,
            content: configuration.push?.content ?? .full,
            contentLength: contentLength,
            signature: signature,
            signatureTimestamp: timestamp,
            requestID: (seen == 1 ? requestID.flatMap(IDs.acceptable) : nil) ?? IDs.newID()
        )
    }

    /// The raw `{app}` and `{secret}` of `/v1/webhooks/zendesk/{app}/{secret}` exactly as written (no
    /// query, no empty segment); `nil` for any other target.
    static func webhookRoute(_ uri: String) -> (app: Substring, secret: Substring)? {
        guard let parameters = FastPathRequest.parameters(uri, Self.route) else { return nil }
        return (parameters[0], parameters[1])
    }

    private static let route: [StaticString?] = ["v1", "webhooks", "zendesk", nil, nil]

    /// This shortcut's handler behind each connection's decoder.
    var fastPath: FastPath {
        FastPath { [self] deadline in WebhookShortcutHandler(shortcut: self, deadline: deadline) }
    }

    /// The item to store, or `nil` when the body fails a check (the normal path then answers it).
    func item(_ taken: Taken, body: ByteBuffer) -> IntakeItem? {
        guard
            let webhook = try? settings.notification(
                body: body,
                signingSecrets: taken.signingSecrets,
                signature: taken.signature,
                timestamp: taken.signatureTimestamp
            )
        else { return nil }
        return IntakeItem(appID: taken.app, notification: webhook, requestID: taken.requestID, content: taken.content)
    }

    /// The answer to a stored (or failed) webhook, counted and logged as the normal path does.
    func answer(
        _ taken: Taken,
        _ result: Result<IntakeReceipt, any Error>,
        elapsed: Duration
    ) -> (HTTPResponseHead, ByteBuffer) {
        var logger = logger
        logger[metadataKey: "request.id"] = .string(taken.requestID)
        var headers: HTTPHeaders = ["Content-Type": "application/json; charset=utf-8"]
        let status: HTTPResponseStatus
        let body: ByteBuffer
        switch result {
        case .success(let receipt):
            status = .accepted
            body =
                WebhookController<AppRequestContext>.accepted(receipt, app: taken.app, metrics: metrics, logger: logger)
                .body
        case .failure(let error):
            let apiError = APIError.from(error, logger: logger)
            for field in apiError.headers { headers.add(name: field.name.rawName, value: field.value) }
            status = HTTPResponseStatus(statusCode: apiError.status.code)
            body = apiError.body
        }
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        FastPathRequest.addCommonHeaders(&headers, requestID: taken.requestID, serverName: serverName)
        FastPathRequest.log(
            logger,
            requestID: taken.requestID,
            method: "POST",
            route:
                "/v1/webhooks/zendesk/\(FastPathRequest.redacted("app", taken.app))/\(FastPathRequest.redacted("secret", ""))",
            status: Int(status.code),
            elapsed: elapsed
        )
        return (HTTPResponseHead(version: .http1_1, status: status, headers: headers), body)
    }
}

/// The channel handler for ``WebhookShortcut``, right behind the HTTP/1.1 decoder.
///
/// Requests on a connection are answered in order: a webhook is taken here only when no earlier
/// request of the connection is still being answered by the framework, and while one taken here
/// waits for its commit, the parts of any later request are held (and, once some are, no more is
/// read from the socket) until its answer is written. A graceful shutdown's quiesce event waits the
/// same way, so the framework does not close the connection under a webhook that is being stored,
/// and no webhook is taken after it.
final class WebhookShortcutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum State {
        case idle
        /// A webhook's head was taken; its body is being read.
        case reading(
            head: HTTPRequestHead,
            taken: WebhookShortcut.Taken,
            body: ByteBuffer,
            start: ContinuousClock.Instant
        )
        /// The webhook was handed to the writer; its answer is not written yet.
        case storing
    }

    private let shortcut: WebhookShortcut
    private let deadline: ConnectionDeadline
    private var state = State.idle
    /// Requests passed on whose response has not ended.
    private var passedOn = 0
    /// Parts read and not yet handled, oldest first: those of later requests wait here while a
    /// webhook is stored. The decoder may hand over more parts from inside a call this handler
    /// makes (a read it passes on lets it decode what it buffered), so every part goes through here.
    private var held = CircularBuffer<HTTPServerRequestPart>()
    private var draining = false
    private var readWanted = false
    private var quiesceHeld = false
    private var quiescing = false

    init(shortcut: WebhookShortcut, deadline: ConnectionDeadline) {
        self.shortcut = shortcut
        self.deadline = deadline
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        held.append(unwrapInboundIn(data))
        drain(context: context)
    }

    /// Handles held parts in order until a webhook is being stored. A part that arrives while this
    /// runs joins the queue behind the others.
    private func drain(context: ChannelHandlerContext) {
        guard !draining else { return }
        draining = true
        defer { draining = false }
        while !held.isEmpty {
            if case .storing = state { return }
            handle(held.removeFirst(), context: context)
        }
    }

    private func handle(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch state {
        case .storing:
            held.prepend(part)  // not reached: drain stops while storing
        case .reading(let head, let taken, var body, let start):
            switch part {
            case .body(var buffer):
                deadline.bodyBytes(buffer.readableBytes, context: context)
                state = .idle  // no copy of the buffer while it grows
                body.writeBuffer(&buffer)
                state = .reading(head: head, taken: taken, body: body, start: start)
            case .end:
                deadline.enter(.answering, context: context)
                guard body.readableBytes == taken.contentLength, let item = shortcut.item(taken, body: body) else {
                    // A check failed: the router answers it, from the same bytes.
                    state = .idle
                    passOn([.head(head), .body(body), .end(nil)], context: context)
                    releaseQuiesce(context: context)
                    return
                }
                state = .storing
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                let loop = context.eventLoop
                shortcut.writer.submit(item) { result in
                    loop.execute {
                        let (handler, context) = bound.value
                        handler.answer(taken, result, elapsed: ContinuousClock.now - start, context: context)
                    }
                }
            case .head:
                // The decoder never starts a request inside another.
                state = .idle
                passOn([.head(head), .body(body), part], context: context)
            }
        case .idle:
            guard case .head(let head) = part else {
                context.fireChannelRead(wrapInboundOut(part))
                return
            }
            if passedOn == 0, !quiescing, let taken = shortcut.take(head) {
                deadline.enter(.body(sinceProgress: 0), context: context)
                // Room for a usual webhook; a larger body grows the buffer as it arrives, so a head
                // that announces a megabyte does not hold one before its bytes come.
                let capacity = min(taken.contentLength, 16 * 1024)
                state = .reading(
                    head: head,
                    taken: taken,
                    body: context.channel.allocator.buffer(capacity: capacity),
                    start: .now
                )
                return
            }
            passedOn += 1
            context.fireChannelRead(wrapInboundOut(part))
        }
    }

    /// Hands a request to the framework (whose own handlers track its deadline from here).
    private func passOn(_ parts: [HTTPServerRequestPart], context: ChannelHandlerContext) {
        passedOn += 1
        for part in parts { context.fireChannelRead(wrapInboundOut(part)) }
    }

    private func answer(
        _ taken: WebhookShortcut.Taken,
        _ result: Result<IntakeReceipt, any Error>,
        elapsed: Duration,
        context: ChannelHandlerContext
    ) {
        guard case .storing = state else { return }
        let (head, body) = shortcut.answer(taken, result, elapsed: elapsed)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        deadline.enter(.idle, context: context)
        state = .idle
        // What arrived meanwhile, in order, until another webhook is taken. This runs outside a
        // read, so the framework (which takes reads at their read-complete) is told they are in.
        if !held.isEmpty {
            drain(context: context)
            context.fireChannelReadComplete()
        }
        if case .storing = state { return }
        releaseQuiesce(context: context)
        // Reading again, also when a held request's body is still being read here.
        if readWanted {
            readWanted = false
            context.read()
        }
    }

    /// Passes on a quiesce event held while a webhook was here, once none is.
    private func releaseQuiesce(context: ChannelHandlerContext) {
        guard quiesceHeld, case .idle = state else { return }
        quiesceHeld = false
        context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
    }

    /// While a webhook is stored, reading goes on until parts of a later request are held: most
    /// clients send nothing before the answer, and holding the read would drop the socket's read
    /// interest and add it back (two `epoll_ctl` calls) for every webhook. Once something is held,
    /// reading waits for the answer, so what is held stays within one read.
    func read(context: ChannelHandlerContext) {
        if case .storing = state, !held.isEmpty {
            readWanted = true
            return
        }
        context.read()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), passedOn > 0 { passedOn -= 1 }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            quiescing = true
            if case .idle = state {
            } else {
                quiesceHeld = true
                return
            }
        }
        context.fireUserInboundEventTriggered(event)
    }
}
