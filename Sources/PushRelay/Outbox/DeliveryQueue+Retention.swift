import Foundation
import Postgres

/// What a removed app leaves in the outbox: its queued deliveries end at its removal, and what
/// that missed (an app removed while no instance ran) ends in retention once older than any
/// instance would still send.
extension DeliveryQueue {
    /// `last_error` of a delivery ended because its app was removed.
    static let appRemovedReason = "the app was removed from this relay"

    /// Ends every delivery of `apps` still pending or being sent, in one statement: `failed`, with
    /// ``appRemovedReason``, out of the due index and its lease dropped (a sender's outcome for it
    /// is then left unstored, as for any lease it lost). Their encrypted notifications' text is
    /// erased in the same statement: every delivery of a notification is of its app, so none is
    /// left to send. Returns the deliveries ended and the texts erased.
    func endDeliveries(ofRemovedApps apps: [String]) async throws -> (ended: Int, erased: Int) {
        guard !apps.isEmpty else { return (0, 0) }
        let row = try await client.query(
            """
            WITH ended AS (
                UPDATE deliveries SET status = 'failed', due = false, last_error = $2, lease_owner = NULL, lease_expires_at = NULL,
                    updated_at = now()
                WHERE app_id = ANY($1::text[]) AND status IN ('pending', 'sending')
                RETURNING notification_id
            ),
            erased AS (
                UPDATE notifications n SET title = NULL, body = NULL
                WHERE n.id IN (SELECT notification_id FROM ended) AND n.content = 'encrypted' AND n.title IS NOT NULL
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM ended)::int, (SELECT count(*) FROM erased)::int
            """,
            [apps, Self.appRemovedReason]
        ).first
        return try row?.decode((Int, Int).self) ?? (0, 0)
    }

    /// Retention's step for apps no longer served: up to `limit` deliveries waiting in the due
    /// index for an app not in `served`, due since before `maxAge` ago (any instance serving the
    /// app would expire them at their claim), end as ``endDeliveries(ofRemovedApps:)`` ends them;
    /// retention's next step erases their texts (``RetentionStore/eraseEndedText(limit:)``).
    /// Returns how many.
    func endUnservedDeliveries(served: [String], maxAge: Duration, limit: Int) async throws -> Int {
        try await client.query(
            """
            WITH doomed AS (
                SELECT id FROM deliveries
                WHERE due AND NOT (app_id = ANY($1::text[])) AND next_attempt_at < now() - make_interval(secs => $2)
                ORDER BY app_id, next_attempt_at LIMIT $3
            ),
            ended AS (
                UPDATE deliveries d SET status = 'failed', due = false, last_error = $4, lease_owner = NULL, lease_expires_at = NULL,
                    updated_at = now()
                FROM doomed WHERE d.id = doomed.id AND d.due
                RETURNING 1
            )
            SELECT count(*)::int FROM ended
            """,
            [served, Double(maxAge.components.seconds), limit, Self.appRemovedReason]
        ).first?.decode(Int.self) ?? 0
    }
}
