import Foundation
import Logging
import Postgres
import ServiceLifecycle
import Synchronization

/// Adds this instance's ``ActivityTally`` to `activity_minutes` and `credential_rejections` every
/// `interval` (and once more at shutdown), and deletes activity older than two hours.
///
/// Each write also reports what the instance has in flight per app (`instance_queue`, read by the
/// overview's queue depth): its rows say what `inFlight` says now, those of apps with nothing in
/// flight are deleted.
final class ActivityWriter: Service, Sendable {
    let client: PostgresClient
    let tally: ActivityTally
    let interval: Duration
    /// This instance's name in `instance_queue`.
    let instance: String
    /// Deliveries this instance claimed and has not finished, per app.
    let inFlight: @Sendable () -> [String: Int]
    let logger: Logger
    /// False once a report left this instance no row, until a report writes one.
    private let mayHaveRows = Atomic(true)

    /// How often each instance reports what it has in flight (the writer's default interval).
    static let reportInterval = Duration.seconds(5)
    /// An instance's report older than this (three reports missed) is not counted.
    static let reportsLapseAfter = reportInterval * 3

    init(
        client: PostgresClient,
        tally: ActivityTally,
        interval: Duration = reportInterval,
        instance: String = leaseOwnerName(role: "activity"),
        inFlight: @escaping @Sendable () -> [String: Int] = { [:] },
        logger: Logger
    ) {
        self.client = client
        self.tally = tally
        self.interval = interval
        self.instance = instance
        self.inFlight = inFlight
        self.logger = logger
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var writes = 0
            while !Task.isCancelled {
                try? await Task.sleep(for: self.interval)
                // Stopping: the last write below, outside this cancelled task, stores what is left.
                if Task.isCancelled { break }
                writes += 1
                await self.writeOnce(prune: writes % 12 == 0)
            }
        }
        await writeOnce(prune: false)
    }

    /// One write of what was counted; on failure the counts not yet stored stay for the next (those
    /// stored stay stored when the report or the pruning after them fails).
    func writeOnce(prune: Bool) async {
        let taken = tally.take()
        var stored = false
        do {
            try await write(taken)
            stored = true
            try await report(inFlight())
            if prune {
                _ = try await client.query("DELETE FROM activity_minutes WHERE minute < now() - interval '2 hours'")
                _ = try await client.query("DELETE FROM instance_queue WHERE reported_at < now() - interval '1 hour'")
            }
        } catch {
            if !stored { tally.restore(taken) }
            guard !(error is CancellationError) else { return }
            logger.log(
                level: PostgresError.logLevel(for: error),
                "could not store the console's activity counts; trying again",
                metadata: PostgresError.metadata(error)
            )
        }
    }

    /// Replaces this instance's rows of `instance_queue` by `inFlight` (apps with none are deleted).
    /// An idle instance whose last report left no row sends no statement.
    func report(_ inFlight: [String: Int]) async throws {
        let apps = inFlight.filter { $0.value > 0 }.sorted { $0.key < $1.key }
        guard !apps.isEmpty || mayHaveRows.load(ordering: .relaxed) else { return }
        _ = try await client.query(
            """
            WITH reported AS (
                INSERT INTO instance_queue AS q (instance, app_id, in_flight, reported_at)
                SELECT $1, app, count, now() FROM unnest($2::text[], $3::int[]) AS t (app, count)
                ON CONFLICT (instance, app_id) DO UPDATE SET in_flight = excluded.in_flight, reported_at = excluded.reported_at
                RETURNING 1
            )
            DELETE FROM instance_queue WHERE instance = $1 AND NOT (app_id = ANY ($2::text[]))
            """,
            [instance, apps.map(\.key), apps.map(\.value)]
        )
        mayHaveRows.store(!apps.isEmpty, ordering: .relaxed)
    }

    private func write(
        _ taken: (
            counts: [ActivityTally.Key: ActivityTally.Counts], rejections: [String: [String: ActivityTally.Rejection]]
        )
    ) async throws {
        if !taken.counts.isEmpty {
            let entries = taken.counts.sorted { ($0.key.app, $0.key.minute) < ($1.key.app, $1.key.minute) }
            _ = try await client.query(
                """
                INSERT INTO activity_minutes AS a (app_id, minute, webhooks, delivered, failed, expired, dead_token, skipped)
                SELECT app, to_timestamp(minute), webhooks, delivered, failed, expired, dead_token, skipped
                FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[])
                    AS t (app, minute, webhooks, delivered, failed, expired, dead_token, skipped)
                ON CONFLICT (app_id, minute) DO UPDATE SET
                    webhooks = a.webhooks + excluded.webhooks, delivered = a.delivered + excluded.delivered,
                    failed = a.failed + excluded.failed, expired = a.expired + excluded.expired,
                    dead_token = a.dead_token + excluded.dead_token, skipped = a.skipped + excluded.skipped
                """,
                [
                    entries.map(\.key.app), entries.map(\.key.minute), entries.map(\.value.webhooks),
                    entries.map(\.value.delivered),
                    entries.map(\.value.failed), entries.map(\.value.expired), entries.map(\.value.deadToken),
                    entries.map(\.value.skipped),
                ]
            )
        }
        for (app, byPlatform) in taken.rejections {
            for (platform, rejection) in byPlatform {
                _ = try await client.query(
                    """
                    INSERT INTO credential_rejections (app_id, platform, rejected_at, reason) VALUES ($1, $2, $3, $4)
                    ON CONFLICT (app_id, platform) DO UPDATE SET rejected_at = excluded.rejected_at, reason = excluded.reason
                    WHERE credential_rejections.rejected_at < excluded.rejected_at
                    """,
                    [app, platform, rejection.at, rejection.reason]
                )
            }
        }
    }
}
