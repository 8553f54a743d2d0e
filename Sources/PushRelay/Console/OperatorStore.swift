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
    func depths(apps: [String], cap: Int) async throws -> [String: Depths] {
        let pending = DeliveryStatus.pending.rawValue
        let sending = DeliveryStatus.sending.rawValue
        var depths: [String: Depths] = [:]
        for row in try await client.query(
            """
            SELECT a.app, q.pending, q.sending, q.retrying,
                (SELECT count(*) FROM (SELECT 1 FROM zendesk_unregister_queue z WHERE z.app_id = a.app AND z.forwarded_at IS NULL LIMIT $2) zq),
                (SELECT count(*) FROM (SELECT 1 FROM delivery_events e WHERE e.app_id = a.app LIMIT $2) eq)
            FROM unnest($1::text[]) AS a (app)
            CROSS JOIN LATERAL (
                SELECT count(*) FILTER (WHERE d.status = '\(pending)' AND d.attempts = 0) AS pending,
                       count(*) FILTER (WHERE d.status = '\(sending)') AS sending,
                       count(*) FILTER (WHERE d.status = '\(pending)' AND d.attempts > 0) AS retrying
                FROM (
                    -- Due deliveries, then those stored claimed at intake (not due) that the sweep
                    -- has not passed: every one waiting or in flight, each list read through its index.
                    (SELECT status, attempts FROM deliveries WHERE app_id = a.app AND due AND status IN ('\(pending)', '\(sending)') LIMIT $2)
                    UNION ALL
                    (SELECT f.status, f.attempts FROM (SELECT * FROM delivery_sweep LIMIT 1) s CROSS JOIN LATERAL (
                        SELECT status, attempts FROM deliveries
                        WHERE \(DeliveryQueue.unswept(after: "s")) AND app_id = a.app AND status IN ('\(pending)', '\(sending)')
                        LIMIT $2
                    ) f)
                    LIMIT $2
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
