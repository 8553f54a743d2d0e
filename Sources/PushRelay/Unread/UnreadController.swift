import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Postgres
import ServiceLifecycle
import StrictJSON

/// Unread counts for the mobile SDK's badge: polling with ETags, read (one ticket or all) with
/// read sync across the user's devices, and a live Server-Sent Events stream.
///
/// The `{user}` is the owner of the counts: the user id devices are registered with, or a device
/// token for devices linked to no user. Callers are app keys (`unread:read` / `unread:write`) or
/// a user JWT whose `sub` is that user.
struct UnreadController<Context: RequestContext>: Sendable {
    let store: UnreadStore
    let hub: UnreadHub
    let authenticator: Authenticator
    let metrics: RelayMetrics

    var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .get("/v1/apps/{app}/users/{user}/unread", use: unread)
            .get("/v1/apps/{app}/users/{user}/unread/stream", use: stream)
            .post("/v1/apps/{app}/users/{user}/tickets/{ticket}/read", use: readTicket)
            .post("/v1/apps/{app}/users/{user}/read-all", use: readAll)
    }

    struct Total: ResponseEncodable {
        var total: Int
        var synced: Int
        enum CodingKeys: String, CodingKey {
            case total
            case synced = "synced_devices"
        }
    }

    /// `GET …/unread`: the counts with a strong ETag; `If-None-Match` with it answers 304, and
    /// `Cache-Control: private, max-age=N` tells the client when to poll again.
    ///
    /// An unchanged poll is answered from the ETag this instance last served for the owner, with
    /// no query, as long as no change of the owner was announced since (``UnreadHub``); any other
    /// reads the counts.
    @Sendable func unread(_ request: Request, context: Context) async throws -> Response {
        let (app, owner) = try await authorize(request, context: context, scope: .unreadRead)
        let cacheControl = hub.cacheControl
        let match = request.headers[.ifNoneMatch]
        if let match, let cached = hub.cachedETag(app: app, owner: owner), Self.matches(match, cached) {
            metrics.unreadPoll(app: app, answer: "cached_routed")
            return Response(status: .notModified, headers: [.eTag: cached, .cacheControl: cacheControl])
        }
        metrics.unreadPoll(app: app, answer: "read")
        let since = hub.beginRead()
        let body: Data
        do {
            body = try Self.encoder.encode(try await store.summary(app: app, owner: owner))
        } catch {
            hub.abandonRead(since: since)
            throw error
        }
        let etag = Self.etag(of: body)
        hub.remember(app: app, owner: owner, etag: etag, since: since)
        var headers: HTTPFields = [.eTag: etag, .cacheControl: cacheControl]
        if let match, Self.matches(match, etag) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "application/json"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// `POST …/tickets/{ticket}/read`, optional body `{"device": "<token read on>"}`.
    @Sendable func readTicket(_ request: Request, context: Context) async throws -> Total {
        let (app, owner) = try await authorize(request, context: context, scope: .unreadWrite)
        let ticket = try InputRules.identifier(
            try context.pathParameter("ticket"),
            field: "ticket",
            maxBytes: InputRules.maxTicketBytes
        )
        let read = try await readRequest(request, context: context)
        let result = try await store.markRead(
            app: app,
            owner: owner,
            ticket: ticket,
            upTo: read.upTo,
            readOn: read.device
        )
        hub.changed(app: app, owner: owner)
        return Total(total: result.total, synced: result.synced)
    }

    /// `POST …/read-all`, optional body `{"device": "<token read on>", "up_to_notification_id": N}`.
    @Sendable func readAll(_ request: Request, context: Context) async throws -> Total {
        let (app, owner) = try await authorize(request, context: context, scope: .unreadWrite)
        let read = try await readRequest(request, context: context)
        let result = try await store.markRead(app: app, owner: owner, ticket: nil, upTo: read.upTo, readOn: read.device)
        hub.changed(app: app, owner: owner)
        return Total(total: result.total, synced: result.synced)
    }

    /// `GET …/unread/stream`: Server-Sent Events. An `unread` event with the counts on connect and
    /// after every change (from any instance), a `: heartbeat` comment when nothing changed for a
    /// while (no query: only a change reads the counts). The stream ends when the client goes, the
    /// relay shuts down, ``UnreadHub/streamLifetime`` has passed, or, at a heartbeat, its
    /// credential has expired or been revoked.
    ///
    /// An owner holds at most ``UnreadHub/maxStreamsPerOwner`` streams and the instance at most
    /// ``UnreadHub/maxStreams``; past either the answer is 429 with `Retry-After`, and the
    /// connection is closed so it frees its place at once.
    @Sendable func stream(_ request: Request, context: Context) async throws -> Response {
        let (app, owner) = try await authorize(request, context: context, scope: .unreadRead)
        let holder = await credential(of: request)
        let subscription: UnreadHub.Subscription
        do {
            subscription = try hub.subscribe(app: app, owner: owner, credential: holder)
        } catch {
            metrics.unreadStreamRefused(app: app)
            throw Self.tooManyStreams(error, hub: hub)
        }
        let first = try await store.summary(app: app, owner: owner)
        let store = self.store
        let hub = self.hub
        let authenticator = self.authenticator
        let logger = context.logger
        let endAt = hub.clock.now() + hub.streamLifetime
        let headers: HTTPFields = [
            .contentType: "text/event-stream", .cacheControl: "no-cache", HTTPField.Name("X-Accel-Buffering")!: "no",
        ]
        return Response(
            status: .ok,
            headers: headers,
            body: ResponseBody { writer in
                defer { hub.unsubscribe(subscription.id) }
                try await writer.write(try Self.event(first))
                var last = first
                try await withGracefulShutdownHandler {
                    for await signal in subscription.signals {
                        switch signal {
                        case .heartbeat:
                            guard hub.clock.now() < endAt else { return }
                            // Expired or revoked since the stream began: end it. The checks are the
                            // request's own (cached, so a heartbeat costs no query).
                            let principal = try? await authenticator.authenticate(request, app: app)
                            guard let principal, (try? principal.require(app, scope: .unreadRead, user: owner)) != nil
                            else {
                                logger.debug(
                                    "ending a live stream whose credential is no longer valid",
                                    metadata: ["push.app": "\(app)"]
                                )
                                return
                            }
                            try await writer.write(ByteBuffer(string: ": heartbeat\n\n"))
                        case .changed:
                            let current: UnreadSummary
                            do {
                                current = try await store.summary(app: app, owner: owner)
                            } catch {
                                logger.log(
                                    level: PostgresError.logLevel(for: error),
                                    "reading unread counts for a stream failed",
                                    metadata: PostgresError.metadata(error)
                                )
                                continue
                            }
                            if current != last {
                                try await writer.write(try Self.event(current))
                                last = current
                            }
                        }
                    }
                } onGracefulShutdown: {
                    hub.unsubscribe(subscription.id)
                }
                try await writer.finish(nil)
            }
        )
    }

    /// The 429 for a stream past one of the hub's limits, saying whose; the connection closes so
    /// it frees its place at once.
    static func tooManyStreams(_ refusal: UnreadHub.Refusal, hub: UnreadHub) -> APIError {
        let message =
            switch refusal {
            case .owner:
                "this user has \(hub.maxStreamsPerOwner) live streams open, the most allowed; close one or poll"
            case .credential:
                "this credential has \(hub.maxStreamsPerCredential) live streams open, its share of the relay; close one or poll"
            case .app:
                "this app has \(hub.maxStreamsPerApp) live streams open, its share of the relay; retry later or poll"
            case .instance: "the relay has as many live streams open as it serves; retry later or poll"
            }
        return APIError(
            .tooManyRequests,
            code: "too_many_streams",
            message: message,
            headers: [.retryAfter: "30", .connection: "close"]
        )
    }

    // MARK: Helpers

    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    static func event(_ summary: UnreadSummary) throws -> ByteBuffer {
        ByteBuffer(
            string: "event: unread\ndata: " + String(decoding: try encoder.encode(summary), as: UTF8.self) + "\n\n"
        )
    }

    /// A strong ETag: the first 96 bits of the body's SHA-256, in hex.
    static func etag(of body: Data) -> String {
        var text = [UInt8(ascii: "\"")]
        Hex.append(SHA256.hash(data: body).prefix(12), to: &text)
        text.append(UInt8(ascii: "\""))
        return String(decoding: text, as: UTF8.self)
    }

    /// The owner named by a `{user}` path parameter (decoded): a user id or a device token.
    static func owner(_ value: String) throws(APIError) -> String {
        try InputRules.identifier(value, field: "user", maxBytes: InputRules.maxTokenBytes)
    }

    /// Who opened a stream, for the per-credential share, as the request was authenticated (so
    /// spacing, the scheme's case or other cookies cannot make one credential look like many): an
    /// API key by its prefix, a user token or a console session by a digest of it (the secret
    /// itself is not kept).
    static func credential(of request: Request) -> String {
        func digest(_ text: String) -> String {
            SHA256.hash(data: Data(text.utf8)).prefix(12).map { String(format: "%02x", $0) }.joined()
        }
        if request.headers[.authorization] != nil,
            let credential = try? Authenticator.bearerCredential(request.headers[.authorization])
        {
            if let key = APIKey(presented: credential) { return "key " + key.prefix }
            return "token " + digest(credential)
        }
        return "session " + digest(Authenticator.sessionCookie(request) ?? "")
    }

    /// ``credential(of:)``, but a console session counts as the key it was opened with: one key's
    /// share is the same however many sessions it opens.
    func credential(of request: Request) async -> String {
        if request.headers[.authorization] == nil, let sessions = authenticator.sessions,
            let token = Authenticator.sessionCookie(request),
            let session = try? await sessions.session(token: token)
        {
            return "key " + session.keyPrefix
        }
        return Self.credential(of: request)
    }

    /// `If-None-Match` holds `*` or a list of (possibly weak) tags.
    static func matches(_ header: String, _ etag: String) -> Bool {
        header.split(separator: ",").contains { candidate in
            let tag = candidate.trimmingSpacesAndTabs()
            return tag == "*" || tag == etag || (tag.hasPrefix("W/") && tag.dropFirst(2) == etag)
        }
    }

    private func authorize(
        _ request: Request,
        context: Context,
        scope: APIKeyScope
    ) async throws -> (app: String, owner: String) {
        let (app, principal) = try await authenticator.resolve(request, context: context)
        // The owner is a user id or, for a device linked to no user, its token.
        let owner = try Self.owner(try context.pathParameter("user"))
        try principal.require(app, scope: scope, user: owner)
        return (app, owner)
    }

    /// The optional body of a read request: `device`, the device it happened on, which needs no
    /// sync; `up_to_notification_id`, the newest notification the reader saw (later ones stay counted).
    private func readRequest(_ request: Request, context: Context) async throws -> (device: String?, upTo: Int64?) {
        var request = request
        let bytes = try await request.collectJSONBytes(context: context)
        guard bytes.readableBytes > 0 else { return (nil, nil) }
        let body = try JSONBody(buffer: bytes)
        var upTo: Int64?
        switch body.object["up_to_notification_id"] {
        case nil, .null?: break
        case let value?:
            guard let id = value.int, id >= 1 else {
                throw JSONBody.invalidField(
                    "up_to_notification_id",
                    "must be a notification id, an integer of at least 1"
                )
            }
            upTo = id
        }
        guard let device = try body.optionalString("device") else { return (nil, upTo) }
        guard DeviceToken.isPrintable(device) else { throw JSONBody.invalidField("device", "must be a device token") }
        return (device.utf8.allSatisfy(DeviceToken.isHex) ? device.lowercased() : device, upTo)
    }
}
