import Configuration
import Foundation
import Logging
import Postgres
import ServiceLifecycle
import Synchronization

/// Runs bulk-unregister jobs: any instance may take a runnable job (`FOR UPDATE SKIP LOCKED`, with
/// a lease renewed by every batch), so a job whose instance died is resumed by another (or the same,
/// restarted), skipping the batches already committed. `parallel` batches of a job run at once, on
/// as many connections. Woken by NOTIFY on ``JobStore/channel`` and a poll.
final class JobRunner: Service, Sendable {
    private let store: JobStore
    private let wakeUps: AsyncStream<PostgresListenerEvent>?
    private let batchSize: Int
    private let parallel: Int
    private let pollInterval: Duration
    private let lease: Double
    private let logger: Logger
    private let metrics: RelayMetrics
    /// Times the poll and the wait before a failed batch is tried again.
    private let clock: RelayClock
    let owner: String

    init(
        store: JobStore,
        wakeUps: AsyncStream<PostgresListenerEvent>?,
        settings: JobSettings,
        metrics: RelayMetrics = RelayMetrics(),
        logger: Logger,
        clock: RelayClock = .system
    ) {
        self.clock = clock
        self.metrics = metrics
        self.store = store
        self.wakeUps = wakeUps
        parallel = settings.parallelBatches
        batchSize = settings.batchSize
        pollInterval = settings.pollInterval
        lease = settings.lease.timeInterval
        self.logger = logger
        owner = leaseOwnerName(role: "jobs")
    }

    func run() async throws {
        let doorbell = Doorbell()
        await withTaskGroup(of: Void.self) { group in
            if let wakeUps {
                group.addTask {
                    for await _ in wakeUps { doorbell.ring() }
                }
            }
            group.addTask { [pollInterval, clock] in
                while !Task.isCancelled {
                    try? await clock.sleep(for: pollInterval)
                    doorbell.ring()
                }
            }
            doorbell.ring()
            // A job stops between batches on shutdown; its lease lets the next start resume it.
            await cancelWhenGracefulShutdown {
                for await _ in doorbell.rings {
                    while !Task.isCancelled, await self.runOne() {}
                }
            }
            doorbell.close()
            group.cancelAll()
        }
    }

    /// Runs one job to its end (or until shutdown); false when there was none.
    private func runOne() async -> Bool {
        let claimed: JobStore.Claimed?
        do {
            claimed = try await store.claim(owner: owner, lease: lease, batchSize: batchSize)
        } catch {
            logger.log(
                level: PostgresError.logLevel(for: error),
                "claiming a job failed",
                metadata: PostgresError.metadata(error)
            )
            return false
        }
        guard let job = claimed else { return false }
        let starts = stride(from: 1, through: max(job.total, 1), by: job.batchSize).filter { !job.done.contains($0) }
        logger.info(
            "bulk-unregister job running",
            metadata: [
                "push.job": "\(job.id)", "push.app": "\(job.app)", "push.batches_left": "\(starts.count)",
                "push.batches_done": "\(job.done.count)",
            ]
        )
        let queue = BatchQueue()
        await withTaskGroup(of: Void.self) { workers in
            for _ in 0..<min(parallel, starts.count) {
                workers.addTask { await self.work(on: job, starts: starts, queue: queue) }
            }
        }
        let (next, stopped) = queue.state.withLock { ($0.next, $0.stopped) }
        if stopped {
            logger.info("bulk-unregister job stopped (cancelled or taken over)", metadata: ["push.job": "\(job.id)"])
            return true
        }
        guard !Task.isCancelled, next >= starts.count else { return false }
        do {
            try await store.finish(job.id, owner: owner, status: .succeeded)
            logger.info(
                "bulk-unregister job succeeded",
                metadata: ["push.job": "\(job.id)", "push.lines": "\(job.total)"]
            )
        } catch {
            logger.log(
                level: PostgresError.logLevel(for: error),
                "marking a job finished failed",
                metadata: PostgresError.metadata(error, ["push.job": "\(job.id)"])
            )
        }
        return true
    }

    /// One worker: runs the next batch of `job` until none is left, the job stops or shutdown.
    private func work(on job: JobStore.Claimed, starts: [Int], queue: BatchQueue) async {
        while !Task.isCancelled {
            let index = queue.state.withLock { state -> Int? in
                guard !state.stopped, state.next < starts.count else { return nil }
                defer { state.next += 1 }
                return state.next
            }
            guard let index else { return }
            await runBatch(of: job, first: starts[index], queue: queue)
        }
    }

    /// Runs one batch, again a second after each failure until it runs or shutdown; a job that
    /// stopped (cancelled, or taken over by another instance) stops the queue.
    private func runBatch(of job: JobStore.Claimed, first: Int, queue: BatchQueue) async {
        while !Task.isCancelled {
            do {
                let ran = try await store.runBatch(
                    job: job.id,
                    app: job.app,
                    propagate: job.propagate,
                    first: first,
                    size: job.batchSize,
                    owner: owner,
                    lease: lease
                )
                if let ran {
                    metrics.bulkUnregister(app: job.app, removed: ran.removed, notFound: ran.lines - ran.removed)
                } else {
                    queue.state.withLock { $0.stopped = true }
                }
                return
            } catch {
                if Task.isCancelled { return }
                logger.log(
                    level: PostgresError.logLevel(for: error),
                    "a bulk-unregister batch failed; retrying",
                    metadata: PostgresError.metadata(error, ["push.job": "\(job.id)"])
                )
                try? await clock.sleep(for: .seconds(1))
            }
        }
    }
}

/// The batches of one run, handed out to the workers in order.
private final class BatchQueue: Sendable {
    let state = Mutex((next: 0, stopped: false))
}
