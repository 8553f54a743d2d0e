import Crypto
import CurlHTTP2
import Foundation
import Logging
import Postgres
import ServiceLifecycle
import Synchronization

/// One feedback event as the receiver gets it.
struct DeliveryEvent: Sendable, Equatable, Encodable {
    /// The event's id, unique per relay database: a receiver that got an id already can drop the
    /// repeat (events are sent at least once). Ids are taken in insertion order, and instances
    /// commit concurrently, so an id can arrive after a higher one: de-duplicate on the id itself,
    /// never on the highest id seen.
    var id: Int64
    var type: String
    var app: String
    var deliveryID: Int64
    /// `nil` for a badge sync, which belongs to no notification.
    var notificationID: Int64?
    var ticketID: String?
    var platform: String
    /// The device token shortened as in logs (first 6 and last 4 characters).
    var tokenHint: String
    /// The provider's or the relay's reason, for every type but `delivered`.
    var reason: String?
    /// When the outcome was stored.
    var at: Date

    enum CodingKeys: String, CodingKey {
        case id, type, app, platform, reason, at
        case deliveryID = "delivery_id"
        case notificationID = "notification_id"
        case ticketID = "ticket_id"
        case tokenHint = "token_hint"
    }

    /// Every key is written, `null` when absent, so receivers see one shape.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(type, forKey: .type)
        try container.encode(app, forKey: .app)
        try container.encode(deliveryID, forKey: .deliveryID)
        try container.encode(notificationID, forKey: .notificationID)
        try container.encode(ticketID, forKey: .ticketID)
        try container.encode(platform, forKey: .platform)
        try container.encode(tokenHint, forKey: .tokenHint)
        try container.encode(reason, forKey: .reason)
        try container.encode(at, forKey: .at)
    }
}

/// The request signature a receiver checks: `X-PushRelay-Signature` =
/// base64(HMAC-SHA256(signing secret, `X-PushRelay-Timestamp` + body)), the timestamp in Unix
/// seconds. The same scheme as Zendesk's webhook signature.
enum EventSignature {
    static let signatureHeader = "x-pushrelay-signature"
    static let timestampHeader = "x-pushrelay-timestamp"

    static func sign(body: [UInt8], timestamp: String, secret: SymmetricKey) -> String {
        var signed = Array(timestamp.utf8)
        signed.append(contentsOf: body)
        return Data(HMAC<SHA256>.authenticationCode(for: signed, using: secret)).base64EncodedString()
    }
}

/// The `delivery_events` outbox: read in order per app, deleted once the receiver accepted it.
struct EventQueue: Sendable {
    let client: PostgresClient

    /// The app's oldest `limit` events, in order.
    func oldest(app: String, limit: Int) async throws -> [DeliveryEvent] {
        try await client.query(
            """
            SELECT id, type, delivery_id, notification_id, ticket_id, platform, token_hint, reason, at
            FROM delivery_events WHERE app_id = $1 ORDER BY id LIMIT $2
            """,
            [app, limit],
            prepare: true
        ).rows.map { row in
            let (id, type, delivery, notification, ticket, platform, hint, reason, at) = try row.decode(
                (Int64, String, Int64, Int64?, String?, String, String, String?, Date).self
            )
            return DeliveryEvent(
                id: id,
                type: type,
                app: app,
                deliveryID: delivery,
                notificationID: notification,
                ticketID: ticket,
                platform: platform,
                tokenHint: hint,
                reason: reason,
                at: at
            )
        }
    }

    /// The receiver accepted these events.
    func sent(app: String, ids: [Int64]) async throws {
        _ = try await client.query(
            "DELETE FROM delivery_events WHERE app_id = $1 AND id = ANY($2)",
            [app, ids],
            prepare: true
        )
    }

    /// How many events of the app wait, counted up to `cap`.
    func queued(app: String, cap: Int) async throws -> Int {
        try await client.query(
            "SELECT count(*)::int FROM (SELECT 1 FROM delivery_events WHERE app_id = $1 LIMIT $2) q",
            [app, cap]
        ).rows.first?.decode(Int.self) ?? 0
    }
}

/// Sends each app's feedback events to its `events.url`: JSON batches
/// (`{"events":[…]}`, ``DeliveryEvent``) in id order, signed (``EventSignature``).
///
/// Each app has its own loop, so a receiver that hangs or fails holds back its own app's events
/// only. One instance at a time sends an app's events (a lease per app, `events:<app>`), so they
/// leave in order. A 2xx deletes the batch; anything else (429, 5xx, another status, a connection
/// error) keeps it and pauses the app: exponential backoff with jitter, or the receiver's
/// `Retry-After` (seconds, at most an hour) when longer. The instance keeps the app's lease while
/// it waits, so no other instance retries early; the next try sends the same events again first.
/// Events are sent at least once. Deliveries never wait for this: outcomes write events to the
/// table and go on.
final class EventForwarder: Service, Sendable {
    struct Target: Sendable {
        var app: String
        var url: String
        var secret: SymmetricKey
    }

    /// What one try at an app's queue came to.
    private enum Round {
        /// Nothing to send (or not this instance's turn): look again after the poll interval.
        case idle
        /// The receiver accepted a batch; when it was full, more may wait.
        case sent(full: Bool)
        /// The receiver refused the batch or did not answer: back off (or wait what it asked for in Retry-After).
        case failed(retryAfter: Int?)
    }

    private let queue: EventQueue
    private let leases: Leases
    private let http: HTTP2Client
    /// Each app's receiver, by app; a reload replaces them.
    private let targets: Mutex<[String: Target]>
    private let settings: EventForwarderSettings
    private let metrics: RelayMetrics
    private let logger: Logger
    /// The apps whose loop is running.
    private let loops = Mutex<Set<String>>([])
    /// Leases this instance may hold, given back at shutdown.
    private let held = Mutex<Set<String>>([])
    /// Times the polls, the waits after a failure and the renewal of the leases.
    private let clock: RelayClock

    init(
        client: PostgresClient,
        apps: [(id: String, events: EventSettings)],
        settings: EventForwarderSettings,
        caFile: String?,
        metrics: RelayMetrics,
        logger: Logger,
        clock: RelayClock = .system
    ) throws {
        self.clock = clock
        queue = EventQueue(client: client)
        leases = Leases(client: client, owner: leaseOwnerName(role: "events"))
        targets = Mutex(try Self.targets(apps))
        http = try HTTP2Client(configuration: .init(maxConnectionsPerHost: 1, maxConcurrentStreams: 10, caFile: caFile))
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
    }

    /// The event types each configured app wants (for the dispatcher, which writes them).
    static func wanted(by apps: [(id: String, events: EventSettings)]) -> [String: Set<DeliveryEventType>] {
        Dictionary(uniqueKeysWithValues: apps.map { app in (app.id, app.events.eventTypes) })
    }

    /// The receivers of `apps`; throws when a secret file cannot be read.
    static func targets(_ apps: [(id: String, events: EventSettings)]) throws -> [String: Target] {
        Dictionary(
            uniqueKeysWithValues: try apps.map { app in
                (app.id, Target(app: app.id, url: app.events.url, secret: try app.events.secret(app: app.id)))
            }
        )
    }

    /// A reload: a new app's loop starts within a poll interval, a removed app's loop ends after
    /// the batch it is sending, and a changed receiver or secret is used from the next batch on.
    func update(_ targets: [String: Target]) { self.targets.withLock { $0 = targets } }

    /// The app's receiver now, or `nil` once a reload removed it.
    private func target(_ app: String) -> Target? { targets.withLock { $0[app] } }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                // Starts a loop for each app that has none, then looks again after a poll interval.
                while !Task.isCancelled {
                    for app in self.targets.withLock({ Array($0.keys) })
                    where self.loops.withLock({ $0.insert(app).inserted }) {
                        group.addTask {
                            await self.serve(app)
                            self.loops.withLock { _ = $0.remove(app) }
                        }
                    }
                    try? await self.clock.sleep(for: self.settings.pollInterval)
                }
            }
        }
        for name in held.withLock({ $0 }) {
            try? await leases.release(name)
        }
        await http.shutdown()
    }

    /// One app's loop, until the service is cancelled or a reload removes the app.
    private func serve(_ app: String) async {
        // The lease outlives a request several times over, so it cannot lapse during one.
        var lease = HeldLease(
            name: "events:\(app)",
            duration: max(settings.lease, settings.requestTimeout * 3),
            clock: clock
        )
        held.withLock { _ = $0.insert(lease.name) }
        var failures = 0
        var countedAt: ContinuousClock.Instant?
        while !Task.isCancelled {
            guard let target = target(app) else {
                // Removed by a reload: let another instance (or this one, if it comes back) take over.
                if lease.isHeld { try? await leases.release(lease.name) }
                held.withLock { _ = $0.remove(lease.name) }
                return
            }
            let round: Round
            do {
                guard try await lease.hold(with: leases) else {
                    try? await clock.sleep(for: settings.pollInterval)
                    continue
                }
                if countedAt.map({ $0 + .seconds(5) < clock.now() }) ?? true {
                    metrics.eventsQueued(app: target.app, count: try await queue.queued(app: target.app, cap: 100_000))
                    countedAt = clock.now()
                }
                round = try await sendBatch(target, http: self.http, failures: failures)
            } catch {
                lease.forget()
                logger.log(
                    level: PostgresError.logLevel(for: error),
                    "reading the feedback event queue failed",
                    metadata: PostgresError.metadata(error, ["push.app": "\(target.app)"])
                )
                round = .idle
            }
            switch round {
            case .idle:
                try? await clock.sleep(for: settings.pollInterval)
            case .sent(let full):
                if failures > 0 {
                    logger.notice(
                        "feedback events are accepted again",
                        metadata: ["push.app": "\(target.app)", "push.failures": "\(failures)"]
                    )
                }
                failures = 0
                if !full { try? await clock.sleep(for: settings.pollInterval) }
            case .failed(let retryAfter):
                failures += 1
                let delay = backoffDelay(
                    base: settings.retryBase,
                    cap: settings.retryMax,
                    attempt: failures,
                    retryAfter: retryAfter,
                    maxRetryAfter: settings.maxRetryAfter
                )
                // Wait, renewing the lease (and the queue gauge) meanwhile.
                let until = clock.now() + delay
                while !Task.isCancelled, clock.now() < until {
                    try? await clock.sleep(for: min(until - clock.now(), lease.duration / 4))
                    if (try? await lease.hold(with: leases)) != true { lease.forget() }
                    if let count = try? await queue.queued(app: target.app, cap: 100_000) {
                        metrics.eventsQueued(app: target.app, count: count)
                    }
                }
            }
        }
    }

    /// Sends the app's oldest events, if any.
    private func sendBatch(_ target: Target, http: HTTP2Client, failures: Int) async throws -> Round {
        let events = try await queue.oldest(app: target.app, limit: settings.batchSize)
        guard !events.isEmpty else {
            return .idle
        }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
        }
        let body = Array(try encoder.encode(["events": events]))
        let timestamp = String(Int64(Date().timeIntervalSince1970))
        var problem: String?
        var retryAfter: Int?
        do {
            let response = try await http.send(
                HTTP2Request(
                    url: target.url,
                    headers: [
                        ("content-type", "application/json"), ("user-agent", "PushRelay"),
                        (EventSignature.timestampHeader, timestamp),
                        (
                            EventSignature.signatureHeader,
                            EventSignature.sign(body: body, timestamp: timestamp, secret: target.secret)
                        ),
                    ],
                    body: body,
                    timeout: settings.requestTimeout
                )
            )
            if !(200..<300).contains(response.status) {
                problem = "HTTP \(response.status)"
                retryAfter = RetryAfter.seconds(response.header("retry-after"))
            }
        } catch {
            problem = "transport: \(error)"
        }
        if let problem {
            metrics.eventFailure(app: target.app, reason: problem.hasPrefix("transport") ? "transport" : problem)
            logger.warning(
                "sending feedback events failed; the app's events wait and are sent again",
                metadata: [
                    "push.app": "\(target.app)", "push.events": "\(events.count)", "push.reason": "\(problem)",
                    "push.failures": "\(failures + 1)",
                ]
            )
            return .failed(retryAfter: retryAfter)
        }
        // If this fails, the events stay queued and go again: at least once.
        try await queue.sent(app: target.app, ids: events.map(\.id))
        metrics.eventsSent(app: target.app, count: events.count)
        return .sent(full: events.count >= settings.batchSize)
    }
}
