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
/// form the next, larger batch. A caller is answered only after its batch has committed; if the
/// statement fails, every webhook in the batch fails together and nothing of it is stored.
final class IntakeWriter: Service, Sendable {
    /// The channel the dispatcher listens on; notified after each committed batch.
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

    init(client: PostgresClient, logger: Logger, maxBatch: Int = 500, maxConcurrentWrites: Int = 2) {
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
        do {
            let receipts = try await store(batch.map(\.item))
            for (entry, receipt) in zip(batch, receipts) { entry.waiter.resume(returning: receipt) }
        } catch {
            logger.warning("storing a webhook batch failed", metadata: ["error": "\(error)", "push.batch_size": "\(batch.count)"])
            let failure: any Error = (error as? PostgresError)?.isUnavailable == true ? APIError.databaseUnavailable() : error
            for entry in batch { entry.waiter.resume(throwing: failure) }
            return
        }
        // Wake dispatchers; a lost NOTIFY only delays delivery until their next poll.
        do {
            try await client.notify(channel: Self.channel)
        } catch {
            logger.debug("NOTIFY after intake failed", metadata: ["error": "\(error)"])
        }
    }

    /// One statement: the notifications, implicit registration of unknown devices, and one delivery
    /// per device that is not marked invalid. Returns a receipt per item, in order.
    func store(_ items: [IntakeItem]) async throws -> [IntakeReceipt] {
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
        let result = try await client.query(
            """
            WITH input AS MATERIALIZED (
                SELECT nextval(pg_get_serial_sequence('notifications', 'id')) AS id, t.*
                FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY
                    AS t(app_id, ticket_id, title, body, request_id, ord)
            ),
            inserted AS (
                INSERT INTO notifications (id, app_id, ticket_id, title, body, request_id) OVERRIDING SYSTEM VALUE
                SELECT id, app_id, ticket_id, title, body, request_id FROM input
            ),
            targets AS MATERIALIZED (
                SELECT i.id AS notification_id, i.app_id, d.token, d.platform
                FROM unnest($6::bigint[], $7::text[], $8::text[]) AS d(ord, token, platform)
                JOIN input i ON i.ord = d.ord
            ),
            registered AS (
                INSERT INTO devices (app_id, token, platform)
                SELECT DISTINCT ON (app_id, token) app_id, token, platform FROM targets
                ON CONFLICT (app_id, token) DO NOTHING
            ),
            queued AS (
                INSERT INTO deliveries (notification_id, app_id, device_token, platform)
                SELECT t.notification_id, t.app_id, t.token, t.platform FROM targets t
                WHERE NOT EXISTS (
                    SELECT 1 FROM devices dv WHERE dv.app_id = t.app_id AND dv.token = t.token AND dv.status = 'invalid'
                )
                RETURNING notification_id
            )
            SELECT i.ord, i.id, count(q.notification_id)
            FROM input i LEFT JOIN queued q ON q.notification_id = i.id
            GROUP BY i.ord, i.id ORDER BY i.ord
            """,
            [apps, tickets, titles, bodies, requestIDs, ordinals, tokens, platforms],
            prepare: true
        )
        guard result.rows.count == items.count else {
            throw PostgresError(code: .decoding, message: "intake returned \(result.rows.count) rows for \(items.count) webhooks")
        }
        return try zip(items, result.rows).map { item, row in
            let (_, id, queued) = try row.decode((Int, Int64, Int).self)
            return IntakeReceipt(notificationID: id, deliveries: queued, skipped: item.webhook.devices.count - queued)
        }
    }
}
