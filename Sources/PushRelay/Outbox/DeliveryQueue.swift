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
/// takes and settles that queue here too, and retention deletes old finished rows here (``prune(after:limit:deliveredDays:failedDays:)``). Errors
/// are the database's (``PostgresError``); what
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
        var titles: [String?] = []
        var bodies: [String?] = []
        var contents: [String] = []
        var requestIDs: [String?] = []
        var ordinals: [Int] = []
        var deviceApps: [String] = []
        var tokens: [String] = []
        var platforms: [String] = []
        for (index, item) in items.enumerated() {
            apps.append(item.appID)
            tickets.append(item.notification.ticketID)
            // A generic app's reply text is not stored at all.
            let keepsText = item.content != .generic
            titles.append(keepsText ? item.notification.title : nil)
            bodies.append(keepsText ? item.notification.body : nil)
            contents.append(item.content.rawValue)
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
            Self.intake,
            [
                apps, tickets, titles, bodies, requestIDs, ordinals, tokens, platforms, claims, reservation?.owner ?? "",
                (reservation?.lease ?? .seconds(60)).timeInterval, contents,
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
        // An encrypted notification with no delivery (every device invalid) has nothing to wait
        // for. Best effort: the webhook is committed, and retention erases what this misses.
        let unsent = items.indices.filter { items[$0].content == .encrypted && queued[$0] == 0 }.map { ids[$0] }
        if !unsent.isEmpty { try? await eraseText(of: unsent) }
        return (receipts, claimed)
    }

    /// The intake statement of ``enqueue(_:reservation:)``: parameters $1–$5 the webhooks (app,
    /// ticket, title, body, request id), $6–$9 their devices (the webhook's ordinal, token,
    /// platform, whether it is stored claimed), $10 and $11 the claim's owner and lease in seconds,
    /// $12 each webhook's content mode (``PushSettings/Content``; title and body are null for `generic`).
    static let intake = """
        WITH input AS MATERIALIZED (
            SELECT nextval('notifications_id_seq'::regclass) AS id, t.*
            FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $12::text[]) WITH ORDINALITY
                AS t(app_id, ticket_id, title, body, request_id, content, ord)
        ),
        inserted AS (
            INSERT INTO notifications (id, app_id, ticket_id, title, body, request_id, content) OVERRIDING SYSTEM VALUE
            SELECT id, app_id, ticket_id, title, body, request_id, content FROM input
        ),
        targets AS MATERIALIZED (
            SELECT i.id AS notification_id, i.ord, i.app_id, i.ticket_id, d.token, d.platform, d.claim,
                   dv.status AS device_status, coalesce(dv.user_id, d.token) AS owner, dv.environment,
                   dv.push_key_id, dv.push_key, dv.push_key_sealed_by
            FROM unnest($6::bigint[], $7::text[], $8::text[], $9::bool[]) AS d(ord, token, platform, claim)
            JOIN input i ON i.ord = d.ord
            LEFT JOIN LATERAL (
                SELECT status, user_id, environment, push_key_id, push_key, push_key_sealed_by
                FROM devices WHERE app_id = i.app_id AND token = d.token LIMIT 1
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
            INSERT INTO unread_counters AS u (app_id, owner, ticket_id, unread, notification_ids, dropped_up_to)
            SELECT app_id, owner, ticket_id, added, ids[greatest(1, cardinality(ids) - \(Self.keptUnreadIDs - 1)):],
                   CASE WHEN cardinality(ids) > \(Self.keptUnreadIDs) THEN ids[cardinality(ids) - \(Self.keptUnreadIDs)] END
            FROM increments ORDER BY app_id, owner, ticket_id
            ON CONFLICT (app_id, owner, ticket_id) DO UPDATE
            SET unread = u.unread + excluded.unread,
                notification_ids = (u.notification_ids || excluded.notification_ids)[
                    greatest(1, cardinality(u.notification_ids) + cardinality(excluded.notification_ids) - \(Self.keptUnreadIDs - 1)):],
                dropped_up_to = greatest(u.dropped_up_to, excluded.dropped_up_to, (
                    SELECT max(id) FROM unnest((u.notification_ids || excluded.notification_ids)[
                        :cardinality(u.notification_ids) + cardinality(excluded.notification_ids) - \(Self.keptUnreadIDs)]) AS dropped(id))),
                updated_at = now()
        ),
        totals AS MATERIALIZED (
            SELECT o.app_id, o.owner,
                   o.added + coalesce((SELECT sum(u.unread) FROM unread_counters u WHERE u.app_id = o.app_id AND u.owner = o.owner), 0)::int
                       AS badge
            FROM (SELECT app_id, owner, sum(added)::int AS added FROM increments GROUP BY app_id, owner) o
        ),
        queued AS (
            INSERT INTO deliveries
                (notification_id, app_id, device_token, platform, due, status, attempts, lease_owner, lease_expires_at, next_attempt_at)
            SELECT notification_id, app_id, token, platform, NOT claim,
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
        LEFT JOIN LATERAL (
            SELECT l.environment, 'active'::text AS status, l.push_key_id, l.push_key, l.push_key_sealed_by
        ) dv ON true
        LEFT JOIN totals t ON t.app_id = l.app_id AND t.owner = l.owner
        ORDER BY n.ord
        """

    /// How many notification ids an unread count keeps (its newest): a webhook rewrites the row,
    /// which stays this small however many replies are unread (migration 0016).
    static let keptUnreadIDs = 32

    /// Clears one ticket (or every ticket when `ticket` is nil) of an owner's unread counts, in one
    /// statement: every notification counted, or with `upTo`, those with an id up to it, so a reply
    /// stored after what the reader saw stays counted. Of those counted past the newest
    /// ``keptUnreadIDs`` (without their ids), a read up to an id clears them when none is newer
    /// than it (`dropped_up_to`), and keeps them otherwise; those counted before ids were kept
    /// (0006) are older than any id.
    /// When a count went down, every other active device of the owner gets a `badge_sync` delivery
    /// (its badge is read when it is sent, so it is current), and listeners are notified.
    /// - Returns: the owner's new total and how many devices will be synced.
    func markRead(app: String, owner: String, ticket: String?, upTo: Int64? = nil, readOn device: String?) async throws -> (total: Int, synced: Int) {
        let row = try await client.query(
            """
            WITH locked AS MATERIALIZED (
                SELECT ticket_id, unread, notification_ids, dropped_up_to
                FROM unread_counters
                WHERE app_id = $1 AND owner = $2 AND ($3::text IS NULL OR ticket_id = $3) AND unread > 0
                FOR UPDATE
            ),
            before AS MATERIALIZED (
                SELECT ticket_id, unread, kept, cardinality(kept) + unidentified AS left_unread,
                       CASE WHEN unidentified > 0 THEN dropped_up_to END AS dropped_up_to
                FROM (
                    SELECT ticket_id, unread, dropped_up_to,
                           CASE WHEN $5::bigint IS NULL THEN '{}'::bigint[]
                                ELSE ARRAY(SELECT id FROM unnest(notification_ids) AS n(id) WHERE id > $5) END AS kept,
                           -- Counted without an id: kept only when some may be newer than the reader saw.
                           CASE WHEN $5::bigint IS NOT NULL AND dropped_up_to > $5 THEN unread - cardinality(notification_ids) ELSE 0 END
                               AS unidentified
                    FROM locked
                ) counts
            ),
            emptied AS (
                DELETE FROM unread_counters u USING before b
                WHERE u.app_id = $1 AND u.owner = $2 AND u.ticket_id = b.ticket_id AND b.left_unread = 0
                RETURNING b.unread AS removed
            ),
            reduced AS (
                UPDATE unread_counters u SET notification_ids = b.kept, unread = b.left_unread, dropped_up_to = b.dropped_up_to, updated_at = now()
                FROM before b
                WHERE u.app_id = $1 AND u.owner = $2 AND u.ticket_id = b.ticket_id
                  AND b.left_unread > 0 AND b.left_unread < b.unread
                RETURNING b.unread - b.left_unread AS removed
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
        INSERT INTO deliveries (app_id, device_token, platform, kind, due)
        SELECT app_id, token, platform, '\(DeliveryKind.badgeSync.rawValue)', true FROM \(source)
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
}
