import Foundation
import Postgres

/// The Zendesk unregister queue (`zendesk_unregister_queue`): dead and bulk-unregistered tokens
/// waiting to be forwarded to Zendesk's bulk unregister API (``ZendeskForwarder``). The outbox's
/// outcomes (``DeliveryQueue``) and bulk-unregister jobs (``JobStore``) fill it in their own
/// statements; the forwarder and retention empty it.
struct ZendeskQueue: Sendable {
    let client: PostgresClient

    /// The statement (for a CTE) that queues tokens for Zendesk's bulk unregister, once per app and
    /// token: each argument is an SQL expression over the rows of `from`. Dead tokens (``DeliveryQueue/store(_:owner:events:)``)
    /// and bulk-unregister jobs (``JobStore``) queue through it.
    ///
    /// A token still waiting is left as it is; a token already forwarded is queued again (its row
    /// reset): it was registered again since and has died again, and Zendesk holds it again. The
    /// rows of `from` are made distinct per app and token first, because an upsert may not touch
    /// one row twice in a statement (two dead deliveries of one device in one outcome batch).
    /// ``queueForZendesk(app:token:platform:reason:job:from:)`` for the dead tokens of a batch of
    /// outcomes (the CTE `dead`), with no job.
    static let deadTokensForZendesk = queueForZendesk(
        app: "app_id",
        token: "token",
        platform: "platform",
        reason: "reason",
        job: "NULL::uuid",
        from: "dead"
    )

    static func queueForZendesk(
        app: String,
        token: String,
        platform: String,
        reason: String,
        job: String,
        from source: String
    ) -> String {
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
            "UPDATE zendesk_unregister_queue SET next_attempt_at = now() + make_interval(secs => $3), last_error = $4 WHERE app_id = $1 AND "
                + "token = ANY($2)",
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
