import Foundation
import Postgres

/// Delivering: claims under a lease, and the outcomes of sends written back in one statement.
extension DeliveryQueue {
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
    /// too, so a crashed owner's claims come due again: they stay `due`).
    func claim(apps: [String], limits: [Int], owner: String, lease: Duration) async throws -> [ClaimedDelivery] {
        let claimedAt = ContinuousClock.now
        let parameters: [any PostgresEncodable] = [apps, limits, owner, lease.timeInterval]
        let rows = try await client.query(Self.claimStatement, parameters, prepare: true, planning: .cached).rows
        return try rows.map { try ClaimedDelivery(row: $0, claimedAt: claimedAt) }
    }

    /// The claim of ``claim(apps:limits:owner:lease:)``: parameters $1 and $2 the apps and how many
    /// of each, $3 the owner, $4 the lease in seconds.
    ///
    /// Notifications and devices are found by primary key (`LATERAL … LIMIT 1`): joined, they were
    /// planned from the claimed rows' estimate, which the partitions multiply (with 18, a claim of 100
    /// read all 33,500 devices into a hash: 19 ms of 25). One generic plan per connection, as the
    /// sweep's (planned at each poll over 18 partitions, 2-12 ms); autovacuum analyses a partition
    /// each time it grows by a tenth, which makes the plan again for the size it has then.
    static let claimStatement = """
        WITH wanted AS (
            SELECT * FROM unnest($1::text[], $2::int[]) AS w(app_id, wanted)
        ),
        picked AS (
            SELECT p.id FROM wanted w CROSS JOIN LATERAL (
                SELECT d.id FROM deliveries d
                WHERE d.app_id = w.app_id AND d.due AND d.next_attempt_at <= now() AND d.status IN ('pending', 'sending')
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
        LEFT JOIN LATERAL (SELECT ticket_id, title, body, content FROM notifications WHERE id = c.notification_id LIMIT 1) n ON true
        LEFT JOIN LATERAL (
            SELECT environment, status, user_id, push_key_id, push_key, push_key_sealed_by
            FROM devices WHERE app_id = c.app_id AND token = c.device_token LIMIT 1
        ) dv ON true
        LEFT JOIN LATERAL (
            SELECT sum(u.unread)::int AS badge FROM unread_counters u WHERE u.app_id = c.app_id AND u.owner = coalesce(dv.user_id, c.device_token)
        ) b ON true
        """

    /// One transaction: the deliveries' new state, dead tokens' devices marked invalid and queued
    /// for Zendesk, environments learned for devices registered without one, and the feedback
    /// events (``DeliveryEventType``) of the apps that want them (`events[app]`). Rows whose lease
    /// another instance has taken over are left to it, and make no event.
    func store(_ batch: [DeliveryResult], owner: String, events: [String: Set<DeliveryEventType>] = [:]) async throws {
        try await storeOutcomes(batch, owner: owner, events: events)
        // After the outcomes' commit, so the last instance to end a notification's deliveries sees
        // every other's outcome.
        let ended = batch.filter { $0.delivery.erasesText && $0.status != .pending && $0.status != .sending }
        if !ended.isEmpty { try await eraseText(of: Array(Set(ended.compactMap(\.delivery.notificationID)))) }
    }

    /// Erases the text of an `encrypted` app's notifications once none of their deliveries is
    /// pending or being sent; the delivery records stay.
    func eraseText(of notifications: [Int64]) async throws {
        _ = try await client.query(Self.eraseTextStatement, [notifications])
    }

    /// ``eraseText(of:)``'s statement: parameter $1 the notifications' ids. `OFFSET 0` keeps the
    /// `NOT EXISTS` a subplan run per notification, which reads the partitions of its deliveries'
    /// range only; as an anti join it would read every partition.
    static let eraseTextStatement = """
        UPDATE notifications n SET title = NULL, body = NULL
        WHERE n.id = ANY($1::bigint[]) AND n.content = 'encrypted' AND n.title IS NOT NULL
        AND NOT EXISTS (
            SELECT 1 FROM deliveries d WHERE \(DeliveryPartitions.ofNotification()) AND d.status IN ('pending', 'sending') OFFSET 0
        )
        """

    /// Stores `batch` with one statement per partition of `deliveries` its ids are in (one but at
    /// a partition's start), each naming that partition (``DeliveryPartitions``).
    private func storeOutcomes(
        _ batch: [DeliveryResult],
        owner: String,
        events: [String: Set<DeliveryEventType>]
    ) async throws {
        let tables = try await partitions.tables(for: batch.map(\.delivery.id), client: client)
        var groups: [String: [DeliveryResult]] = [:]
        for (result, table) in zip(batch, tables) { groups[table, default: []].append(result) }
        for (table, group) in groups.sorted(by: { $0.key < $1.key }) {
            do {
                try await storeOutcomes(group, in: table, owner: owner, events: events)
            } catch let error as PostgresError where error.sqlState == "42P01" && table != "deliveries" {
                // The partition was dropped since its range was read: the partitioned table finds
                // whatever is left.
                partitions.forget()
                try await storeOutcomes(group, in: "deliveries", owner: owner, events: events)
            }
        }
    }

    private func storeOutcomes(
        _ batch: [DeliveryResult],
        in table: String,
        owner: String,
        events: [String: Set<DeliveryEventType>]
    ) async throws {
        let columns = OutcomeColumns(batch, events: events)
        let outcomes = columns.outcomes(owner: owner)
        guard columns.changeDevices else {
            // Most batches: only the deliveries' new state (and their events), with one generic
            // plan per connection and partition (see updateOutcomes): planning took 0.13 ms per
            // batch, and a connection that also runs the intake statement no longer switches
            // plan_cache_mode.
            if columns.events.isEmpty {
                _ = try await client.query(Self.storeOutcomes(in: table), outcomes, prepare: true, planning: .cached)
            } else {
                _ = try await client.query(
                    Self.storeOutcomesAndEvents(in: table),
                    outcomes + columns.events.parameters,
                    prepare: true,
                    planning: .cached
                )
            }
            return
        }
        _ = try await client.query(
            Self.storeOutcomesAndDevices(in: table),
            outcomes + columns.devices + columns.events.parameters,
            prepare: true
        )
    }

    /// One statement: the deliveries' new state; the devices of dead tokens (parameters $8–$12)
    /// marked invalid and queued for Zendesk; the APNs environment of devices that had none, where
    /// one was learned ($13–$15); the events ($16–$22).
    static func storeOutcomesAndDevices(in table: String) -> String {
        """
        WITH updated AS (\(updateOutcomes(in: table))),
        \(insertEvents(from: 16)),
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
        queued AS (\(ZendeskQueue.deadTokensForZendesk)),
        learned AS (
            -- Devices registered without an environment, now known (APNs accepted them there).
            UPDATE devices dv SET environment = l.environment
            FROM unnest($13::text[], $14::text[], $15::text[]) AS l(app_id, token, environment)
            WHERE dv.app_id = l.app_id AND dv.token = l.token AND dv.environment IS NULL
        )
        SELECT (SELECT count(*) FROM updated), \(relaxedCommit)
        """
    }

    /// The deliveries' new state, parameters $1–$7; rows whose lease another instance has taken
    /// over are left to it.
    ///
    /// `table` is the partition of `deliveries` the rows are in (``DeliveryPartitions``), or
    /// `deliveries` itself, where a row is matched by its partition (`tableoid`) too: a `ctid`
    /// alone names a place in each partition.
    ///
    /// Written so that one generic plan serves every table size (``storeOutcomes(in:)`` keeps one
    /// per connection): each row is found through the primary key (a `LATERAL … LIMIT 1` lookup)
    /// and updated by its `ctid`. A plain `d.id = u.id` join, planned while a partition is small,
    /// is a sequential scan, which a cached plan would keep as the partition grows. A row another
    /// transaction updated since the lookup (another instance's claim after the lease ran out) no
    /// longer has that `ctid` in its newest version, so it is left alone, as the `lease_owner`
    /// condition leaves it.
    ///
    /// `due` follows the new status, so the outcome of a delivery stored claimed at intake (not due)
    /// that was sent changes no indexed column, and is a HOT update when its page has room
    /// (``sweep(upTo:limit:)``).
    static func updateOutcomes(in table: String) -> String {
        """
        UPDATE \(quoted(table)) d
        SET status = u.status, due = u.status IN ('pending', 'sending'), next_attempt_at = coalesce(u.next_at, d.next_attempt_at),
            provider_id = u.provider_id,
            last_error = u.error, attempts = d.attempts + u.adjustment, lease_owner = NULL, lease_expires_at = NULL,
            delivered_at = CASE WHEN u.status = 'delivered' THEN now() END, updated_at = now()
        FROM (
            SELECT u.*, found.tableoid AS partition, found.ctid AS target
            FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::int[])
                AS u(id, status, next_at, provider_id, error, adjustment)
            CROSS JOIN LATERAL (SELECT x.tableoid, x.ctid FROM \(quoted(table)) x WHERE x.id = u.id LIMIT 1) found
        ) u
        WHERE d.tableoid = u.partition AND d.ctid = u.target AND d.lease_owner = $7
        RETURNING d.id, d.notification_id
        """
    }

    /// ``updateOutcomes(in:)`` alone, with the relaxed commit.
    static func storeOutcomes(in table: String) -> String {
        "WITH updated AS (\(updateOutcomes(in: table))) SELECT (SELECT count(*) FROM updated), \(relaxedCommit)"
    }

    /// ``updateOutcomes(in:)`` and the events of the rows it updated (``EventRows``, parameters
    /// $8–$14).
    static func storeOutcomesAndEvents(in table: String) -> String {
        "WITH updated AS (\(updateOutcomes(in: table))), \(insertEvents(from: 8)) "
            + "SELECT (SELECT count(*) FROM updated), \(relaxedCommit)"
    }

    /// `name` as an SQL identifier.
    static func quoted(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }

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
}

/// A batch of outcomes as the columns of ``DeliveryQueue``'s outcome statements, in parameter order.
private struct OutcomeColumns {
    var ids: [Int64] = [], statuses: [String] = [], next: [Date?] = [], providerIDs: [String?] = []
    var reasons: [String?] = [], adjustments: [Int] = []
    var deadApps: [String] = [], deadTokens: [String] = [], deadPlatforms: [String] = [], deadReasons: [String] = []
    var deadSince: [Date?] = []
    var learnedApps: [String] = [], learnedTokens: [String] = [], learnedEnvironments: [String] = []
    var events = DeliveryQueue.EventRows()

    init(_ batch: [DeliveryResult], events wanted: [String: Set<DeliveryEventType>]) {
        for result in batch {
            if let type = DeliveryEventType(result), wanted[result.delivery.appID]?.contains(type) == true {
                events.append(result, type: type)
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
    }

    /// Whether a dead token or a learned environment changes a device: the batch then needs
    /// ``DeliveryQueue/storeOutcomesAndDevices``.
    var changeDevices: Bool { !deadApps.isEmpty || !learnedApps.isEmpty }

    /// Parameters $1–$7 (``DeliveryQueue/updateOutcomes``).
    func outcomes(owner: String) -> [any PostgresEncodable] {
        [ids, statuses, next, providerIDs, reasons, adjustments, owner]
    }

    /// Parameters $8–$15 (``DeliveryQueue/storeOutcomesAndDevices``).
    var devices: [any PostgresEncodable] {
        [deadApps, deadTokens, deadPlatforms, deadReasons, deadSince, learnedApps, learnedTokens, learnedEnvironments]
    }
}
