import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What an ``UnreadCounter`` reports, in order, through ``UnreadCounter/updates()`` and its
/// delegate.
public enum UnreadEvent: Sendable, Hashable {
    /// The count changed (or loaded for the first time, or went to 0 for a new user).
    case changed(UnreadCount)
    /// A background request failed; the counter keeps trying by itself.
    case networkError(PushRelayError)
}

/// Receives an ``UnreadCounter``'s events on the main actor (the main thread), in order.
///
/// Both methods have empty default implementations.
@MainActor
public protocol UnreadCounterDelegate: AnyObject {
    /// The user's unread count changed: after it first loads, on every change the relay reports,
    /// and once with ``UnreadCount/zero`` when a different user is authorized.
    func didChangeUnreadMessages(_ count: UnreadCount)
    /// A request the counter made by itself (poll, live stream) failed. It retries on its own.
    func didReceiveNetwork(_ error: PushRelayError)
}

extension UnreadCounterDelegate {
    public func didChangeUnreadMessages(_ count: UnreadCount) {}
    public func didReceiveNetwork(_ error: PushRelayError) {}
}

@MainActor
final class DelegateBox {
    weak var delegate: (any UnreadCounterDelegate)?
    nonisolated init() {}
}

/// The authorized user's unread replies, kept current: by the relay's live stream while the app
/// is in the foreground (falling back to polling while the stream cannot be held), by polling
/// every ``unreadMessageCountDelay`` seconds otherwise, and at once after ``markRead(ticket:)``,
/// ``markAllRead(upTo:)`` and ``handle(_:)``.
///
/// Polls are conditional (`If-None-Match`): an unchanged count is a bodiless 304 that costs the
/// relay no database query and the app no decoding. The next poll is never sooner than the
/// relay's hint (`Cache-Control: max-age`).
///
/// Get one from ``PushRelayClient/unread``.
public actor UnreadCounter {
    private let transport: Transport
    private let streamIdleTimeout: TimeInterval

    private var user: UserSession?
    /// The user of the last authorization, kept after deauthorization: a different user next
    /// time resets the count to 0 first.
    private var lastUserID: String?
    private var deviceToken: String?
    private var delay: TimeInterval = 0
    private var foreground = false
    private var runner: Task<Void, Never>?
    /// The last count reported.
    private var known: UnreadCount?
    /// The ETag of the last polled body, and that body's count.
    private var validator: (etag: String, count: UnreadCount)?
    /// The relay's poll hint (`Cache-Control: max-age`), until it sends one.
    private var pollHint: TimeInterval = 10
    private var lastCompleted: ContinuousClock.Instant?
    /// Set by each authorization: the first run loads the count, also when one is known.
    private var needsLoad = false
    private var subscribers: [UUID: AsyncStream<UnreadEvent>.Continuation] = [:]
    /// Moves on every authorization change; work begun under another one reports nothing.
    private let generation = Locked<UInt64>(0)
    private var current: UInt64 { generation.withLock { $0 } }
    private let mainQueue: AsyncStream<(UnreadEvent, UInt64)>.Continuation
    private nonisolated let delegates = DelegateBox()

    /// Receives the events on the main actor. Held weakly.
    @MainActor public var delegate: (any UnreadCounterDelegate)? {
        get { delegates.delegate }
        set { delegates.delegate = newValue }
    }

    init(transport: Transport, streamIdleTimeout: TimeInterval) {
        self.transport = transport
        self.streamIdleTimeout = streamIdleTimeout
        let (events, continuation) = AsyncStream.makeStream(of: (UnreadEvent, UInt64).self)
        mainQueue = continuation
        // One task delivers every delegate call, so they arrive in the order they happened.
        let delegates = self.delegates
        let generation = self.generation
        Task { @MainActor in
            for await (event, issuedIn) in events {
                // Deauthorized or switched since: drop it.
                guard issuedIn == generation.withLock({ $0 }), let delegate = delegates.delegate else { continue }
                switch event {
                case .changed(let count): delegate.didChangeUnreadMessages(count)
                case .networkError(let error): delegate.didReceiveNetwork(error)
                }
            }
        }
    }

    deinit {
        runner?.cancel()
        mainQueue.finish()
        for continuation in subscribers.values { continuation.finish() }
    }

    // MARK: Public API

    /// The last count reported, `nil` before the first load.
    public var count: UnreadCount? { known }

    /// Seconds between polls while the live stream is not in use (in the background): the next
    /// request that long after the previous one completed, and never sooner than the relay's hint.
    /// 0 (the default) polls only once, when a user is authorized.
    public var unreadMessageCountDelay: TimeInterval { delay }

    public func setUnreadMessageCountDelay(_ seconds: TimeInterval) {
        let seconds = max(0, seconds)
        guard seconds != delay else { return }
        delay = seconds
        restart()
    }

    /// The app is in the foreground: hold the live stream, so changes arrive within a moment.
    public func enterForeground() {
        guard !foreground else { return }
        foreground = true
        restart()
    }

    /// The app went to the background: close the live stream and poll every
    /// ``unreadMessageCountDelay`` seconds, if that is not 0.
    public func enterBackground() {
        guard foreground else { return }
        foreground = false
        restart()
    }

    /// A stream of the events, starting with the current count when one is known. It ends when
    /// the iterating task is cancelled.
    public func updates() -> AsyncStream<UnreadEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: UnreadEvent.self, bufferingPolicy: .bufferingNewest(256))
        let id = UUID()
        subscribers[id] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.unsubscribe(id) }
        }
        if let known { continuation.yield(.changed(known)) }
        return stream
    }

    /// Asks the relay for the count now (a conditional request), for the foreground and push
    /// arrival. Reports a change like any other.
    ///
    /// - Throws: ``PushRelayError/notAuthorized`` when no user is authorized, or what the request met.
    public func getUnreadMessagesCount() async throws(PushRelayError) -> UnreadCount {
        guard let user else { throw .notAuthorized }
        return try await fetch(user, current)
    }

    /// Marks the replies of one ticket read (the user opened it). The relay updates the badge of
    /// the user's other devices; this device is named as the one read on, so it gets no push.
    @discardableResult
    public func markRead(ticket: String) async throws(PushRelayError) -> UnreadCount {
        guard let user else { throw .notAuthorized }
        let issuedIn = current
        let total = try await postRead(["users", user.userID, "tickets", ticket, "read"], upTo: nil, as: user)
        var count = known ?? .zero
        count.tickets[ticket] = nil
        count.total = total
        return try await settle(count, user, issuedIn)
    }

    /// Marks every ticket read; with `upTo`, only replies up to that notification id (a push's
    /// ``PushRelayNotification/notificationID``) so later replies stay unread.
    @discardableResult
    public func markAllRead(upTo notificationID: Int64? = nil) async throws(PushRelayError) -> UnreadCount {
        guard let user else { throw .notAuthorized }
        let issuedIn = current
        let total = try await postRead(["users", user.userID, "read-all"], upTo: notificationID, as: user)
        return try await settle(total == 0 ? .zero : UnreadCount(total: total, tickets: [:]), user, issuedIn)
    }

    /// Call on push arrival: a push from the relay (a reply or a badge sync) refreshes the count.
    /// Errors are reported as events.
    public func handle(_ notification: PushRelayNotification) async {
        guard let user else { return }
        await poll(user, current)
    }

    // MARK: Driven by PushRelayClient

    func authorize(_ session: UserSession) {
        let switching = lastUserID != nil && lastUserID != session.userID
        stopRunner()
        let issuedIn = generation.withLock { value in
            value &+= 1
            return value
        }
        if lastUserID != session.userID {
            validator = nil
            known = nil
        }
        user = session
        lastUserID = session.userID
        needsLoad = true
        if switching {
            known = .zero
            publish(.changed(.zero), issuedIn)
        }
        restart()
    }

    /// Stops everything: no request, no event, until the next authorization.
    func deauthorize() {
        stopRunner()
        generation.withLock { $0 &+= 1 }
        user = nil
    }

    func setDeviceToken(_ token: String?) { deviceToken = token }

    // MARK: Work

    private func unsubscribe(_ id: UUID) { subscribers[id] = nil }

    private func stopRunner() {
        runner?.cancel()
        runner = nil
    }

    private func restart() {
        stopRunner()
        guard let user else { return }
        let issuedIn = current
        runner = Task { await self.run(user, issuedIn) }
    }

    private var pollInterval: TimeInterval { max(delay, pollHint, 0.1) }

    private func run(_ user: UserSession, _ issuedIn: UInt64) async {
        var backoff = Backoff()
        if !foreground, needsLoad || known == nil {
            await poll(user, issuedIn)
            if !Task.isCancelled { needsLoad = false }
        }
        while !Task.isCancelled {
            if foreground {
                let outcome = await stream(user, issuedIn)
                if Task.isCancelled { return }
                var pollNow = false
                switch outcome {
                case .ended(let received):
                    if received {
                        backoff.reset()
                        continue
                    }
                    pollNow = true
                case .failed(let error):
                    report(error, issuedIn)
                    // The relay answered (429 too many streams, 5xx): poll at once. Unreachable: wait.
                    if case .network = error {} else { pollNow = true }
                }
                if pollNow { await poll(user, issuedIn) }
                // Fall back to polling until the next attempt at the stream.
                let retryAt = ContinuousClock.now + .seconds(backoff.next())
                while !Task.isCancelled {
                    let nextPoll = ContinuousClock.now + .seconds(pollInterval)
                    if nextPoll >= retryAt {
                        try? await Task.sleep(until: retryAt)
                        break
                    }
                    try? await Task.sleep(until: nextPoll)
                    if Task.isCancelled { return }
                    await poll(user, issuedIn)
                }
            } else if delay > 0 {
                if let last = lastCompleted {
                    try? await Task.sleep(until: last + .seconds(pollInterval))
                }
                if Task.isCancelled { return }
                await poll(user, issuedIn)
                // A poll that failed counts as completed too: wait the interval before the next.
                lastCompleted = .now
            } else {
                // Nothing to do until the app comes to the foreground or sets a delay.
                try? await Task.sleep(for: .seconds(86_400))
            }
        }
    }

    private func poll(_ user: UserSession, _ issuedIn: UInt64) async {
        do {
            _ = try await fetch(user, issuedIn)
        } catch {
            // Cancelled by a change of mode (foreground, background, delay): not a failure.
            if !Task.isCancelled { report(error, issuedIn) }
        }
    }

    /// `GET …/unread`, conditional on the last ETag.
    private func fetch(_ user: UserSession, _ issuedIn: UInt64) async throws(PushRelayError) -> UnreadCount {
        var headers: [String: String] = [:]
        let sent = validator
        if let sent { headers["If-None-Match"] = sent.etag }
        let (data, response) = try await transport.send(transport.request("GET", ["users", user.userID, "unread"], headers: headers), as: user)
        lastCompleted = .now
        if let hint = Self.maxAge(response) { pollHint = hint }
        let count: UnreadCount
        switch response.statusCode {
        case 304:
            guard let sent else { throw .invalidResponse("304 to a request without If-None-Match") }
            count = sent.count
        case 200:
            do {
                count = try JSONDecoder().decode(UnreadCount.self, from: data)
            } catch {
                throw .invalidResponse("unread counts: \(error)")
            }
            if let etag = response.value(forHTTPHeaderField: "ETag"), issuedIn == current {
                validator = (etag, count)
            }
        default:
            throw Transport.serverError(response, data)
        }
        apply(count, issuedIn)
        return count
    }

    private func postRead(_ segments: [String], upTo: Int64?, as user: UserSession) async throws(PushRelayError) -> Int {
        struct Body: Encodable {
            var device: String?
            var up_to_notification_id: Int64?
        }
        struct Answer: Decodable { var total: Int }
        let body = try? JSONEncoder().encode(Body(device: deviceToken, up_to_notification_id: upTo))
        let (data, _) = try await transport.sendExpectingSuccess(transport.request("POST", segments, body: body), as: user)
        guard let answer = try? JSONDecoder().decode(Answer.self, from: data) else { throw .invalidResponse("read: no total") }
        return answer.total
    }

    /// After a read: the count worked out locally when its tickets add up to the relay's total,
    /// else the relay's (one more request).
    private func settle(_ count: UnreadCount, _ user: UserSession, _ issuedIn: UInt64) async throws(PushRelayError) -> UnreadCount {
        if count.tickets.values.reduce(0, +) == count.total {
            apply(count, issuedIn)
            return count
        }
        return try await fetch(user, issuedIn)
    }

    private enum StreamOutcome {
        /// The relay ended the stream (its lifetime, an expired credential, a restart).
        case ended(receivedEvents: Bool)
        case failed(PushRelayError)
    }

    /// Holds `GET …/unread/stream` until it ends; each `unread` event is applied as it arrives.
    /// A refused token is replaced once through the provider.
    private func stream(_ user: UserSession, _ issuedIn: UInt64) async -> StreamOutcome {
        do {
            return try await user.withToken { token in await stream(user, token: token, issuedIn) }
        } catch {
            return .failed(error)
        }
    }

    /// One stream request with `token`.
    private func stream(_ user: UserSession, token: String, _ issuedIn: UInt64) async -> UserSession.Attempt<StreamOutcome> {
        let request = transport.request(
            "GET",
            ["users", user.userID, "unread", "stream"],
            headers: ["Accept": "text/event-stream", "Authorization": "Bearer \(token)"],
            timeout: streamIdleTimeout
        )
        let connection = EventStreamConnection()
        connection.start(request)
        defer { connection.cancel() }
        var parser = EventStreamParser()
        var response: HTTPURLResponse?
        var errorBody = Data()
        var received = false
        do {
            for try await chunk in connection.chunks {
                switch chunk {
                case .response(let answer):
                    response = answer
                case .data(let data):
                    guard response?.statusCode == 200 else {
                        errorBody.append(data)
                        continue
                    }
                    for event in parser.feed(data) where event.name == "unread" {
                        guard let count = try? JSONDecoder().decode(UnreadCount.self, from: Data(event.data.utf8)) else {
                            return .answered(.failed(.invalidResponse("a live stream event that is not unread counts")))
                        }
                        received = true
                        lastCompleted = .now
                        apply(count, issuedIn)
                    }
                }
            }
        } catch {
            if Task.isCancelled { return .answered(.ended(receivedEvents: received)) }
            return .answered(.failed(.network(Transport.describe(error))))
        }
        guard let response else {
            return .answered(Task.isCancelled ? .ended(receivedEvents: false) : .failed(.network("the connection closed before an answer")))
        }
        switch response.statusCode {
        case 200: return .answered(.ended(receivedEvents: received))
        case 401: return .refused(errorBody)
        default: return .answered(.failed(Transport.serverError(response, errorBody)))
        }
    }

    private func apply(_ count: UnreadCount, _ issuedIn: UInt64) {
        guard issuedIn == current, count != known else { return }
        known = count
        publish(.changed(count), issuedIn)
    }

    private func report(_ error: PushRelayError, _ issuedIn: UInt64) {
        guard issuedIn == current else { return }
        publish(.networkError(error), issuedIn)
    }

    private func publish(_ event: UnreadEvent, _ issuedIn: UInt64) {
        for continuation in subscribers.values { continuation.yield(event) }
        mainQueue.yield((event, issuedIn))
    }

    /// `Cache-Control: max-age=N`, in seconds.
    static func maxAge(_ response: HTTPURLResponse) -> TimeInterval? {
        guard let header = response.value(forHTTPHeaderField: "Cache-Control") else { return nil }
        for directive in header.split(separator: ",") {
            let parts = directive.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "max-age", let seconds = TimeInterval(parts[1]) { return seconds }
        }
        return nil
    }
}

/// Reconnect delays: 1, 2, 4, … up to 30 seconds, each within ±20 %.
struct Backoff {
    private var attempt = 0

    mutating func next() -> TimeInterval {
        let base = min(30, pow(2, Double(attempt)))
        attempt = min(attempt + 1, 10)
        return base * Double.random(in: 0.8...1.2)
    }

    mutating func reset() { attempt = 0 }
}
