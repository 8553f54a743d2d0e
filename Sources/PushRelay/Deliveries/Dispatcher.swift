import Foundation
import Logging
import NIOCore
import Postgres
import ServiceLifecycle
import Synchronization

/// Sends queued deliveries to APNs and FCM.
///
/// The table is the truth. The dispatcher claims due rows per app (`FOR UPDATE SKIP LOCKED`), marks
/// them `sending` under a lease (`next_attempt_at` = lease expiry, so a crashed instance's claims
/// come due again), queues them per app and platform for as many sender tasks as the provider's
/// HTTP/2 client has streams, and writes the outcomes back in batches. It looks
/// for work when intake sends a NOTIFY, when a send frees room, and every `pollInterval` (retries
/// come due that way). Each app has at most `maxInFlightPerApp` deliveries claimed and not
/// finished, so an app whose provider hangs or fails keeps its own rows waiting and no one else's.
///
/// Fast path: intake reserves room here (``reserve(app:count:)``), stores those deliveries already
/// claimed for this instance in the same transaction as the webhook, and hands them over
/// (``handOff(_:)``) after the commit, so a fresh push costs no claim query. The lease covers them
/// as it covers claimed rows: if this instance dies, they come due again.
///
/// On graceful shutdown it stops claiming, lets in-flight sends finish, writes their outcomes, then
/// closes the provider connections.
final class Dispatcher: Service, Sendable {
    /// What became of one claimed delivery.
    struct Result: Sendable {
        var delivery: ClaimedDelivery
        var status: String
        var nextAttemptAt: Date?
        var providerID: String?
        var error: String?
        /// -1 when the attempt does not count (our credentials were rejected, or the delivery was
        /// handed back unsent).
        var attemptAdjustment: Int
        var deadToken: Bool
        /// For a dead token: when the provider says it stopped being valid, if it said.
        var deadSince: Date? = nil
        /// The APNs environment that accepted a device registered without one.
        var learnedEnvironment: String? = nil
        /// The metric's outcome label when the status does not tell it (`unsendable` for a
        /// `failed` push whose request could not be built).
        var metricOutcome: String? = nil

        /// Back to `pending` without counting the attempt, due at `next` (`nil`: when its lease
        /// would have ended).
        static func uncounted(_ delivery: ClaimedDelivery, next: Date?, error: String?) -> Result {
            Result(delivery: delivery, status: "pending", nextAttemptAt: next, error: error, attemptAdjustment: -1, deadToken: false)
        }
    }

    /// One provider's line: an app's APNs or FCM deliveries.
    private struct Line: Hashable {
        var app: String
        var platform: Platform
    }

    private struct State {
        /// Claimed and not finished (waiting or being sent), per app: at most `maxInFlightPerApp`.
        var inFlight: [String: Int] = [:]
        var results: [Result] = []
        /// Deliveries intake stored already claimed for this instance, waiting to be started.
        var handedOff: [ClaimedDelivery] = []
        /// Claimed deliveries waiting for a sender, per line, oldest first.
        var waiting: [Line: CircularBuffer<ClaimedDelivery>] = [:]
        /// Sender tasks running per line.
        var senders: [Line: Int] = [:]
        var stopping = false
        /// Set by the wake-ups that may find due rows (NOTIFY, the poll, room freed); a hand-over
        /// from intake alone needs no claim query.
        var claimWanted = true
    }

    private let client: PostgresClient
    private let providers: ProviderSet
    private let settings: DeliverySettings
    private let apps: [String]
    private let wakeUps: AsyncStream<PostgresListenerEvent>?
    private let metrics: RelayMetrics
    private let logger: Logger
    /// This instance's name in `lease_owner`.
    let owner: String
    /// The lease of a claim, in seconds.
    var leaseSeconds: Double { settings.lease.timeInterval }
    private let state = Mutex(State())
    private let doorbell: AsyncStream<Void>
    private let ring: AsyncStream<Void>.Continuation
    private let writerBell: AsyncStream<Void>
    private let writerRing: AsyncStream<Void>.Continuation

    init(
        client: PostgresClient, providers: ProviderSet, settings: DeliverySettings, apps: [String],
        wakeUps: AsyncStream<PostgresListenerEvent>?, metrics: RelayMetrics = RelayMetrics(), logger: Logger
    ) {
        self.metrics = metrics
        self.client = client
        self.providers = providers
        self.settings = settings
        self.apps = apps
        self.wakeUps = wakeUps
        self.logger = logger
        owner = leaseOwnerName(role: "delivery")
        (doorbell, ring) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        (writerBell, writerRing) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    func run() async throws {
        guard !apps.isEmpty else {
            try? await gracefulShutdown()
            await providers.shutdown()
            return
        }
        await withTaskGroup(of: Void.self) { helpers in
            // Wake-ups: NOTIFY from intake (and a re-read whenever the listener reconnects) ...
            if let wakeUps {
                helpers.addTask {
                    for await _ in wakeUps { self.wantClaim() }
                }
            }
            // ... and the poll, which is what brings retries back.
            helpers.addTask { [settings] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: settings.pollInterval)
                    self.wantClaim()
                }
            }
            async let writer: Void = writeResults()
            ring.yield()

            await withDiscardingTaskGroup { sends in
                await withGracefulShutdownHandler {
                    for await _ in doorbell {
                        startHandedOff(into: &sends)
                        if state.withLock({ state in defer { state.claimWanted = false }; return state.claimWanted }) {
                            await claimAndSend(into: &sends)
                        }
                    }
                } onGracefulShutdown: {
                    self.state.withLock { $0.stopping = true }
                    self.ring.finish()
                }
                // Intake stops before the dispatcher, so nothing is handed over after this.
                startHandedOff(into: &sends)
                // Leaving the group waits for the sends in flight.
            }
            // The writer stores what is left, then the wake-up tasks are stopped.
            writerRing.finish()
            await writer
            helpers.cancelAll()
        }
        await providers.shutdown()
    }

    /// Claims due deliveries for every app with room, and starts their sends; repeats while a
    /// claim comes back full.
    private func claimAndSend(into sends: inout DiscardingTaskGroup) async {
        while true {
            let room = state.withLock { state in
                apps.map { app in (app, settings.maxInFlightPerApp - state.inFlight[app, default: 0]) }.filter { $0.1 > 0 }
            }
            guard !room.isEmpty else { return }
            let limits = room.map { min($0.1, settings.batchSize) }
            let claimed: [ClaimedDelivery]
            do {
                claimed = try await claim(apps: room.map(\.0), limits: limits)
            } catch {
                logger.warning("claiming deliveries failed; trying again at the next poll", metadata: ["error": "\(error)"])
                return
            }
            guard !claimed.isEmpty else { return }
            state.withLock { state in
                for delivery in claimed { state.inFlight[delivery.appID, default: 0] += 1 }
            }
            queue(claimed, into: &sends)
            if claimed.count < limits.reduce(0, +) { return }
        }
    }

    /// Reserves room for up to `count` sends of `app`; returns how many were granted. Each granted
    /// slot must be handed over or given back with ``release(app:count:)``.
    func reserve(app: String, count: Int) -> Int {
        guard apps.contains(app) else { return 0 }
        return state.withLock { state in
            guard !state.stopping else { return 0 }
            let granted = max(0, min(count, settings.maxInFlightPerApp - state.inFlight[app, default: 0]))
            state.inFlight[app, default: 0] += granted
            return granted
        }
    }

    /// Gives back reserved slots that were not used.
    func release(app: String, count: Int) {
        guard count > 0 else { return }
        let wasFull = state.withLock { state in
            let wasFull = state.inFlight[app, default: 0] >= settings.maxInFlightPerApp
            state.inFlight[app, default: 0] -= count
            return wasFull
        }
        if wasFull { wantClaim() }
    }

    /// Rings for a claim query.
    private func wantClaim() {
        state.withLock { $0.claimWanted = true }
        ring.yield()
    }

    /// Starts deliveries intake stored claimed for this instance (their slots are reserved).
    func handOff(_ deliveries: [ClaimedDelivery]) {
        guard !deliveries.isEmpty else { return }
        state.withLock { $0.handedOff.append(contentsOf: deliveries) }
        ring.yield()
    }

    private func startHandedOff(into sends: inout DiscardingTaskGroup) {
        let deliveries = state.withLock { state in
            defer { state.handedOff = [] }
            return state.handedOff
        }
        queue(deliveries, into: &sends)
    }

    /// Sender tasks per line: as many as the provider's HTTP/2 client has streams, so a sender's
    /// request starts as soon as it is made. More would only wait in the client's queue, each
    /// holding a task's memory; claimed deliveries beyond it wait here as plain values, so
    /// `maxInFlightPerApp` can be large.
    private var sendersPerLine: Int { max(1, settings.connectionsPerHost * settings.streamsPerConnection) }

    /// Queues claimed deliveries on their lines and starts the senders they need.
    private func queue(_ deliveries: [ClaimedDelivery], into sends: inout DiscardingTaskGroup) {
        guard !deliveries.isEmpty else { return }
        let cap = sendersPerLine
        let start = state.withLock { state -> [Line] in
            var start: [Line] = []
            for delivery in deliveries {
                let line = Line(app: delivery.appID, platform: delivery.platform)
                state.waiting[line, default: CircularBuffer()].append(delivery)
                if state.senders[line, default: 0] < cap {
                    state.senders[line, default: 0] += 1
                    start.append(line)
                }
            }
            return start
        }
        for line in start {
            sends.addTask { await self.send(line) }
        }
    }

    /// One sender: delivers the line's waiting deliveries, oldest first, until none is left.
    ///
    /// A delivery is not sent when its send could outlast its lease (``DeliverySettings/sendWindow``
    /// after the claim): another claimer could then send it too. And once the dispatcher is
    /// stopping, waiting deliveries are not sent at all, so shutdown does not wait for a long
    /// queue. Either way the delivery is handed back: `pending`, its attempt not counted, the
    /// lease released; a lapsed one comes due when its lease would have ended, one handed back at
    /// shutdown at once.
    private func send(_ line: Line) async {
        var lapsed = 0
        var handedBack = 0
        while let (delivery, stopping) = state.withLock({ state -> (ClaimedDelivery, Bool)? in
            if let next = state.waiting[line]?.popFirst() { return (next, state.stopping) }
            state.senders[line, default: 1] -= 1
            return nil
        }) {
            if stopping {
                handedBack += 1
                finish(.uncounted(delivery, next: Date(), error: nil), outcome: "handed_back")
            } else if ContinuousClock.now - delivery.claimedAt > settings.sendWindow {
                lapsed += 1
                finish(.uncounted(delivery, next: nil, error: "waited for a sender past its lease; claimed again later"), outcome: "lapsed")
            } else {
                await deliver(delivery)
            }
        }
        if lapsed > 0 {
            logger.warning(
                "claimed deliveries waited for a sender longer than their lease allows; handed back to be claimed again",
                metadata: ["push.app": "\(line.app)", "push.platform": "\(line.platform.rawValue)", "push.deliveries": "\(lapsed)"]
            )
        }
        if handedBack > 0 {
            logger.notice(
                "shutting down: deliveries still waiting for a sender handed back",
                metadata: ["push.app": "\(line.app)", "push.platform": "\(line.platform.rawValue)", "push.deliveries": "\(handedBack)"]
            )
        }
    }

    private func deliver(_ delivery: ClaimedDelivery) async {
        let result: Result
        if !delivery.deviceActive {
            result = Result(delivery: delivery, status: "skipped", error: "device is invalid or unregistered", attemptAdjustment: 0, deadToken: false)
        } else if Date().timeIntervalSince(delivery.createdAt) > settings.maxAge.timeInterval {
            result = Result(delivery: delivery, status: "expired", error: "older than the maximum age", attemptAdjustment: 0, deadToken: false)
        } else if let provider = providers.provider(app: delivery.appID, platform: delivery.platform) {
            result = decide(delivery, await provider.send(delivery))
        } else {
            let section = delivery.platform == .ios ? "apns" : "fcm"
            result = Result(
                delivery: delivery, status: "failed", error: "app has no \(section) section configured", attemptAdjustment: 0, deadToken: false
            )
        }
        let outcome: String
        switch (result.status, result.deadToken, result.attemptAdjustment) {
        case _ where result.metricOutcome != nil: outcome = result.metricOutcome!
        case (_, true, _): outcome = "dead_token"
        case ("pending", _, -1): outcome = "credential"
        case ("pending", _, _): outcome = "retry"
        default: outcome = result.status
        }
        finish(result, outcome: outcome)
    }

    /// Counts the outcome, frees the delivery's slot and queues its row's update.
    private func finish(_ result: Result, outcome: String) {
        let delivery = result.delivery
        metrics.delivery(app: delivery.appID, platform: delivery.platform.rawValue, outcome: outcome)
        let freed = state.withLock { state in
            let wasFull = state.inFlight[delivery.appID, default: 0] >= settings.maxInFlightPerApp
            state.inFlight[delivery.appID, default: 0] -= 1
            state.results.append(result)
            return wasFull
        }
        writerRing.yield()
        if freed { wantClaim() }
    }

    /// Applies the outcome rules to one answer.
    func decide(_ delivery: ClaimedDelivery, _ outcome: PushOutcome) -> Result {
        let token = DeviceToken.redacted(delivery.token)
        func clean(_ reason: String) -> String { reason.replacingOccurrences(of: delivery.token, with: token) }
        switch outcome {
        case .delivered(let providerID, let environment):
            return Result(
                delivery: delivery, status: "delivered", providerID: providerID, attemptAdjustment: 0, deadToken: false,
                learnedEnvironment: environment
            )
        case .deadToken(let reason, let since):
            logger.info(
                "device token is dead; marking the device invalid unless it was registered again since",
                metadata: ["push.app": "\(delivery.appID)", "push.device": "\(token)", "push.reason": "\(reason)"]
            )
            return Result(delivery: delivery, status: "failed", error: reason, attemptAdjustment: 0, deadToken: true, deadSince: since)
        case .permanent(let reason):
            logger.warning(
                "push rejected by the provider",
                metadata: ["push.app": "\(delivery.appID)", "push.device": "\(token)", "push.reason": "\(clean(reason))"]
            )
            return Result(delivery: delivery, status: "failed", error: clean(reason), attemptAdjustment: 0, deadToken: false)
        case .unsendable(let reason):
            logger.error(
                "the relay could not build the request for this push; the delivery is failed",
                metadata: ["push.app": "\(delivery.appID)", "push.platform": "\(delivery.platform.rawValue)", "push.reason": "\(clean(reason))"]
            )
            return Result(
                delivery: delivery, status: "failed", error: clean(reason), attemptAdjustment: 0, deadToken: false, metricOutcome: "unsendable"
            )
        case .credential(let reason, _):
            logger.error(
                "the provider rejected this app's credentials or connection; deliveries wait without using attempts",
                metadata: ["push.app": "\(delivery.appID)", "push.platform": "\(delivery.platform.rawValue)", "push.reason": "\(clean(reason))"]
            )
            return .uncounted(delivery, next: Date().addingTimeInterval(settings.credentialRetry.timeInterval), error: clean(reason))
        case .retry(let reason, let retryAfter):
            let delay = settings.retryDelay(attempt: delivery.attempts, retryAfter: retryAfter).timeInterval
            let next = Date().addingTimeInterval(delay)
            if delivery.attempts >= settings.maxAttempts || next.timeIntervalSince(delivery.createdAt) > settings.maxAge.timeInterval {
                logger.warning(
                    "giving up on a delivery",
                    metadata: ["push.app": "\(delivery.appID)", "push.device": "\(token)", "push.attempts": "\(delivery.attempts)", "push.reason": "\(clean(reason))"]
                )
                return Result(delivery: delivery, status: "expired", error: clean(reason), attemptAdjustment: 0, deadToken: false)
            }
            logger.debug(
                "push will be retried",
                metadata: ["push.app": "\(delivery.appID)", "push.device": "\(token)", "push.delay_s": "\(delay)", "push.reason": "\(clean(reason))"]
            )
            return Result(delivery: delivery, status: "pending", nextAttemptAt: next, error: clean(reason), attemptAdjustment: 0, deadToken: false)
        }
    }

    // MARK: - Database

    /// Runs one statement of the dispatcher's own bookkeeping (claims, outcomes) in its own
    /// transaction with `synchronous_commit` off: it does not wait for its WAL flush, so it does not
    /// queue in front of webhook commits, which do wait. Losing the last of these commits in a crash
    /// loses nothing a webhook was acknowledged for: a lost claim leaves the row due, a lost outcome
    /// leaves it leased until the lease ends; either way the push is sent again (at least once, and
    /// the collapse id folds the duplicate on the device).
    ///
    /// The statement turns the setting off itself, with ``relaxedCommit`` in its select list
    /// (`set_config(…, is_local => true)` lasts until the statement's own commit), so it takes one
    /// round trip instead of four (BEGIN, SET LOCAL, the statement, COMMIT).
    private func bookkeeping(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> PostgresQueryResult {
        try await client.query(sql, parameters, prepare: true)
    }

    /// A select-list item that sets `synchronous_commit` off until the end of the statement's
    /// transaction. A statement that returns no row does not evaluate it, and writes nothing either.
    static let relaxedCommit = "set_config('synchronous_commit', 'off', true)"

    /// Claims up to `limits[i]` due deliveries of `apps[i]`, oldest due first.
    func claim(apps: [String], limits: [Int]) async throws -> [ClaimedDelivery] {
        let claimedAt = ContinuousClock.now
        let result = try await bookkeeping(
            """
            WITH wanted AS (
                SELECT * FROM unnest($1::text[], $2::int[]) AS w(app_id, wanted)
            ),
            picked AS (
                SELECT p.id FROM wanted w CROSS JOIN LATERAL (
                    SELECT d.id FROM deliveries d
                    WHERE d.app_id = w.app_id AND d.status IN ('pending', 'sending') AND d.next_attempt_at <= now()
                    ORDER BY d.next_attempt_at
                    LIMIT w.wanted
                    FOR UPDATE SKIP LOCKED
                ) p
            ),
            claimed AS (
                UPDATE deliveries d
                SET status = 'sending', attempts = d.attempts + 1, lease_owner = $3,
                    lease_expires_at = now() + make_interval(secs => $4), next_attempt_at = now() + make_interval(secs => $4),
                    updated_at = now()
                FROM picked WHERE d.id = picked.id
                RETURNING d.id, d.notification_id, d.app_id, d.device_token, d.platform, d.kind, d.attempts, d.created_at
            )
            SELECT c.id, c.app_id, c.device_token, c.platform, c.kind, c.attempts, c.created_at,
                   n.ticket_id, n.title, n.body, dv.environment, coalesce(dv.status = 'active', false),
                   (SELECT sum(u.unread)::int FROM unread_counters u
                    WHERE u.app_id = c.app_id AND u.owner = coalesce(dv.user_id, c.device_token)),
                   \(Self.relaxedCommit)
            FROM claimed c
            LEFT JOIN notifications n ON n.id = c.notification_id
            LEFT JOIN devices dv ON dv.app_id = c.app_id AND dv.token = c.device_token
            """,
            [apps, limits, owner, settings.lease.timeInterval]
        )
        return try result.rows.map { row in
            let (id, app, token, platform, kind, attempts, created) = try row.decode((Int64, String, String, String, String, Int, Date).self)
            // Badge syncs belong to no notification.
            let (ticket, title, body) = try (row.decode(String?.self, at: 7), row.decode(String?.self, at: 8), row.decode(String?.self, at: 9))
            return ClaimedDelivery(
                id: id, appID: app, token: token, platform: Platform(rawValue: platform) ?? .ios, kind: kind, attempts: attempts,
                createdAt: created, ticketID: ticket ?? "", title: title ?? "", body: body ?? "",
                environment: try row.decode(String?.self, at: 10), deviceActive: try row.decode(Bool.self, at: 11),
                badge: try row.decode(Int?.self, at: 12), claimedAt: claimedAt
            )
        }
    }

    /// Writes outcomes as they come, many per transaction, until the sends are over.
    private func writeResults() async {
        for await _ in writerBell {
            await flush()
        }
        await flush()
    }

    private func flush() async {
        var failures = 0
        while true {
            let batch = state.withLock { state -> [Result] in
                let count = min(state.results.count, 2000)
                defer { state.results.removeFirst(count) }
                return Array(state.results.prefix(count))
            }
            guard !batch.isEmpty else { return }
            do {
                try await store(batch)
                failures = 0
            } catch {
                // Put them back; after the lease the rows would be sent again anyway (at least once).
                state.withLock { $0.results.insert(contentsOf: batch, at: 0) }
                failures += 1
                logger.warning("writing delivery outcomes failed; retrying", metadata: ["error": "\(error)", "push.outcomes": "\(batch.count)"])
                if failures >= 30 { return }
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// One transaction: the deliveries' new state, dead tokens' devices marked invalid and queued
    /// for Zendesk. Rows whose lease another instance has taken over are left to it.
    func store(_ batch: [Result]) async throws {
        var ids: [Int64] = [], statuses: [String] = [], next: [Date?] = [], providerIDs: [String?] = [], errors: [String?] = []
        var adjustments: [Int] = []
        var deadApps: [String] = [], deadTokens: [String] = [], deadPlatforms: [String] = [], deadReasons: [String] = []
        var deadSince: [Date?] = []
        var learnedApps: [String] = [], learnedTokens: [String] = [], learnedEnvironments: [String] = []
        for result in batch {
            ids.append(result.delivery.id)
            statuses.append(result.status)
            next.append(result.nextAttemptAt)
            providerIDs.append(result.providerID)
            errors.append(result.error)
            adjustments.append(result.attemptAdjustment)
            if result.deadToken {
                deadApps.append(result.delivery.appID)
                deadTokens.append(result.delivery.token)
                deadPlatforms.append(result.delivery.platform.rawValue)
                deadReasons.append(result.error ?? "dead token")
                deadSince.append(result.deadSince)
            }
            if let environment = result.learnedEnvironment {
                learnedApps.append(result.delivery.appID)
                learnedTokens.append(result.delivery.token)
                learnedEnvironments.append(environment)
            }
        }
        let outcomes: [any PostgresEncodable] = [ids, statuses, next, providerIDs, errors, adjustments, owner]
        guard !deadApps.isEmpty || !learnedApps.isEmpty else {
            // Most batches: only the deliveries' new state. Planned at each execution like every
            // statement here, this one plans in a fraction of the time of the full one below.
            _ = try await bookkeeping(Self.storeOutcomes, outcomes)
            return
        }
        // One statement: the deliveries' new state; the devices of dead tokens marked invalid and
        // queued for Zendesk; the APNs environment of devices that had none, where one was learned.
        _ = try await bookkeeping(
            """
            WITH updated AS (\(Self.updateOutcomes)),
            dead AS (
                -- A token APNs says died at some time, but that was registered again after it, lives on.
                SELECT * FROM (
                    SELECT DISTINCT ON (app_id, token) * FROM unnest($8::text[], $9::text[], $10::text[], $11::text[], $12::timestamptz[])
                        AS t(app_id, token, platform, reason, since)
                ) t
                WHERE since IS NULL OR NOT EXISTS (
                    SELECT 1 FROM devices dv WHERE dv.app_id = t.app_id AND dv.token = t.token AND dv.updated_at > t.since
                )
            ),
            invalidated AS (
                UPDATE devices dv SET status = 'invalid', invalid_reason = dead.reason, invalidated_at = now(), updated_at = now()
                FROM dead WHERE dv.app_id = dead.app_id AND dv.token = dead.token AND dv.status = 'active'
            ),
            queued AS (
                INSERT INTO zendesk_unregister_queue (app_id, token, platform, reason)
                SELECT app_id, token, platform, reason FROM dead
                ON CONFLICT (app_id, token) DO NOTHING
            ),
            learned AS (
                -- Devices registered without an environment, now known (APNs accepted them there).
                UPDATE devices dv SET environment = l.environment
                FROM unnest($13::text[], $14::text[], $15::text[]) AS l(app_id, token, environment)
                WHERE dv.app_id = l.app_id AND dv.token = l.token AND dv.environment IS NULL
            )
            SELECT (SELECT count(*) FROM updated), \(Self.relaxedCommit)
            """,
            outcomes + [deadApps, deadTokens, deadPlatforms, deadReasons, deadSince, learnedApps, learnedTokens, learnedEnvironments]
        )
    }

    /// The deliveries' new state, parameters $1–$7; rows whose lease another instance has taken
    /// over are left to it.
    static let updateOutcomes = """
        UPDATE deliveries d
        SET status = u.status, next_attempt_at = coalesce(u.next_at, d.next_attempt_at), provider_id = u.provider_id,
            last_error = u.error, attempts = d.attempts + u.adjustment, lease_owner = NULL, lease_expires_at = NULL,
            delivered_at = CASE WHEN u.status = 'delivered' THEN now() END, updated_at = now()
        FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::int[])
            AS u(id, status, next_at, provider_id, error, adjustment)
        WHERE d.id = u.id AND d.lease_owner = $7
        RETURNING 1
        """

    /// ``updateOutcomes`` alone, with the relaxed commit.
    static let storeOutcomes = "WITH updated AS (\(updateOutcomes)) SELECT (SELECT count(*) FROM updated), \(relaxedCommit)"
}
