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

/// The outbox: the statements that queue, claim and settle deliveries.
///
/// Deliveries are queued by intake (``enqueue(_:reservation:)``: one per device of a webhook) and
/// by reads (``ReadSync``: a badge sync per other device), claimed by the dispatchers
/// (``claim(apps:limits:owner:lease:)``) and given their outcome (``store(_:owner:events:)``),
/// which also invalidates dead tokens' devices and queues them for Zendesk (``ZendeskQueue``).
/// Retention deletes old finished rows (``RetentionStore``, ``HistoryPartitions``).
/// Errors are the database's (``PostgresError``); what they mean to an HTTP caller is decided by
/// the caller.
struct DeliveryQueue: Sendable {
    /// The channel the dispatchers listen on; notified when a delivery is stored unclaimed.
    static let channel = "push_relay_deliveries"

    let client: PostgresClient
    /// Which partition holds a delivery, for the outcome statement.
    let partitions = DeliveryPartitions()

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
    func enqueue(
        _ items: [IntakeItem],
        reservation: DeliveryReservation?
    ) async throws -> (receipts: [IntakeReceipt], claimed: [ClaimedDelivery]) {
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
                apps, tickets, titles, bodies, requestIDs, ordinals, tokens, platforms, claims,
                reservation?.owner ?? "",
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
            IntakeReceipt(
                notificationID: ids[index],
                deliveries: queued[index],
                skipped: items[index].notification.devices.count - queued[index]
            )
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
    /// Each notification row is written with the id range of its deliveries (migration 0020,
    /// ``DeliveryPartitions/ofNotification(_:_:)``), so after them.
    static let intake = """
        WITH input AS MATERIALIZED (
            SELECT nextval('notifications_id_seq'::regclass) AS id, t.*
            FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $12::text[]) WITH ORDINALITY
                AS t(app_id, ticket_id, title, body, request_id, content, ord)
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
        inserted AS (
            INSERT INTO notifications (id, app_id, ticket_id, title, body, request_id, content, first_delivery_id, last_delivery_id)
            SELECT i.id, i.app_id, i.ticket_id, i.title, i.body, i.request_id, i.content, coalesce(r.first, 0), coalesce(r.last, 0)
            FROM input i
            LEFT JOIN (SELECT notification_id, min(id) AS first, max(id) AS last FROM queued GROUP BY notification_id) r
                ON r.notification_id = i.id
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
}
