import Foundation
import Logging
import Postgres
import ServiceLifecycle
import Synchronization

/// What this instance counted since it last wrote to `activity_minutes`: webhooks accepted and
/// final delivery outcomes per app and minute, and the last credential rejection per app and
/// platform. Fed by ``RelayMetrics`` (one lock per count, no I/O); ``ActivityWriter`` adds it to
/// PostgreSQL every few seconds, where the Overview reads every instance's sum.
final class ActivityTally: Sendable {
    struct Key: Hashable {
        var app: String
        /// Seconds since 1970, a multiple of 60.
        var minute: Int64
    }

    struct Counts: Equatable {
        var webhooks: Int64 = 0
        var delivered: Int64 = 0
        var failed: Int64 = 0
        var expired: Int64 = 0
        var deadToken: Int64 = 0
        var skipped: Int64 = 0
    }

    struct Rejection: Equatable {
        var at: Date
        var reason: String
    }

    private let state = Mutex<(counts: [Key: Counts], rejections: [String: [String: Rejection]])>(([:], [:]))

    static func minute(_ date: Date) -> Int64 {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        return seconds - seconds % 60
    }

    func webhook(app: String, at date: Date = Date()) {
        let key = Key(app: app, minute: Self.minute(date))
        state.withLock { $0.counts[key, default: Counts()].webhooks += 1 }
    }

    /// Counts final outcomes only (delivered, failed, expired, dead_token, skipped); a retry or a
    /// hand-back is not an outcome of the delivery.
    func outcome(app: String, outcome: String, at date: Date = Date()) {
        let field: WritableKeyPath<Counts, Int64>
        switch outcome {
        case "delivered": field = \.delivered
        case "failed", "unsendable": field = \.failed
        case "expired": field = \.expired
        case "dead_token": field = \.deadToken
        case "skipped": field = \.skipped
        default: return
        }
        let key = Key(app: app, minute: Self.minute(date))
        state.withLock { $0.counts[key, default: Counts()][keyPath: field] += 1 }
    }

    func credentialRejected(app: String, platform: String, reason: String, at date: Date = Date()) {
        state.withLock { $0.rejections[app, default: [:]][platform] = Rejection(at: date, reason: reason) }
    }

    /// Everything counted since the last call, and forgets it.
    func take() -> (counts: [Key: Counts], rejections: [String: [String: Rejection]]) {
        state.withLock { state in
            defer { state = ([:], [:]) }
            return state
        }
    }

    /// Puts back what a failed write took, so the next write carries it.
    func restore(_ taken: (counts: [Key: Counts], rejections: [String: [String: Rejection]])) {
        state.withLock { state in
            for (key, counts) in taken.counts {
                var sum = state.counts[key, default: Counts()]
                sum.webhooks += counts.webhooks
                sum.delivered += counts.delivered
                sum.failed += counts.failed
                sum.expired += counts.expired
                sum.deadToken += counts.deadToken
                sum.skipped += counts.skipped
                state.counts[key] = sum
            }
            for (app, byPlatform) in taken.rejections {
                for (platform, rejection) in byPlatform where state.rejections[app]?[platform] == nil {
                    state.rejections[app, default: [:]][platform] = rejection
                }
            }
        }
    }
}

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
            if prune { _ = try await client.query("DELETE FROM activity_minutes WHERE minute < now() - interval '2 hours'") }
        } catch {
            tally.restore(taken)
            guard !(error is CancellationError) else { return }
            logger.warning("could not store the console's activity counts; trying again", metadata: ["error": "\(error)"])
        }
    }

    private func write(_ taken: (counts: [ActivityTally.Key: ActivityTally.Counts], rejections: [String: [String: ActivityTally.Rejection]])) async throws {
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
                    entries.map(\.key.app), entries.map(\.key.minute), entries.map(\.value.webhooks), entries.map(\.value.delivered),
                    entries.map(\.value.failed), entries.map(\.value.expired), entries.map(\.value.deadToken), entries.map(\.value.skipped),
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
