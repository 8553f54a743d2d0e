import Configuration
import Foundation
import Logging
import Postgres
import ServiceLifecycle
import Synchronization

/// What one retention run deleted.
struct RetentionReport: Sendable, Equatable {
    var deliveries = 0
    var notifications = 0
    var events = 0
    var jobs = 0
    /// Uploaded tokens of finished jobs (left over by a job cancelled before 0011 was applied, or by
    /// an instance that died while finishing one).
    var jobTokens = 0
    var zendeskForwarded = 0
    /// Encrypted notifications whose text was erased here (their deliveries had all ended).
    var erasedTexts = 0
    /// Deliveries of apps no longer served ended here (``DeliveryQueue/endUnservedDeliveries(served:maxAge:limit:)``).
    var unservedEnded = 0
    /// History partitions created ahead, and dropped whole (``HistoryPartitions``).
    var partitionsCreated = 0
    var partitionsDropped: [String] = []
    var seconds = 0.0
    /// False when another instance took the lease over before the run was through.
    var complete = false
}

/// The statements that prune row by row: deliveries and notifications in the tables 0019 found
/// unpartitioned (partitions are dropped whole: ``HistoryPartitions``), events, jobs; and the
/// erase of ended encrypted texts. Each statement looks at a bounded batch in primary-key order,
/// so none holds locks for long or rewrites a table; the walks from a cursor stop at the first
/// rows too young to be deleted (ids grow with time). Unread counters are not history: they are
/// never touched.
struct RetentionStore: Sendable {
    let client: PostgresClient

    /// Deletes, among the `limit` deliveries after id `cursor`, those finished long enough ago:
    /// `delivered` and `skipped` rows last changed more than `deliveredDays` ago, `failed`,
    /// `expired` and `dead_token` rows more than `failedDays` ago.
    /// - Returns: the batch's last id (`nil` when there was none), how many were deleted, and
    ///   whether the walk reached deliveries created after the shorter of the two cut-offs (then
    ///   no later row can be old enough).
    /// Only ids below `below` are looked at: the unpartitioned table's (``HistoryPartitions``).
    func pruneDeliveries(
        after cursor: Int64,
        below: Int64,
        limit: Int,
        deliveredDays: Int,
        failedDays: Int
    ) async throws -> (last: Int64?, deleted: Int, done: Bool) {
        let row = try await client.query(
            """
            WITH batch AS MATERIALIZED (
                SELECT id, status, updated_at, created_at FROM deliveries WHERE id > $1 AND id < $5 ORDER BY id LIMIT $2
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
            [cursor, limit, deliveredDays, failedDays, below],
            prepare: true
        ).first
        guard let row else { return (nil, 0, true) }
        let (last, deleted, done) = try row.decode((Int64?, Int, Bool).self)
        return (last, deleted, done || last == nil)
    }

    /// Deletes, among the `limit` notifications after id `cursor`, those received before the
    /// shorter cut-off that have no delivery left.
    /// Only ids below `below` are looked at: the unpartitioned table's (``HistoryPartitions``).
    func pruneNotifications(
        after cursor: Int64,
        below: Int64,
        limit: Int,
        days: Int
    ) async throws -> (last: Int64?, deleted: Int, done: Bool) {
        let row = try await client.query(
            """
            WITH batch AS MATERIALIZED (
                SELECT id, received_at, first_delivery_id, last_delivery_id FROM notifications
                WHERE id > $1 AND id < $4 ORDER BY id LIMIT $2
            ),
            doomed AS (
                DELETE FROM notifications n USING batch b
                WHERE n.id = b.id AND b.received_at < now() - make_interval(days => $3)
                  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE \(DeliveryPartitions.ofNotification("d", "b")))
                RETURNING 1
            )
            SELECT (SELECT max(id) FROM batch), (SELECT count(*) FROM doomed)::int,
                   coalesce((SELECT max(received_at) FROM batch) >= now() - make_interval(days => $3), true)
            """,
            [cursor, limit, days, below],
            prepare: true
        ).first
        guard let row else { return (nil, 0, true) }
        let (last, deleted, done) = try row.decode((Int64?, Int, Bool).self)
        return (last, deleted, done || last == nil)
    }

    /// Deletes up to `limit` uploaded tokens (and batch records) of jobs that have finished: a job
    /// deletes its own when it ends, so these are left-overs. Returns how many tokens.
    func pruneFinishedJobTokens(limit: Int) async throws -> Int {
        try await client.query(
            """
            WITH finished AS MATERIALIZED (
                SELECT id FROM jobs WHERE status IN ('succeeded', 'failed', 'cancelled')
            ),
            tokens AS (
                DELETE FROM job_tokens WHERE ctid IN (
                    SELECT t.ctid FROM finished f JOIN job_tokens t ON t.job_id = f.id LIMIT $1
                )
                RETURNING 1
            ),
            batches AS (
                DELETE FROM job_batches b USING finished f WHERE b.job_id = f.id
            )
            SELECT count(*)::int FROM tokens
            """,
            [limit],
            prepare: true
        ).first?.decode(Int.self) ?? 0
    }

    /// Deletes up to `limit` of the jobs that finished more than `days` ago, with their uploaded
    /// tokens and batch records. Returns how many jobs.
    func pruneJobs(limit: Int, days: Int) async throws -> Int {
        try await client.query(
            """
            WITH doomed AS (
                DELETE FROM jobs WHERE id IN (
                    SELECT id FROM jobs
                    WHERE status IN ('succeeded', 'failed', 'cancelled') AND finished_at < now() - make_interval(days => $2)
                    ORDER BY finished_at LIMIT $1
                )
                RETURNING id
            ),
            tokens AS (
                DELETE FROM job_tokens t USING doomed d WHERE t.job_id = d.id
            ),
            batches AS (
                DELETE FROM job_batches b USING doomed d WHERE b.job_id = d.id
            )
            SELECT count(*)::int FROM doomed
            """,
            [limit, days],
            prepare: true
        ).first?.decode(Int.self) ?? 0
    }

    /// Retention's sweep for what ``DeliveryQueue/eraseText(of:)`` missed (a failed statement, a
    /// crash between the outcome and the erase): up to `limit` encrypted notifications whose
    /// deliveries all ended lose their text. Returns how many.
    func eraseEndedText(limit: Int) async throws -> Int {
        try await client.query(Self.eraseEndedTextStatement, [limit]).first?.decode(Int.self, at: 0) ?? 0
    }

    /// ``eraseEndedText(limit:)``'s statement. The kept texts are few (those still in flight),
    /// and each one's live deliveries are looked up by primary key in their id range (`OFFSET 0`
    /// keeps the `NOT EXISTS` a subplan run per kept text). As a join, the planner, which cannot
    /// know that an encrypted text is erased once its deliveries end, expects most encrypted
    /// notifications to be candidates and reads every partition's index whole: 4.5 s and
    /// 700,000 buffers at 10,000,000 deliveries, at each retention run.
    static let eraseEndedTextStatement = """
        WITH ended AS (
            SELECT n.id FROM notifications n
            WHERE n.content = 'encrypted' AND n.title IS NOT NULL
            AND NOT EXISTS (
                SELECT 1 FROM deliveries d WHERE \(DeliveryPartitions.ofNotification()) AND d.status IN ('pending', 'sending') OFFSET 0
            )
            ORDER BY n.id LIMIT $1
        ),
        erased AS (UPDATE notifications n SET title = NULL, body = NULL FROM ended WHERE n.id = ended.id RETURNING 1)
        SELECT count(*)::int FROM erased
        """

    /// Deletes up to `limit` of the oldest feedback events older than `days` (a receiver that has
    /// been failing that long). Returns how many.
    func pruneEvents(limit: Int, days: Int) async throws -> Int {
        try await client.query(
            """
            WITH doomed AS (
                DELETE FROM delivery_events WHERE id IN (
                    SELECT id FROM delivery_events WHERE at < now() - make_interval(days => $2) ORDER BY id LIMIT $1
                )
                RETURNING 1
            )
            SELECT count(*)::int FROM doomed
            """,
            [limit, days],
            prepare: true
        ).first?.decode(Int.self) ?? 0
    }
}

/// Deletes old history in the background: deliveries past `retention.delivered_days` or
/// `retention.failed_days` (by status), notifications with no delivery left, feedback events
/// nobody accepted for `failed_days`, finished jobs after `jobs_days` (and at once, any uploaded
/// tokens a finished job left behind), and tokens forwarded to Zendesk after
/// `zendesk_forwarded_days`. Any instance may run it; a lease (`retention`) makes it one at a
/// time, and once a run is complete its instance keeps the lease for `interval`, so a cluster
/// prunes once per interval rather than once per instance. Each run logs one line and counts rows
/// in `push_relay_retention_pruned_rows_total`.
final class RetentionService: Service, Sendable {
    static let leaseName = "retention"

    private let queue: DeliveryQueue
    private let zendesk: ZendeskQueue
    private let store: RetentionStore
    private let partitions: HistoryPartitions
    private let leases: Leases
    private let settings: RetentionSettings
    private let metrics: RelayMetrics
    private let logger: Logger
    /// Times the interval between runs, the pauses between batches and the lease's renewal.
    private let clock: RelayClock
    /// The apps this instance serves now, and the age past which any instance serving an app
    /// expires its deliveries (`delivery.max_age_seconds`): deliveries of other apps due since
    /// before that end as their app's removal ends them. `nil`: not this service's concern.
    private let served: (@Sendable () -> [String])?
    private let maxAge: Duration

    init(
        client: PostgresClient,
        settings: RetentionSettings,
        metrics: RelayMetrics,
        logger: Logger,
        clock: RelayClock = .system,
        served: (@Sendable () -> [String])? = nil,
        maxAge: Duration = .seconds(86400)
    ) {
        self.clock = clock
        self.served = served
        self.maxAge = maxAge
        queue = DeliveryQueue(client: client)
        zendesk = ZendeskQueue(client: client)
        store = RetentionStore(client: client)
        partitions = HistoryPartitions(client: client)
        leases = Leases(client: client, owner: leaseOwnerName(role: "retention"))
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
    }

    func run() async throws {
        guard settings.enabled else {
            // Not pruning, but still watching that the history has a partition for today.
            await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    await self.checkPartitions()
                    try? await self.clock.sleep(for: self.settings.interval)
                }
            }
            return
        }
        let interrupted = Mutex(false)
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await self.checkPartitions()
                do {
                    if let report = try await self.runOnce() {
                        self.logger.notice(
                            report.complete
                                ? "retention run finished"
                                : "retention run stopped: another instance took the lease over",
                            metadata: [
                                "push.deliveries_pruned": "\(report.deliveries)",
                                "push.notifications_pruned": "\(report.notifications)",
                                "push.events_pruned": "\(report.events)", "push.jobs_pruned": "\(report.jobs)",
                                "push.job_tokens_pruned": "\(report.jobTokens)",
                                "push.zendesk_forwarded_pruned": "\(report.zendeskForwarded)",
                                "push.texts_erased": "\(report.erasedTexts)",
                                "push.unserved_deliveries_ended": "\(report.unservedEnded)",
                                "push.partitions_created": "\(report.partitionsCreated)",
                                "push.partitions_dropped": "\(report.partitionsDropped.joined(separator: ","))",
                                "push.seconds": "\(report.seconds)",
                            ]
                        )
                    }
                } catch  where error is CancellationError || Task.isCancelled {
                    interrupted.withLock { $0 = true }
                    return
                } catch {
                    self.logger.log(
                        level: PostgresError.logLevel(for: error),
                        "retention run failed; trying again at the next interval",
                        metadata: PostgresError.metadata(error)
                    )
                }
                try? await self.clock.sleep(for: self.settings.interval)
            }
        }
        // Stopped in the middle of a run: give the lease back (outside the cancelled task, so
        // the statement runs), and another instance may take over at once.
        if interrupted.withLock({ $0 }) { try? await leases.release(Self.leaseName) }
    }

    /// One run, if this instance gets the lease (`nil` when another instance holds it).
    func runOnce() async throws -> RetentionReport? {
        // Long enough for a batch at any size; renewed between batches.
        var lease = HeldLease(name: Self.leaseName, duration: .seconds(120), clock: clock)
        guard try await lease.hold(with: leases) else { return nil }
        let started = clock.now()
        var report = RetentionReport()
        if try await runSteps(lease: &lease, report: &report) {
            // Complete: the lease now marks when the cluster's next run is due.
            _ = try? await leases.acquire(Self.leaseName, for: settings.interval)
            report.complete = true
        }
        report.seconds = (clock.now() - started).timeInterval
        return report
    }

    /// Sets `push_relay_history_partition_days_ahead` and warns when no history partition covers
    /// today (new rows then go to the newest, which is dropped only once its newest row expires).
    /// Every instance does this at each interval, pruning or not.
    func checkPartitions() async {
        do {
            let ahead = try await partitions.daysAhead()
            metrics.historyPartitionDaysAhead(ahead)
            guard ahead <= 0 else { return }
            logger.warning(
                "no history partition covers today: new rows go to the newest partition until the retention lease holder creates more",
                metadata: ["push.partition_days_ahead": "\(ahead)", "push.retention_enabled": "\(settings.enabled)"]
            )
        } catch  where !(error is CancellationError) {
            logger.log(
                level: PostgresError.logLevel(for: error),
                "could not read the history partitions",
                metadata: PostgresError.metadata(error)
            )
        } catch {}
    }

    /// A run's steps in order; false when the lease was lost midway (another instance goes on).
    private func runSteps(lease: inout HeldLease, report: inout RetentionReport) async throws -> Bool {
        let limit = settings.batchSize
        report.partitionsCreated = try await partitions.extend(
            periodDays: settings.partitionDays,
            aheadDays: settings.partitionsAheadDays
        )
        if report.partitionsCreated > 0 { metrics.historyPartitionDaysAhead(try await partitions.daysAhead()) }
        if let served {
            // Ended first, so the steps below erase their texts and, in time, prune them.
            let ended = try await drain(nil, into: &report.unservedEnded, lease: &lease) {
                try await queue.endUnservedDeliveries(served: served(), maxAge: maxAge, limit: limit)
            }
            guard ended else { return false }
        }
        let shorter = min(settings.deliveredDays, settings.failedDays)
        // Read once: nothing below changes a partition's range before its drop.
        let all = try await partitions.list()
        // The id bound below which rows are in the table `parent` had before 0019.
        func unpartitionedBound(of parent: String) -> Int64? {
            all.first { $0.parent == parent && $0.lower == nil }?.upper
        }
        // Row by row only in what 0019 found unpartitioned; the partitions are dropped whole.
        if let below = unpartitionedBound(of: "deliveries") {
            let walked = try await walk("deliveries", into: &report.deliveries, lease: &lease) { cursor in
                try await store.pruneDeliveries(
                    after: cursor,
                    below: below,
                    limit: limit,
                    deliveredDays: settings.deliveredDays,
                    failedDays: settings.failedDays
                )
            }
            guard walked else { return false }
        }
        if let below = unpartitionedBound(of: "notifications") {
            let walked = try await walk("notifications", into: &report.notifications, lease: &lease) {
                try await store.pruneNotifications(after: $0, below: below, limit: limit, days: shorter)
            }
            guard walked else { return false }
        }
        guard try await dropPartitions(all, lease: &lease, report: &report) else { return false }
        return try await drainTables(lease: &lease, report: &report)
    }

    /// Drops the partitions of `deliveries` whose rows are all past retention, then those of
    /// `notifications` no delivery refers to any more (``HistoryPartitions``), oldest first, among
    /// `all` (``HistoryPartitions/list()``).
    private func dropPartitions(
        _ all: [HistoryPartitions.Partition],
        lease: inout HeldLease,
        report: inout RetentionReport
    ) async throws -> Bool {
        let shorter = min(settings.deliveredDays, settings.failedDays)
        // Detached by a run that stopped before dropping them: not partitions any more.
        let detached = try await partitions.dropDetached()
        report.partitionsDropped += detached
        for table in ["deliveries", "notifications"] {
            var dropped = detached.filter { $0.hasPrefix(table + "_") }.count
            for partition in all where partition.parent == table {
                try Task.checkCancellation()
                guard try await lease.hold(with: leases) else { return false }
                // One whose detach was interrupted passed these checks before it began.
                let expired =
                    if partition.detaching {
                        true
                    } else if table == "deliveries" {
                        try await partitions.deliveriesExpired(
                            partition,
                            deliveredDays: settings.deliveredDays,
                            failedDays: settings.failedDays,
                            margin: maxAge
                        )
                    } else {
                        try await partitions.notificationsExpired(partition, days: shorter)
                    }
                guard expired, try await partitions.drop(partition) else { continue }
                report.partitionsDropped.append(partition.name)
                dropped += 1
            }
            metrics.droppedPartitions(table: table, count: dropped)
        }
        return true
    }

    /// The steps after the two walks: tables drained in batches until one is short.
    private func drainTables(lease: inout HeldLease, report: inout RetentionReport) async throws -> Bool {
        let limit = settings.batchSize
        guard
            try await drain(
                "delivery_events",
                into: &report.events,
                lease: &lease,
                { try await store.pruneEvents(limit: limit, days: settings.failedDays) }
            ),
            try await drain(
                "job_tokens",
                into: &report.jobTokens,
                lease: &lease,
                { try await store.pruneFinishedJobTokens(limit: limit) }
            ),
            try await drain(
                "jobs",
                into: &report.jobs,
                lease: &lease,
                { try await store.pruneJobs(limit: limit, days: settings.jobsDays) }
            ),
            try await drain(
                "zendesk_unregister_queue",
                into: &report.zendeskForwarded,
                lease: &lease,
                { try await zendesk.pruneForwardedZendesk(limit: limit, days: settings.zendeskForwardedDays) }
            ),
            try await drain(
                "notification_texts",
                into: &report.erasedTexts,
                lease: &lease,
                { try await store.eraseEndedText(limit: limit) }
            )
        else { return false }
        return true
    }

    /// Deletes batch after batch until one is short, holding the lease before each; false when the
    /// lease was lost. Rows pruned from `table` are counted in the metric; `nil` for a step that
    /// ends rows rather than deleting them.
    private func drain(
        _ table: String?,
        into total: inout Int,
        lease: inout HeldLease,
        _ batch: () async throws -> Int
    ) async throws -> Bool {
        while true {
            try Task.checkCancellation()
            guard try await lease.hold(with: leases) else { return false }
            let deleted = try await batch()
            total += deleted
            if let table { metrics.pruned(table: table, rows: deleted) }
            if deleted < settings.batchSize { return true }
            try await pause()
        }
    }

    /// Walks `table` by id from its start, one batch per step (`step` takes the last id visited and
    /// answers what it deleted, where it stopped and whether it reached the end), holding the lease
    /// before each; false when the lease was lost.
    private func walk(
        _ table: String,
        into total: inout Int,
        lease: inout HeldLease,
        _ step: (Int64) async throws -> (last: Int64?, deleted: Int, done: Bool)
    ) async throws -> Bool {
        var cursor: Int64 = 0
        while true {
            try Task.checkCancellation()
            guard try await lease.hold(with: leases) else { return false }
            let result = try await step(cursor)
            total += result.deleted
            metrics.pruned(table: table, rows: result.deleted)
            guard let last = result.last, !result.done else { return true }
            cursor = last
            try await pause()
        }
    }

    private func pause() async throws {
        if settings.batchPause > .zero { try await clock.sleep(for: settings.batchPause) }
    }
}
