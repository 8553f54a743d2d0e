import Foundation
import Logging
import Postgres
import ServiceLifecycle

/// Runs bulk-unregister jobs: any instance may take a runnable job (`FOR UPDATE SKIP LOCKED`, with
/// a lease renewed by every batch), so a job whose instance died is resumed by another (or the same,
/// restarted) from the last committed batch. Woken by NOTIFY on ``JobStore/channel`` and a poll.
final class JobRunner: Service, Sendable {
    private let store: JobStore
    private let wakeUps: AsyncStream<PostgresListenerEvent>?
    private let batchSize: Int
    private let pollInterval: Duration
    private let lease: Double
    private let logger: Logger
    let owner: String

    init(store: JobStore, wakeUps: AsyncStream<PostgresListenerEvent>?, batchSize: Int, pollInterval: Duration, lease: Double, logger: Logger) {
        self.store = store
        self.wakeUps = wakeUps
        self.batchSize = max(1, batchSize)
        self.pollInterval = pollInterval
        self.lease = lease
        self.logger = logger
        owner = "\(ProcessInfo.processInfo.hostName.prefix(40))-\(getpid())-jobs-\(UInt32.random(in: 0...UInt32.max))"
    }

    func run() async throws {
        let (doorbell, ring) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        await withTaskGroup(of: Void.self) { group in
            if let wakeUps {
                group.addTask {
                    for await _ in wakeUps { ring.yield() }
                }
            }
            group.addTask { [pollInterval] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: pollInterval)
                    ring.yield()
                }
            }
            ring.yield()
            // A job stops between batches on shutdown; its lease lets the next start resume it.
            await cancelWhenGracefulShutdown {
                for await _ in doorbell {
                    while !Task.isCancelled, await self.runOne() {}
                }
            }
            ring.finish()
            group.cancelAll()
        }
    }

    /// Runs one job to its end (or until shutdown); false when there was none.
    private func runOne() async -> Bool {
        let claimed: (id: UUID, app: String, propagate: Bool, processed: Int)?
        do {
            claimed = try await store.claim(owner: owner, lease: lease)
        } catch {
            logger.warning("claiming a job failed", metadata: ["error": "\(error)"])
            return false
        }
        guard let job = claimed else { return false }
        var processed = job.processed
        logger.info("bulk-unregister job running", metadata: ["push.job": "\(job.id)", "push.app": "\(job.app)", "push.from_line": "\(processed)"])
        while !Task.isCancelled {
            do {
                guard
                    let next = try await store.runBatch(
                        job: job.id, app: job.app, propagate: job.propagate, after: processed, size: batchSize, owner: owner, lease: lease
                    )
                else {
                    logger.info("bulk-unregister job stopped (cancelled or taken over)", metadata: ["push.job": "\(job.id)"])
                    return true
                }
                if next == processed {
                    try await store.finish(job.id, owner: owner, status: "succeeded")
                    logger.info("bulk-unregister job succeeded", metadata: ["push.job": "\(job.id)", "push.lines": "\(processed)"])
                    return true
                }
                processed = next
            } catch {
                if Task.isCancelled { break }
                logger.warning("a bulk-unregister batch failed; retrying", metadata: ["push.job": "\(job.id)", "error": "\(error)"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
        return false
    }
}
