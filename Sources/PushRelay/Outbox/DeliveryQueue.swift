import Foundation
import Postgres

/// Room a dispatcher granted intake: up to `granted[app]` of a batch's deliveries may be stored
/// already claimed for `owner`, under a lease of `lease`, and handed straight to it after the commit.
struct DeliveryReservation: Sendable, Equatable {
    var owner: String
    var lease: Duration
    var granted: [String: Int]

    /// Which of the deliveries, one per entry of `apps` in order, are stored claimed: the first
    /// `granted[app]` of each app.
    func claims(apps: [String]) -> [Bool] {
        var left = granted
        return apps.map { app in
            guard let room = left[app], room > 0 else { return false }
            left[app] = room - 1
            return true
        }
    }
}

/// The outbox: every statement that writes the `deliveries` table or the Zendesk unregister queue.
///
/// Deliveries are queued by intake (``enqueue(_:reservation:)``: one per device of a webhook) and
/// by reads (``markRead(app:owner:ticket:upTo:readOn:)``: a badge sync per other device), claimed by the
/// dispatchers (``claim(apps:limits:owner:lease:)``) and given their outcome (``store(_:owner:)``),
/// which also invalidates dead tokens' devices and queues them for Zendesk. The Zendesk forwarder
/// takes and settles that queue here too, and retention deletes old finished rows here (``prune(after:limit:deliveredDays:failedDays:)``). Errors are the database's (``PostgresError``); what
/// they mean to an HTTP caller is decided by the caller.
struct DeliveryQueue: Sendable {
    /// The channel the dispatchers listen on; notified when a delivery is stored unclaimed.
    static let channel = "push_relay_deliveries"

    let client: PostgresClient

    // MARK: - Queueing

    /// One statement: the notifications, implicit registration of unknown devices, one delivery per
    /// device that is not marked invalid, and one more unread reply for each distinct owner of those
    /// devices on the ticket (the owner is the device's user, or the token when no user is linked).
    /// Deliveries the `reservation` covers are stored already claimed for its owner.
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
    func enqueue(_ items: [IntakeItem], reservation: DeliveryReservation?) async throws -> (receipts: [IntakeReceipt], claimed: [ClaimedDelivery]) {
        var apps: [String] = []
        var tickets: [String] = []
        var titles: [String] = []
        var bodies: [String] = []
        var requestIDs: [String?] = []
        var ordinals: [Int] = []
        var deviceApps: [String] = []
        var tokens: [String] = []
        var platforms: [String] = []
        for (index, item) in items.enumerated() {
            apps.append(item.appID)
            tickets.append(item.notification.ticketID)
            titles.append(item.notification.title)
            bodies.append(item.notification.body)
            requestIDs.append(item.requestID)
            for device in item.notification.devices {
                ordinals.append(index + 1)
                deviceApps.append(item.appID)
                tokens.append(device.token)
                platforms.append(device.platform.rawValue)
            }
        }
        let claims = reservation?.claims(apps: deviceApps) ?? Array(repeating: false, count: tokens.count)
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
                SELECT app_id, owner, ticket_id, count(DISTINCT notification_id)::int AS added,
                       array_agg(DISTINCT notification_id ORDER BY notification_id) AS ids
                FROM live GROUP BY app_id, owner, ticket_id
            ),
            counted AS (
                INSERT INTO unread_counters AS u (app_id, owner, ticket_id, unread, notification_ids)
                SELECT app_id, owner, ticket_id, added, ids FROM increments ORDER BY app_id, owner, ticket_id
                ON CONFLICT (app_id, owner, ticket_id) DO UPDATE
                SET unread = u.unread + excluded.unread, notification_ids = u.notification_ids || excluded.notification_ids, updated_at = now()
            ),
            totals AS MATERIALIZED (
                SELECT o.app_id, o.owner,
                       o.added + coalesce((SELECT sum(u.unread) FROM unread_counters u WHERE u.app_id = o.app_id AND u.owner = o.owner), 0)::int
                           AS badge
                FROM (SELECT app_id, owner, sum(added)::int AS added FROM increments GROUP BY app_id, owner) o
            ),
            queued AS (
                INSERT INTO deliveries (notification_id, app_id, device_token, platform, status, attempts, lease_owner, lease_expires_at, next_attempt_at)
                SELECT notification_id, app_id, token, platform,
                       CASE WHEN claim THEN 'sending' ELSE 'pending' END, CASE WHEN claim THEN 1 ELSE 0 END,
                       CASE WHEN claim THEN $10 END, CASE WHEN claim THEN now() + make_interval(secs => $11) END,
                       CASE WHEN claim THEN now() + make_interval(secs => $11) ELSE now() END
                FROM live
                RETURNING id, notification_id, app_id, device_token, platform, kind, attempts, created_at, status
            ),
            notified AS (
                SELECT pg_notify('\(UnreadChannel.name)', string_agg(line, E'\\n'))
                FROM (
                    SELECT line, sum(octet_length(line) + 1) OVER (ORDER BY line) / \(UnreadChannel.chunkBytes) AS chunk
                    FROM (SELECT DISTINCT app_id || ' ' || owner AS line FROM increments) changed
                ) numbered
                GROUP BY chunk
            ),
            woken AS (
                SELECT pg_notify('\(Self.channel)', '') FROM (SELECT 1 FROM live WHERE NOT claim LIMIT 1) unclaimed
            )
            SELECT n.ord, n.id, c.id IS NOT NULL, coalesce(c.status = 'sending', false), \(ClaimedDelivery.columns),
                   (SELECT count(*) FROM notified) + (SELECT count(*) FROM woken)
            FROM input n
            LEFT JOIN queued c ON c.notification_id = n.id
            LEFT JOIN live l ON l.notification_id = c.notification_id AND l.token = c.device_token
            LEFT JOIN LATERAL (SELECT l.environment, 'active'::text AS status) dv ON true
            LEFT JOIN totals t ON t.app_id = l.app_id AND t.owner = l.owner
            ORDER BY n.ord
            """,
            [
                apps, tickets, titles, bodies, requestIDs, ordinals, tokens, platforms, claims, reservation?.owner ?? "",
                (reservation?.lease ?? .seconds(60)).timeInterval,
            ],
            prepare: true,
            planning: .cached
        )
        var queued = Array(repeating: 0, count: items.count)
        var ids = Array(repeating: Int64(0), count: items.count)
        var claimed: [ClaimedDelivery] = []
        for row in result.rows {
            let (ord, id, isQueued, isClaimed) = try row.decode((Int, Int64, Bool, Bool).self)
            guard ord >= 1, ord <= items.count else { continue }
            ids[ord - 1] = id
            guard isQueued else { continue }
            queued[ord - 1] += 1
            if isClaimed { claimed.append(try ClaimedDelivery(row: row, at: 4, claimedAt: claimedAt)) }
        }
        guard !ids.contains(0) else {
            throw PostgresError(code: .decoding, message: "intake returned no row for some of \(items.count) webhooks")
        }
        let receipts = items.indices.map { index in
            IntakeReceipt(notificationID: ids[index], deliveries: queued[index], skipped: items[index].notification.devices.count - queued[index])
        }
        return (receipts, claimed)
    }

    /// Clears one ticket (or every ticket when `ticket` is nil) of an owner's unread counts, in one
    /// statement: every notification counted, or with `upTo`, those with an id up to it (and any
    /// counted before ids were kept), so a reply stored after what the reader saw stays counted.
    /// When a count went down, every other active device of the owner gets a `badge_sync` delivery
    /// (its badge is read when it is sent, so it is current), and listeners are notified.
    /// - Returns: the owner's new total and how many devices will be synced.
    func markRead(app: String, owner: String, ticket: String?, upTo: Int64? = nil, readOn device: String?) async throws -> (total: Int, synced: Int) {
        let row = try await client.query(
            """
            WITH before AS MATERIALIZED (
                SELECT ticket_id, unread,
                       CASE WHEN $5::bigint IS NULL THEN '{}'::bigint[]
                            ELSE ARRAY(SELECT id FROM unnest(notification_ids) AS n(id) WHERE id > $5) END AS kept
                FROM unread_counters
                WHERE app_id = $1 AND owner = $2 AND ($3::text IS NULL OR ticket_id = $3) AND unread > 0
                FOR UPDATE
            ),
            emptied AS (
                DELETE FROM unread_counters u USING before b
                WHERE u.app_id = $1 AND u.owner = $2 AND u.ticket_id = b.ticket_id AND cardinality(b.kept) = 0
                RETURNING b.unread AS removed
            ),
            reduced AS (
                UPDATE unread_counters u SET notification_ids = b.kept, unread = cardinality(b.kept), updated_at = now()
                FROM before b
                WHERE u.app_id = $1 AND u.owner = $2 AND u.ticket_id = b.ticket_id
                  AND cardinality(b.kept) > 0 AND cardinality(b.kept) < b.unread
                RETURNING b.unread - cardinality(b.kept) AS removed
            ),
            cleared AS (
                SELECT removed FROM emptied UNION ALL SELECT removed FROM reduced
            ),
            remaining AS (
                SELECT (coalesce((SELECT sum(unread) FROM unread_counters WHERE app_id = $1 AND owner = $2), 0)
                        - coalesce((SELECT sum(removed) FROM cleared), 0))::int AS total
            ),
            synced AS (\(Self.queueBadgeSyncs(from: """
                devices
                WHERE app_id = $1 AND status = 'active' AND (user_id = $2 OR (user_id IS NULL AND token = $2))
                  AND token IS DISTINCT FROM $4 AND EXISTS (SELECT 1 FROM cleared)
                ORDER BY token
                """))),
            notified AS (
                SELECT pg_notify('\(UnreadChannel.name)', $1 || ' ' || $2), pg_notify('\(Self.channel)', '')
                WHERE EXISTS (SELECT 1 FROM cleared)
            )
            SELECT (SELECT total FROM remaining), (SELECT count(*) FROM synced)::int, (SELECT count(*) FROM notified)::int
            """,
            [app, owner, ticket, device, upTo],
            prepare: true
        ).first
        guard let row else { return (0, 0) }
        let (total, synced, _) = try row.decode((Int, Int, Int).self)
        return (total, synced)
    }

    /// The statement (for a CTE) that queues a badge sync for each row of `source`, a relation
    /// with `app_id`, `token` and `platform` (and any `WHERE` / `ORDER BY` after it); it returns
    /// the new deliveries' ids. A badge sync carries no text: its badge is the device owner's total
    /// when it is claimed, so it is current when sent. Reads (``markRead(app:owner:ticket:upTo:readOn:)``)
    /// and a device moving to another owner (``queueBadgeSyncs(app:devices:in:)``) queue through it.
    private static func queueBadgeSyncs(from source: String) -> String {
        """
        INSERT INTO deliveries (app_id, device_token, platform, kind)
        SELECT app_id, token, platform, '\(DeliveryKind.badgeSync.rawValue)' FROM \(source)
        RETURNING id
        """
    }

    /// Queues one badge sync for each of the app's `devices` inside the caller's transaction
    /// (`session`), and wakes the dispatchers when it commits. The device registry calls it when a
    /// device moves to another owner, so the device stops showing the previous owner's badge.
    func queueBadgeSyncs(app: String, devices: [(token: String, platform: Platform)], in session: PostgresSession) async throws {
        guard !devices.isEmpty else { return }
        try await session.query(
            """
            WITH moved AS (
                SELECT $1::text AS app_id, token, platform FROM unnest($2::text[], $3::text[]) AS m(token, platform)
            ),
            synced AS (\(Self.queueBadgeSyncs(from: "moved")))
            SELECT (SELECT count(*) FROM synced), pg_notify('\(Self.channel)', '')
            """,
            [app, devices.map(\.token), devices.map(\.platform.rawValue)]
        )
    }

    // MARK: - Delivering

    /// A select-list item that sets `synchronous_commit` off until the end of the statement's
    /// transaction. A statement that returns no row does not evaluate it, and writes nothing either.
    ///
    /// The dispatcher's bookkeeping (claims, outcomes) commits this way: it does not wait for its
    /// WAL flush, so it does not queue in front of webhook commits, which do wait. Losing the last
    /// of these commits in a crash loses nothing a webhook was acknowledged for: a lost claim leaves
    /// the row due, a lost outcome leaves it leased until the lease ends; either way the push is
    /// sent again (at least once, and the collapse id folds the duplicate on the device). Set from
    /// the statement's own select list (`set_config(…, is_local => true)` lasts until the
    /// statement's commit), it costs one round trip instead of four (BEGIN, SET LOCAL, the
    /// statement, COMMIT).
    static let relaxedCommit = "set_config('synchronous_commit', 'off', true)"

    /// Claims up to `limits[i]` due deliveries of `apps[i]` for `owner`, oldest due first: each is
    /// marked `sending`, its attempt counted, and leased until `lease` from now (`next_attempt_at`
    /// too, so a crashed owner's claims come due again).
    func claim(apps: [String], limits: [Int], owner: String, lease: Duration) async throws -> [ClaimedDelivery] {
        let claimedAt = ContinuousClock.now
        let result = try await client.query(
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
            SELECT \(ClaimedDelivery.columns), \(Self.relaxedCommit)
            FROM claimed c
            LEFT JOIN notifications n ON n.id = c.notification_id
            LEFT JOIN devices dv ON dv.app_id = c.app_id AND dv.token = c.device_token
            LEFT JOIN LATERAL (
                SELECT sum(u.unread)::int AS badge FROM unread_counters u WHERE u.app_id = c.app_id AND u.owner = coalesce(dv.user_id, c.device_token)
            ) b ON true
            """,
            [apps, limits, owner, lease.timeInterval],
            prepare: true
        )
        return try result.rows.map { try ClaimedDelivery(row: $0, claimedAt: claimedAt) }
    }

    /// One transaction: the deliveries' new state, dead tokens' devices marked invalid and queued
    /// for Zendesk, environments learned for devices registered without one, and the feedback
    /// events (``DeliveryEventType``) of the apps that want them (`events[app]`). Rows whose lease
    /// another instance has taken over are left to it, and make no event.
    func store(_ batch: [DeliveryResult], owner: String, events: [String: Set<DeliveryEventType>] = [:]) async throws {
        var ids: [Int64] = []
        var statuses: [String] = []
        var next: [Date?] = []
        var providerIDs: [String?] = []
        var reasons: [String?] = []
        var adjustments: [Int] = []
        var deadApps: [String] = []
        var deadTokens: [String] = []
        var deadPlatforms: [String] = []
        var deadReasons: [String] = []
        var deadSince: [Date?] = []
        var learnedApps: [String] = []
        var learnedTokens: [String] = []
        var learnedEnvironments: [String] = []
        var eventRows = EventRows()
        for result in batch {
            if let type = DeliveryEventType(result), events[result.delivery.appID]?.contains(type) == true {
                eventRows.append(result, type: type)
            }
            ids.append(result.delivery.id)
            statuses.append(result.status.rawValue)
            next.append(result.nextAttemptAt)
            providerIDs.append(result.providerID)
            reasons.append(result.reason)
            adjustments.append(result.countsAttempt ? 0 : -1)
            if result.isDeadToken {
                deadApps.append(result.delivery.appID)
                deadTokens.append(result.delivery.token)
                deadPlatforms.append(result.delivery.platform.rawValue)
                deadReasons.append(result.reason ?? "dead token")
                deadSince.append(result.deadSince)
            }
            if let environment = result.learnedEnvironment {
                learnedApps.append(result.delivery.appID)
                learnedTokens.append(result.delivery.token)
                learnedEnvironments.append(environment)
            }
        }
        let outcomes: [any PostgresEncodable] = [ids, statuses, next, providerIDs, reasons, adjustments, owner]
        guard !deadApps.isEmpty || !learnedApps.isEmpty else {
            // Most batches: only the deliveries' new state (and their events), with one generic
            // plan per connection (see updateOutcomes): planning took 0.13 ms per batch, and a
            // connection that also runs the intake statement no longer switches plan_cache_mode.
            if eventRows.isEmpty {
                _ = try await client.query(Self.storeOutcomes, outcomes, prepare: true, planning: .cached)
            } else {
                _ = try await client.query(Self.storeOutcomesAndEvents, outcomes + eventRows.parameters, prepare: true, planning: .cached)
            }
            return
        }
        // One statement: the deliveries' new state; the devices of dead tokens marked invalid and
        // queued for Zendesk; the APNs environment of devices that had none, where one was learned.
        _ = try await client.query(
            """
            WITH updated AS (\(Self.updateOutcomes)),
            \(Self.insertEvents(from: 16)),
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
            queued AS (\(Self.queueForZendesk(app: "app_id", token: "token", platform: "platform", reason: "reason", job: "NULL::uuid", from: "dead"))),
            learned AS (
                -- Devices registered without an environment, now known (APNs accepted them there).
                UPDATE devices dv SET environment = l.environment
                FROM unnest($13::text[], $14::text[], $15::text[]) AS l(app_id, token, environment)
                WHERE dv.app_id = l.app_id AND dv.token = l.token AND dv.environment IS NULL
            )
            SELECT (SELECT count(*) FROM updated), \(Self.relaxedCommit)
            """,
            outcomes + [deadApps, deadTokens, deadPlatforms, deadReasons, deadSince, learnedApps, learnedTokens, learnedEnvironments]
                + eventRows.parameters,
            prepare: true
        )
    }

    /// The deliveries' new state, parameters $1–$7; rows whose lease another instance has taken
    /// over are left to it.
    ///
    /// Written so that one generic plan serves every table size (``storeOutcomes`` keeps one per
    /// connection): each row is found through the primary key (a `LATERAL … LIMIT 1` lookup) and
    /// updated by its `ctid`. A plain `d.id = u.id` join, planned while a fresh database's table is
    /// small, is a sequential scan of `deliveries`, which a cached plan would keep as the table
    /// grows. A row another transaction updated since the lookup (another instance's claim after
    /// the lease ran out) no longer has that `ctid` in its newest version, so it is left alone, as
    /// the `lease_owner` condition leaves it.
    static let updateOutcomes = """
        UPDATE deliveries d
        SET status = u.status, next_attempt_at = coalesce(u.next_at, d.next_attempt_at), provider_id = u.provider_id,
            last_error = u.error, attempts = d.attempts + u.adjustment, lease_owner = NULL, lease_expires_at = NULL,
            delivered_at = CASE WHEN u.status = 'delivered' THEN now() END, updated_at = now()
        FROM (
            SELECT u.*, found.ctid AS target
            FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::int[])
                AS u(id, status, next_at, provider_id, error, adjustment)
            CROSS JOIN LATERAL (SELECT x.ctid FROM deliveries x WHERE x.id = u.id LIMIT 1) found
        ) u
        WHERE d.ctid = u.target AND d.lease_owner = $7
        RETURNING d.id, d.notification_id
        """

    /// ``updateOutcomes`` alone, with the relaxed commit.
    static let storeOutcomes = "WITH updated AS (\(updateOutcomes)) SELECT (SELECT count(*) FROM updated), \(relaxedCommit)"

    /// ``updateOutcomes`` and the events of the rows it updated (``EventRows``, parameters $8–$14).
    static let storeOutcomesAndEvents =
        "WITH updated AS (\(updateOutcomes)), \(insertEvents(from: 8)) SELECT (SELECT count(*) FROM updated), \(relaxedCommit)"

    /// The CTE `events`, after a CTE `updated` (``updateOutcomes``): inserts the events of
    /// ``EventRows`` (parameters `$first`…`$first+6`) whose delivery was updated, in order.
    static func insertEvents(from first: Int) -> String {
        let p = (first..<first + 7).map { "$\($0)" }
        return """
            events AS (
                INSERT INTO delivery_events (app_id, type, delivery_id, notification_id, ticket_id, platform, token_hint, reason)
                SELECT e.app_id, e.type, e.delivery_id, u.notification_id, nullif(e.ticket_id, ''), e.platform, e.token_hint, e.reason
                FROM unnest(\(p[0])::bigint[], \(p[1])::text[], \(p[2])::text[], \(p[3])::text[], \(p[4])::text[], \(p[5])::text[], \(p[6])::text[])
                    WITH ORDINALITY AS e(delivery_id, app_id, type, ticket_id, platform, token_hint, reason, ord)
                JOIN updated u ON u.id = e.delivery_id
                ORDER BY e.ord
            )
            """
    }

    /// The events a batch of outcomes writes, as statement parameters.
    struct EventRows {
        private var deliveries: [Int64] = [], apps: [String] = [], types: [String] = [], tickets: [String] = []
        private var platforms: [String] = [], hints: [String] = [], reasons: [String?] = []

        var isEmpty: Bool { deliveries.isEmpty }

        mutating func append(_ result: DeliveryResult, type: DeliveryEventType) {
            deliveries.append(result.delivery.id)
            apps.append(result.delivery.appID)
            types.append(type.rawValue)
            tickets.append(result.delivery.ticketID)
            platforms.append(result.delivery.platform.rawValue)
            hints.append(Redaction.token(result.delivery.token))
            reasons.append(result.reason)
        }

        var parameters: [any PostgresEncodable] { [deliveries, apps, types, tickets, platforms, hints, reasons] }
    }

    // MARK: - Retention

    /// Deletes, among the `limit` deliveries after id `cursor`, those finished long enough ago
    /// (``RetentionService``): `delivered` and `skipped` rows last changed more than `deliveredDays`
    /// ago, `failed`, `expired` and `dead_token` rows more than `failedDays` ago.
    /// - Returns: the batch's last id (`nil` when there was none), how many were deleted, and
    ///   whether the walk reached deliveries created after the shorter of the two cut-offs (then
    ///   no later row can be old enough).
    func prune(after cursor: Int64, limit: Int, deliveredDays: Int, failedDays: Int) async throws -> (last: Int64?, deleted: Int, done: Bool) {
        let row = try await client.query(
            """
            WITH batch AS MATERIALIZED (
                SELECT id, status, updated_at, created_at FROM deliveries WHERE id > $1 ORDER BY id LIMIT $2
            ),
            doomed AS (
                DELETE FROM deliveries d USING batch b
                WHERE d.id = b.id
                  AND ((b.status IN ('delivered', 'skipped') AND b.updated_at < now() - make_interval(days => $3))
                    OR (b.status IN ('failed', 'expired', 'dead_token') AND b.updated_at < now() - make_interval(days => $4)))
                RETURNING 1
            )
            SELECT (SELECT max(id) FROM batch), (SELECT count(*) FROM doomed)::int,
                   coalesce((SELECT max(created_at) FROM batch) >= now() - make_interval(days => least($3, $4)), true)
            """,
            [cursor, limit, deliveredDays, failedDays],
            prepare: true
        ).first
        guard let row else { return (nil, 0, true) }
        let (last, deleted, done) = try row.decode((Int64?, Int, Bool).self)
        return (last, deleted, done || last == nil)
    }

    // MARK: - The Zendesk unregister queue

    /// The statement (for a CTE) that queues tokens for Zendesk's bulk unregister, once per app and
    /// token: each argument is an SQL expression over the rows of `from`. Dead tokens (``store(_:owner:)``)
    /// and bulk-unregister jobs (``JobStore``) queue through it.
    ///
    /// A token still waiting is left as it is; a token already forwarded is queued again (its row
    /// reset): it was registered again since and has died again, and Zendesk holds it again. The
    /// rows of `from` are made distinct per app and token first, because an upsert may not touch
    /// one row twice in a statement (two dead deliveries of one device in one outcome batch).
    private static func queueForZendesk(app: String, token: String, platform: String, reason: String, job: String, from source: String) -> String {
        """
        INSERT INTO zendesk_unregister_queue (app_id, token, platform, reason, job_id)
        SELECT DISTINCT ON (\(app), \(token)) \(app), \(token), \(platform), \(reason), \(job) FROM \(source)
        ON CONFLICT (app_id, token) DO UPDATE
            SET platform = EXCLUDED.platform, reason = EXCLUDED.reason, job_id = EXCLUDED.job_id, attempts = 0,
                next_attempt_at = now(), last_error = NULL, queued_at = now(), forwarded_at = NULL
            WHERE zendesk_unregister_queue.forwarded_at IS NOT NULL
        """
    }

    /// Queues the app's `tokens` (with their `platforms`, in the same order) for Zendesk's bulk
    /// unregister inside the caller's transaction (`session`), recording `reason` and the bulk
    /// unregister `job` that removed them. Bulk-unregister jobs (``JobStore``) queue through it.
    func queueForZendesk(
        app: String,
        tokens: [String],
        platforms: [String],
        reason: String,
        job: UUID,
        in session: PostgresSession
    ) async throws {
        guard !tokens.isEmpty else { return }
        try await session.query(
            """
            WITH removed AS (SELECT token, platform FROM unnest($2::text[], $3::text[]) AS r(token, platform))
            \(Self.queueForZendesk(app: "$1::text", token: "token", platform: "platform", reason: "$4::text", job: "$5::uuid", from: "removed"))
            """,
            [app, tokens, platforms, reason, job]
        )
    }

    /// Takes up to `limit` of the app's due tokens for one forwarding attempt: their attempt is
    /// counted and they are held for 60 seconds, so another instance does not send them meanwhile.
    func takeZendeskBatch(app: String, limit: Int) async throws -> [(token: String, attempts: Int)] {
        try await client.query(
            """
            UPDATE zendesk_unregister_queue q SET next_attempt_at = now() + interval '60 seconds', attempts = q.attempts + 1
            WHERE (q.app_id, q.token) IN (
                SELECT app_id, token FROM zendesk_unregister_queue
                WHERE app_id = $1 AND forwarded_at IS NULL AND next_attempt_at <= now()
                ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED
            )
            RETURNING q.token, q.attempts
            """,
            [app, limit]
        ).rows.map { try $0.decode((String, Int).self) }
    }

    /// Zendesk refused or did not answer: the tokens are due again after `delay` seconds.
    func zendeskBatchFailed(app: String, tokens: [String], retryIn delay: TimeInterval, reason: String) async throws {
        _ = try await client.query(
            "UPDATE zendesk_unregister_queue SET next_attempt_at = now() + make_interval(secs => $3), last_error = $4 WHERE app_id = $1 AND token = ANY($2)",
            [app, tokens, delay, reason]
        )
    }

    /// Deletes up to `limit` of the oldest rows forwarded more than `days` ago (retention; a token
    /// that dies again later is queued anew either way). Returns how many.
    func pruneForwardedZendesk(limit: Int, days: Int) async throws -> Int {
        try await client.query(
            """
            WITH doomed AS (
                DELETE FROM zendesk_unregister_queue WHERE (app_id, token) IN (
                    SELECT app_id, token FROM zendesk_unregister_queue
                    WHERE forwarded_at < now() - make_interval(days => $2) ORDER BY forwarded_at LIMIT $1
                )
                RETURNING 1
            )
            SELECT count(*)::int FROM doomed
            """,
            [limit, days],
            prepare: true
        ).first?.decode(Int.self) ?? 0
    }

    /// Zendesk accepted the tokens: they are not sent again unless the token dies again after a
    /// new registration (``queueForZendesk(app:token:platform:reason:job:from:)``).
    func zendeskBatchForwarded(app: String, tokens: [String]) async throws {
        _ = try await client.query(
            "UPDATE zendesk_unregister_queue SET forwarded_at = now(), last_error = NULL WHERE app_id = $1 AND token = ANY($2)",
            [app, tokens]
        )
    }
}
