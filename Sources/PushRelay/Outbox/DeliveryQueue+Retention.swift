import Foundation
import Postgres

/// Retention: finished deliveries deleted in short batches (``RetentionService``).
extension DeliveryQueue {
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
}
