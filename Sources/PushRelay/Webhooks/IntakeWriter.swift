import Foundation
import HTTPTypes
import Logging
import Postgres
import ServiceLifecycle
import Synchronization

/// One webhook ready to be stored.
struct IntakeItem: Sendable {
    var appID: String
    var webhook: ZendeskWebhook
    var requestID: String?
}

/// What the caller learns once its webhook is committed.
struct IntakeReceipt: Sendable, Hashable {
    var notificationID: Int64
    var deliveries: Int
    var skipped: Int
}

/// Stores webhooks with group commit.
///
/// Each request hands its webhook to ``submit(_:)`` and waits. The writer takes everything queued,
/// up to `maxBatch`, and stores the whole batch with one SQL statement (its own transaction), so
/// many concurrent webhooks share one WAL flush while `synchronous_commit` stays on. Up to
/// `maxConcurrentWrites` batches are in flight at once; while they are, new webhooks pile up and
/// form the next, larger batch. A caller is answered only after its batch has committed. If the
/// statement fails because of one webhook's data (a data exception), the batch is split and its
/// halves stored apart until only that webhook fails; any other failure fails the whole batch and
/// stores nothing of it.
final class IntakeWriter: Service, Sendable {
    /// The channel the dispatchers listen on; notified by each batch that stores a delivery unclaimed.
    static let channel = "push_relay_deliveries"

    private typealias Waiter = CheckedContinuation<IntakeReceipt, any Error>

    private struct State {
        var queue: [(item: IntakeItem, waiter: Waiter)] = []
        var accepting = true
    }

    private let client: PostgresClient
    private let logger: Logger
    private let maxBatch: Int
    private let maxConcurrentWrites: Int
    private let state = Mutex(State())
    private let doorbell: AsyncStream<Void>
    private let ring: AsyncStream<Void>.Continuation
    /// This instance's dispatcher, which takes fresh deliveries straight from intake; `nil` when
    /// this instance does not deliver.
    private let dispatcher: Dispatcher?

    init(client: PostgresClient, logger: Logger, maxBatch: Int = 500, maxConcurrentWrites: Int = 2, dispatcher: Dispatcher? = nil) {
        self.dispatcher = dispatcher
        self.client = client
        self.logger = logger
        self.maxBatch = max(1, maxBatch)
        self.maxConcurrentWrites = max(1, maxConcurrentWrites)
        (doorbell, ring) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Queues a webhook and returns once it is committed.
    func submit(_ item: IntakeItem) async throws -> IntakeReceipt {
        try await withCheckedThrowingContinuation { (waiter: Waiter) in
            let accepted = state.withLock { state in
                guard state.accepting else { return false }
                state.queue.append((item, waiter))
                return true
            }
            if accepted {
                ring.yield()
            } else {
                waiter.resume(throwing: APIError(.serviceUnavailable, code: "shutting_down", message: "the relay is shutting down; retry"))
            }
        }
    }

    /// Writes batches until graceful shutdown, then writes what is still queued and stops.
    func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            // The doorbell ends on graceful shutdown; anything queued after that is still written.
            await withGracefulShutdownHandler {
                for await _ in doorbell {
                    while let batch = takeBatch() {
                        if inFlight == maxConcurrentWrites {
                            await group.next()
                            inFlight -= 1
                        }
                        group.addTask { await self.write(batch) }
                        inFlight += 1
                    }
                }
            } onGracefulShutdown: {
                self.ring.finish()
            }
            state.withLock { $0.accepting = false }
            while let batch = takeBatch() {
                group.addTask { await self.write(batch) }
            }
            await group.waitForAll()
        }
    }

    private func takeBatch() -> [(item: IntakeItem, waiter: Waiter)]? {
        state.withLock { state in
            guard !state.queue.isEmpty else { return nil }
            let count = min(maxBatch, state.queue.count)
            let batch = Array(state.queue.prefix(count))
            state.queue.removeFirst(count)
            return batch
        }
    }

    private func write(_ batch: [(item: IntakeItem, waiter: Waiter)]) async {
        let items = batch.map(\.item)
        // Room in this instance's dispatcher: those deliveries are stored claimed and started at once.
        var reserved: [String: Int] = [:]
        var claims: [Bool] = []
        if let dispatcher {
            var wanted: [String: Int] = [:]
            for item in items { wanted[item.appID, default: 0] += item.webhook.devices.count }
            for (app, count) in wanted { reserved[app] = dispatcher.reserve(app: app, count: count) }
            var left = reserved
            for item in items {
                for _ in item.webhook.devices {
                    let claim = left[item.appID, default: 0] > 0
                    if claim { left[item.appID]! -= 1 }
                    claims.append(claim)
                }
            }
        }
        let stored: (receipts: [IntakeReceipt], claimed: [ClaimedDelivery])
        do {
            stored = try await store(items, claims: dispatcher == nil ? nil : claims)
        } catch {
            for (app, count) in reserved { dispatcher?.release(app: app, count: count) }
            let postgres = error as? PostgresError
            if batch.count > 1, postgres?.isDataException == true {
                // One member's data failed the statement for everyone: store the halves apart, so
                // the others commit and only the member at fault fails (for one such member, about
                // 2·log2(batch) more statements, on a path valid input never takes).
                logger.warning(
                    "a webhook batch failed on a value of one of its webhooks; storing its halves separately",
                    metadata: ["error": "\(error)", "push.batch_size": "\(batch.count)"]
                )
                let half = batch.count / 2
                await write(Array(batch[..<half]))
                await write(Array(batch[half...]))
                return
            }
            logger.warning("storing a webhook batch failed", metadata: ["error": "\(error)", "push.batch_size": "\(batch.count)"])
            let failure: any Error =
                if postgres?.isUnavailable == true {
                    APIError.databaseUnavailable()
                } else if postgres?.isDataException == true {
                    APIError(.badRequest, code: "unstorable_input", message: "the webhook holds a value the database cannot store")
                } else {
                    error
                }
            for entry in batch { entry.waiter.resume(throwing: failure) }
            return
        }
        for (entry, receipt) in zip(batch, stored.receipts) { entry.waiter.resume(returning: receipt) }
        if let dispatcher {
            var used: [String: Int] = [:]
            for delivery in stored.claimed { used[delivery.appID, default: 0] += 1 }
            for (app, count) in reserved { dispatcher.release(app: app, count: count - used[app, default: 0]) }
            dispatcher.handOff(stored.claimed)
        }
    }

    /// One statement: the notifications, implicit registration of unknown devices, one delivery per
    /// device that is not marked invalid, and one more unread reply for each distinct owner of those
    /// devices on the ticket (the owner is the device's user, or the token when no user is linked).
    /// Deliveries flagged in `claims` are stored already claimed for this instance's dispatcher.
    /// A NOTIFY on ``UnreadChannel/name`` names the owners whose counts changed, and one on
    /// ``channel`` wakes the dispatchers when some delivery was stored unclaimed (a lost NOTIFY only
    /// delays delivery until the next poll); both are delivered at commit. Returns a receipt per
    /// item, in order, and the deliveries stored claimed.
    ///
    /// The statement keeps one generic plan per connection (`planning: .cached`): planning it took
    /// about as long as running it. Its plan cannot go bad with the tables' sizes because every
    /// table it reads is reached through a primary key: devices through a `LATERAL … LIMIT 1`
    /// lookup (a plain join is planned as a hash join over a sequential scan of `devices` on small
    /// tables), unread counters through the `(app_id, owner)` prefix.
    func store(_ items: [IntakeItem], claims: [Bool]? = nil) async throws -> (receipts: [IntakeReceipt], claimed: [ClaimedDelivery]) {
        var apps: [String] = [], tickets: [String] = [], titles: [String] = [], bodies: [String] = []
        var requestIDs: [String?] = []
        var ordinals: [Int] = [], tokens: [String] = [], platforms: [String] = []
        for (index, item) in items.enumerated() {
            apps.append(item.appID)
            tickets.append(item.webhook.ticketID)
            titles.append(item.webhook.title)
            bodies.append(item.webhook.body)
            requestIDs.append(item.requestID)
            for device in item.webhook.devices {
                ordinals.append(index + 1)
                tokens.append(device.token)
                platforms.append(device.platform.rawValue)
            }
        }
        let claimFlags = claims ?? Array(repeating: false, count: tokens.count)
        let claimedAt = ContinuousClock.now
        let result = try await client.query(
            """
            WITH input AS MATERIALIZED (
                SELECT nextval('notifications_id_seq'::regclass) AS id, t.*
                FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY
                    AS t(app_id, ticket_id, title, body, request_id, ord)
            ),
            inserted AS (
                INSERT INTO notifications (id, app_id, ticket_id, title, body, request_id) OVERRIDING SYSTEM VALUE
                SELECT id, app_id, ticket_id, title, body, request_id FROM input
            ),
            targets AS MATERIALIZED (
                SELECT i.id AS notification_id, i.ord, i.app_id, i.ticket_id, d.token, d.platform, d.claim,
                       dv.status AS device_status, coalesce(dv.user_id, d.token) AS owner, dv.environment
                FROM unnest($6::bigint[], $7::text[], $8::text[], $9::bool[]) AS d(ord, token, platform, claim)
                JOIN input i ON i.ord = d.ord
                LEFT JOIN LATERAL (
                    SELECT status, user_id, environment FROM devices WHERE app_id = i.app_id AND token = d.token LIMIT 1
                ) dv ON true
            ),
            registered AS (
                INSERT INTO devices (app_id, token, platform)
                SELECT DISTINCT ON (app_id, token) app_id, token, platform FROM targets WHERE device_status IS NULL
                ON CONFLICT (app_id, token) DO NOTHING
            ),
            live AS MATERIALIZED (
                SELECT * FROM targets WHERE device_status IS DISTINCT FROM 'invalid'
            ),
            increments AS MATERIALIZED (
                SELECT app_id, owner, ticket_id, count(DISTINCT notification_id)::int AS added
                FROM live GROUP BY app_id, owner, ticket_id
            ),
            counted AS (
                INSERT INTO unread_counters AS u (app_id, owner, ticket_id, unread)
                SELECT app_id, owner, ticket_id, added FROM increments ORDER BY app_id, owner, ticket_id
                ON CONFLICT (app_id, owner, ticket_id) DO UPDATE SET unread = u.unread + excluded.unread, updated_at = now()
            ),
            totals AS MATERIALIZED (
                SELECT o.app_id, o.owner,
                       o.added + coalesce((SELECT sum(u.unread) FROM unread_counters u WHERE u.app_id = o.app_id AND u.owner = o.owner), 0)::int
                           AS total
                FROM (SELECT app_id, owner, sum(added)::int AS added FROM increments GROUP BY app_id, owner) o
            ),
            queued AS (
                INSERT INTO deliveries (notification_id, app_id, device_token, platform, status, attempts, lease_owner, lease_expires_at, next_attempt_at)
                SELECT notification_id, app_id, token, platform,
                       CASE WHEN claim THEN 'sending' ELSE 'pending' END, CASE WHEN claim THEN 1 ELSE 0 END,
                       CASE WHEN claim THEN $10 END, CASE WHEN claim THEN now() + make_interval(secs => $11) END,
                       CASE WHEN claim THEN now() + make_interval(secs => $11) ELSE now() END
                FROM live
                RETURNING id, notification_id, device_token, status
            ),
            notified AS (
                SELECT pg_notify('\(UnreadChannel.name)', CASE WHEN length(owners) > 7900 THEN '*' ELSE owners END)
                FROM (SELECT string_agg(DISTINCT app_id || ' ' || owner, E'\\n') AS owners FROM increments) changed
                WHERE owners IS NOT NULL
            ),
            woken AS (
                SELECT pg_notify('\(Self.channel)', '') FROM (SELECT 1 FROM live WHERE NOT claim LIMIT 1) unclaimed
            )
            SELECT i.ord, i.id, q.id, q.device_token, q.status = 'sending', l.platform, l.environment, t.total,
                   (SELECT count(*) FROM notified) + (SELECT count(*) FROM woken)
            FROM input i
            LEFT JOIN queued q ON q.notification_id = i.id
            LEFT JOIN live l ON l.notification_id = q.notification_id AND l.token = q.device_token
            LEFT JOIN totals t ON t.app_id = l.app_id AND t.owner = l.owner
            ORDER BY i.ord
            """,
            [apps, tickets, titles, bodies, requestIDs, ordinals, tokens, platforms, claimFlags, dispatcher?.owner ?? "", dispatcher?.leaseSeconds ?? 60],
            prepare: true, planning: .cached
        )
        var queued = Array(repeating: 0, count: items.count)
        var ids = Array(repeating: Int64(0), count: items.count)
        var claimed: [ClaimedDelivery] = []
        let now = Date()
        for row in result.rows {
            let (ord, id, deliveryID) = try row.decode((Int, Int64, Int64?).self)
            guard ord >= 1, ord <= items.count else { continue }
            ids[ord - 1] = id
            guard let deliveryID else { continue }
            queued[ord - 1] += 1
            guard try row.decode(Bool.self, at: 4) else { continue }
            let item = items[ord - 1]
            claimed.append(
                ClaimedDelivery(
                    id: deliveryID, appID: item.appID, token: try row.decode(String.self, at: 3),
                    platform: Platform(rawValue: try row.decode(String.self, at: 5)) ?? .ios, kind: "alert", attempts: 1, createdAt: now,
                    ticketID: item.webhook.ticketID, title: item.webhook.title, body: item.webhook.body,
                    environment: try row.decode(String?.self, at: 6), deviceActive: true, badge: try row.decode(Int?.self, at: 7),
                    claimedAt: claimedAt
                )
            )
        }
        guard !ids.contains(0) else {
            throw PostgresError(code: .decoding, message: "intake returned no row for some of \(items.count) webhooks")
        }
        let receipts = items.indices.map { index in
            IntakeReceipt(notificationID: ids[index], deliveries: queued[index], skipped: items[index].webhook.devices.count - queued[index])
        }
        return (receipts, claimed)
    }
}

/// The channel on which changes of unread counts are announced. The payload lists the changed
/// owners, one `app owner` per line, or is `*` when the list would not fit (then every listener
/// re-reads).
enum UnreadChannel {
    static let name = "push_relay_unread"
}
