import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1
import Prometheus

/// Answers an unchanged poll, `GET /v1/apps/{app}/users/{user}/unread` with an `If-None-Match`
/// that matches, on the connection's event loop as soon as the request is read, without the
/// router, the middleware or a task.
///
/// A mobile app polls its unread count every few seconds and nearly every poll is unchanged. The
/// answer to such a poll is a lookup (the remembered user token, the ETag ``UnreadHub`` keeps), so
/// the work around it (a task per request, the middleware chain, the router) was most of its cost.
///
/// It answers only what ``UnreadController/unread(_:context:)`` would answer `304` with the same
/// headers, from the same checks: the route in its plain form, a user token checked before
/// (``Authenticator/rememberedUser(_:app:now:)``) whose user is the `{user}`, and the owner's
/// cached ETag. Every other request, and every poll that is not such a case (an API key, a new or
/// expired token, another user, no cached ETag, a body, `Connection: close`), goes the normal way,
/// unchanged.
struct UnreadPollShortcut: Sendable {
    let hub: UnreadHub
    let authenticator: Authenticator
    let metrics: RelayMetrics
    let logger: Logger
    let serverName: String
    /// `push_relay_unread_polls_total{answer="cached"}` per configured app, made once.
    private let counters: [String: Counter]

    init(
        hub: UnreadHub,
        authenticator: Authenticator,
        metrics: RelayMetrics,
        apps: [String],
        logger: Logger,
        serverName: String
    ) {
        self.hub = hub
        self.authenticator = authenticator
        self.metrics = metrics
        self.logger = logger
        self.serverName = serverName
        counters = Dictionary(
            uniqueKeysWithValues: apps.map { ($0, metrics.unreadPollCounter(app: $0, answer: "cached")) }
        )
    }

    struct Answer: Equatable {
        var etag: String
        var app: String
        var owner: String
    }

    /// The 304 for `head` when it is an unchanged poll answerable from what is cached; `nil`
    /// when it must go the normal way.
    func unchanged(_ head: HTTPRequestHead, now: Date) -> Answer? {
        guard head.method == .GET, head.version == .http1_1, head.isKeepAlive else { return nil }
        guard let (rawApp, rawUser) = Self.pollRoute(head.uri) else { return nil }
        var authorization: String?
        var match: String?
        for (name, value) in head.headers {
            if FastPathRequest.isNamed(name, "authorization") {
                // Two credentials are for the normal path to refuse.
                guard authorization == nil else { return nil }
                authorization = value
            } else if FastPathRequest.isNamed(name, "if-none-match") {
                // Several fields are one list, as the normal path reads them.
                match = match.map { $0 + ", " + value } ?? value
            } else if FastPathRequest.isNamed(name, "transfer-encoding")
                || (FastPathRequest.isNamed(name, "content-length") && value != "0")
            {
                // A body, or framing the normal path would have to judge, goes there.
                return nil
            }
        }
        guard let authorization, let match else { return nil }
        guard let credential = try? Authenticator.bearerCredential(authorization),
            Authenticator.isJWTShaped(credential),
            let app = try? PathSegment.parameter(rawApp, name: "app"),
            let principal = authenticator.rememberedUser(credential, app: app, now: now),
            let user = try? PathSegment.parameter(rawUser, name: "user"),
            let owner = try? UnreadController<AppRequestContext>.owner(user),
            (try? principal.require(app, scope: .unreadRead, user: owner)) != nil,
            let etag = hub.cachedETag(app: app, owner: owner),
            UnreadController<AppRequestContext>.matches(match, etag)
        else { return nil }
        if let counter = counters[app] { counter.increment() } else { metrics.unreadPoll(app: app, answer: "cached") }
        return Answer(etag: etag, app: app, owner: owner)
    }

    /// The raw `{app}` and `{user}` of `/v1/apps/{app}/users/{user}/unread` exactly as written
    /// (no query, no empty segment); `nil` for any other target.
    static func pollRoute(_ uri: String) -> (app: Substring, user: Substring)? {
        guard let parameters = FastPathRequest.parameters(uri, Self.route) else { return nil }
        return (parameters[0], parameters[1])
    }

    private static let route: [StaticString?] = ["v1", "apps", nil, "users", nil, "unread"]

    /// This shortcut's handler behind each connection's decoder.
    var fastPath: FastPath {
        FastPath { [self] deadline in UnreadPollShortcutHandler(shortcut: self, deadline: deadline) }
    }

    /// The response the normal path sends for an unchanged poll, with the same headers.
    func response(_ answer: Answer, requestID: String) -> HTTPResponseHead {
        var headers: HTTPHeaders = ["ETag": answer.etag, "Cache-Control": hub.cacheControl]
        FastPathRequest.addCommonHeaders(&headers, requestID: requestID, serverName: serverName)
        return HTTPResponseHead(version: .http1_1, status: .notModified, headers: headers)
    }

    /// The request id (the caller's when acceptable) and the request log line, as the middleware
    /// writes them.
    func requestID(_ head: HTTPRequestHead, answer: Answer, elapsed: Duration) -> String {
        let id = RequestIDMiddleware<AppRequestContext>.id(for: head)
        FastPathRequest.log(
            logger,
            requestID: id,
            method: "GET",
            route:
                "/v1/apps/\(FastPathRequest.redacted("app", answer.app))/users/\(FastPathRequest.redacted("user", answer.owner))/unread",
            status: 304,
            elapsed: elapsed
        )
        return id
    }
}

/// The channel handler for ``UnreadPollShortcut``, right behind the HTTP/1.1 decoder.
///
/// Requests on a connection are answered in order: a poll is answered here only when no earlier
/// request of the connection is still being answered by the framework (one whose head passed
/// through and whose response has not ended). The connection's deadline goes back to idle once
/// the answer is written, as after any response.
final class UnreadPollShortcutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let shortcut: UnreadPollShortcut
    private let deadline: ConnectionDeadline
    /// Requests passed on whose response has not ended.
    private var passedOn = 0
    /// The poll being answered here: its head was read, its end not yet.
    private var answering: (head: HTTPRequestHead, answer: UnreadPollShortcut.Answer, start: ContinuousClock.Instant)?

    init(shortcut: UnreadPollShortcut, deadline: ConnectionDeadline) {
        self.shortcut = shortcut
        self.deadline = deadline
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if let answering {
            // A request answered here has no body (checked): only its end follows.
            guard case .end = part else { return }
            self.answering = nil
            let id = shortcut.requestID(
                answering.head,
                answer: answering.answer,
                elapsed: ContinuousClock.now - answering.start
            )
            context.write(wrapOutboundOut(.head(shortcut.response(answering.answer, requestID: id))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            deadline.enter(.idle, context: context)
            return
        }
        if case .head(let head) = part {
            if passedOn == 0, let answer = shortcut.unchanged(head, now: shortcut.authenticator.clock.date()) {
                answering = (head, answer, ContinuousClock.now)
                return
            }
            passedOn += 1
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), passedOn > 0 { passedOn -= 1 }
        context.write(data, promise: promise)
    }
}
