import Foundation
import Postgres

/// The operator API's reads (``OperatorController``): the cluster's activity per minute, queue and
/// backlog depths, provider token refreshes and credential rejections.
struct OperatorStore: Sendable {
    let client: PostgresClient

    /// One app's queue and backlogs, each counted up to the cap given.
    struct Depths: Sendable, Equatable {
        var pending = 0
        var sending = 0
        var retrying = 0
        var zendesk = 0
        var events = 0
    }

    /// Each app's activity per minute (seconds since 1970) from minute `first` on, summed over the
    /// instances.
    func activity(apps: [String], from first: Int64) async throws -> [String: [Int64: ActivityTally.Counts]] {
        var minutes: [String: [Int64: ActivityTally.Counts]] = [:]
        for row in try await client.query(
            """
            SELECT app_id, extract(epoch FROM minute)::bigint, webhooks, delivered, failed, expired, dead_token, skipped
            FROM activity_minutes WHERE app_id = ANY($1) AND minute >= to_timestamp($2)
            """,
            [apps, first]
        ).rows {
            let counts = ActivityTally.Counts(
                webhooks: try row.decode(Int64.self, at: 2),
                delivered: try row.decode(Int64.self, at: 3),
                failed: try row.decode(Int64.self, at: 4),
                expired: try row.decode(Int64.self, at: 5),
                deadToken: try row.decode(Int64.self, at: 6),
                skipped: try row.decode(Int64.self, at: 7)
            )
            minutes[try row.decode(String.self, at: 0), default: [:]][try row.decode(Int64.self, at: 1)] = counts
        }
        return minutes
    }

    /// Each app's deliveries waiting (first attempt), being sent and waiting to retry, and its
    /// Zendesk and event backlogs, each counted up to `cap` rows so a huge backlog costs a bounded read.
    ///
    /// Everything is read from the live queue, never a delivered row. Waiting and retrying are the
    /// due deliveries still pending, read through the due index. Being sent is what the instances
    /// report having in flight (`instance_queue`, written by each ``ActivityWriter`` every few
    /// seconds), and the due deliveries whose claim's lease ended unfinished (their instance
    /// stopped): the deliveries stored claimed at intake are in no index by status, and finding them
    /// in `deliveries` meant walking every recent row, delivered ones included. A dead instance's
    /// claims at intake count again once the sweep makes them due.
    func depths(apps: [String], cap: Int) async throws -> [String: Depths] {
        let pending = DeliveryStatus.pending.rawValue
        let sending = DeliveryStatus.sending.rawValue
        let lapse = ActivityWriter.reportsLapseAfter.components.seconds
        var depths: [String: Depths] = [:]
        for row in try await client.query(
            """
            SELECT a.app, q.pending,
                (SELECT least(q.orphaned + coalesce(sum(i.in_flight), 0), $2) FROM instance_queue i
                 WHERE i.app_id = a.app AND i.reported_at > now() - interval '\(lapse) seconds'),
                q.retrying,
                (SELECT count(*) FROM (SELECT 1 FROM zendesk_unregister_queue z WHERE z.app_id = a.app AND z.forwarded_at IS NULL LIMIT $2) zq),
                (SELECT count(*) FROM (SELECT 1 FROM delivery_events e WHERE e.app_id = a.app LIMIT $2) eq)
            FROM unnest($1::text[]) AS a (app)
            CROSS JOIN LATERAL (
                SELECT count(*) FILTER (WHERE d.status = '\(pending)' AND d.attempts = 0) AS pending,
                       count(*) FILTER (WHERE d.status = '\(sending)' AND d.lease_expires_at < now()) AS orphaned,
                       count(*) FILTER (WHERE d.status = '\(pending)' AND d.attempts > 0) AS retrying
                FROM (
                    SELECT status, attempts, lease_expires_at FROM deliveries
                    WHERE app_id = a.app AND due AND status IN ('\(pending)', '\(sending)') LIMIT $2
                ) d
            ) q
            """,
            [apps, Int64(cap)]
        ).rows {
            depths[try row.decode(String.self, at: 0)] = Depths(
                pending: Int(try row.decode(Int64.self, at: 1)),
                sending: Int(try row.decode(Int64.self, at: 2)),
                retrying: Int(try row.decode(Int64.self, at: 3)),
                zendesk: Int(try row.decode(Int64.self, at: 4)),
                events: Int(try row.decode(Int64.self, at: 5))
            )
        }
        return depths
    }

    /// When each named provider credential's shared token was last issued, and when it expires.
    func tokenRefreshes(credentials: [String]) async throws -> [String: (issued: Date, expires: Date)] {
        guard !credentials.isEmpty else { return [:] }
        var refreshed: [String: (issued: Date, expires: Date)] = [:]
        for row in try await client.query(
            "SELECT credential, issued_at, expires_at FROM provider_tokens WHERE credential = ANY($1)",
            [credentials]
        ).rows {
            refreshed[try row.decode(String.self, at: 0)] = (
                try row.decode(Date.self, at: 1), try row.decode(Date.self, at: 2)
            )
        }
        return refreshed
    }

    /// The last credential rejection of each app and platform.
    func rejections(apps: [String]) async throws -> [(app: String, platform: String, at: Date, reason: String)] {
        try await client.query(
            "SELECT app_id, platform, rejected_at, reason FROM credential_rejections WHERE app_id = ANY($1)",
            [apps]
        ).rows.map {
            (
                try $0.decode(String.self, at: 0), try $0.decode(String.self, at: 1), try $0.decode(Date.self, at: 2),
                try $0.decode(String.self, at: 3)
            )
        }
    }
}
