import Foundation
import Logging
import Postgres
import ServiceLifecycle
import Synchronization

/// Adds this instance's ``ActivityTally`` to `activity_minutes` and `credential_rejections` every
/// `interval` (and once more at shutdown), and deletes activity older than two hours.
final class ActivityWriter: Service, Sendable {
    let client: PostgresClient
    let tally: ActivityTally
    let interval: Duration
    let logger: Logger

    init(client: PostgresClient, tally: ActivityTally, interval: Duration = .seconds(5), logger: Logger) {
        self.client = client
        self.tally = tally
        self.interval = interval
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

    /// One write of what was counted; on failure the counts stay for the next.
    func writeOnce(prune: Bool) async {
        let taken = tally.take()
        do {
            try await write(taken)
            if prune {
                _ = try await client.query("DELETE FROM activity_minutes WHERE minute < now() - interval '2 hours'")
            }
        } catch {
            tally.restore(taken)
            guard !(error is CancellationError) else { return }
            logger.log(
                level: PostgresError.logLevel(for: error),
                "could not store the console's activity counts; trying again",
                metadata: PostgresError.metadata(error)
            )
        }
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
