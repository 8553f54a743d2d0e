import Foundation
import Postgres

/// The sweep: how a delivery stored claimed at intake comes due again when its instance died.
///
/// Such a delivery is not due (`due` false), so its outcome changes no indexed column and is a HOT
/// update; the due index never sees it. Instead every dispatcher's poll runs the sweep, which
/// visits the not-due deliveries through `deliveries_unswept` (keyed by `next_attempt_at`, the
/// lease's end, and the id), in key order from the watermark in `delivery_sweep`, up to a cutoff no
/// uncommitted row's key is before, and makes due those still pending or being sent. Each row is
/// visited once, after its lease ended; the watermark's row lock lets one instance sweep at a time.
extension DeliveryQueue {
    /// The most rows one sweep statement visits; the sweep repeats while a statement comes back full.
    static let sweepLimit = 10_000

    /// The condition on `deliveries` for the not-due rows the sweep has not passed yet (every
    /// delivery stored claimed at intake whose lease had not ended at the last sweep), after `mark`,
    /// the alias of a `delivery_sweep` row. Read through `deliveries_unswept`.
    static func unswept(after mark: String) -> String {
        "NOT due AND (next_attempt_at, id) > (\(mark).swept_to, \(mark).swept_id)"
    }

    /// How far the sweep may go: now, or the start of the oldest transaction of a client session in
    /// progress, if earlier.
    ///
    /// A delivery's `next_attempt_at` is at least its inserting transaction's start (`now()`), so
    /// every delivery not yet committed when this runs has a key at or after the cutoff, and one
    /// committed later is not missed by a sweep that reads (in a later statement) the keys before
    /// it. Read before the sweep's own snapshot, for that reason: in one statement, a transaction
    /// could commit between the snapshot and the read of `pg_stat_activity`, unseen by both. A long
    /// transaction holds the sweep back (crash recovery of fresh deliveries waits for it), never
    /// makes it skip a row.
    func sweepCutoff() async throws -> Date {
        // The server's clock, never this process's: a cutoff ahead of the server's could pass rows
        // not yet committed.
        guard
            let row = try await client.query(
                """
                SELECT least(now(), min(xact_start)) FROM pg_stat_activity
                WHERE datname = current_database() AND backend_type = 'client backend' AND xact_start IS NOT NULL
                """
            ).first
        else { throw PostgresError(code: .decoding, message: "the sweep's cutoff query returned no row") }
        return try row.decode(Date.self, at: 0)
    }

    /// One sweep statement: visits up to `limit` not-due deliveries after the watermark whose lease
    /// ended before `cutoff` (``sweepCutoff()``), makes due those still pending or being sent, moves the
    /// watermark past what it visited and wakes the dispatchers if it made any due. Visits nothing
    /// when another instance is sweeping. One generic plan per connection, as ``claimStatement``.
    /// - Returns: how many rows it visited and how many it made due.
    func sweep(upTo cutoff: Date, limit: Int = sweepLimit) async throws -> (visited: Int, madeDue: Int) {
        let row = try await client.query(
            """
            -- (`LIMIT 1`: the table has one row, where the planner guesses 1,850 before an ANALYZE.)
            WITH mark AS MATERIALIZED (
                SELECT swept_to, swept_id FROM delivery_sweep LIMIT 1 FOR UPDATE SKIP LOCKED
            ),
            visited AS MATERIALIZED (
                SELECT d.id, d.next_attempt_at, d.status FROM mark CROSS JOIN LATERAL (
                    SELECT id, next_attempt_at, status FROM deliveries
                    WHERE \(Self.unswept(after: "mark")) AND next_attempt_at < $1
                    ORDER BY next_attempt_at, id
                    LIMIT $2
                ) d
            ),
            made_due AS (
                UPDATE deliveries d SET due = true
                WHERE d.id = ANY (ARRAY(SELECT id FROM visited WHERE status IN ('pending', 'sending')))
                  AND NOT d.due AND d.status IN ('pending', 'sending')
                RETURNING d.id
            ),
            moved AS (
                UPDATE delivery_sweep SET (swept_to, swept_id) = (
                    SELECT next_attempt_at, id FROM visited ORDER BY next_attempt_at DESC, id DESC LIMIT 1
                )
                WHERE EXISTS (SELECT 1 FROM visited)
                RETURNING 1
            ),
            woken AS (
                SELECT pg_notify('\(Self.channel)', '') WHERE EXISTS (SELECT 1 FROM made_due)
            )
            SELECT (SELECT count(*) FROM visited)::int, (SELECT count(*) FROM made_due)::int,
                   (SELECT count(*) FROM moved)::int + (SELECT count(*) FROM woken)::int
            """,
            [cutoff, limit],
            prepare: true,
            planning: .cached
        ).first
        guard let row else { return (0, 0) }
        let (visited, madeDue, _) = try row.decode((Int, Int, Int).self)
        return (visited, madeDue)
    }
}
