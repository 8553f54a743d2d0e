import Foundation
import Logging
import Postgres
import ServiceLifecycle
import Synchronization

/// Why a webhook was not stored; nothing of it was.
enum IntakeError: Error, Sendable {
    /// The relay is shutting down and takes no more webhooks.
    case shuttingDown
    /// The database cannot be reached (or is read-only, restarting, failing over).
    case databaseUnavailable(PostgresError)
    /// The webhook holds a value the database refuses (a data exception of this webhook alone).
    case unstorable(PostgresError)
}

/// Stores webhooks with group commit.
///
/// Each request hands its webhook to ``submit(_:)`` and waits. The writer takes everything queued,
/// up to `maxBatch`, and stores the whole batch with one SQL statement (``DeliveryQueue/enqueue(_:reservation:)``,
/// its own transaction), so many concurrent webhooks share one WAL flush while `synchronous_commit`
/// stays on. Up to `maxConcurrentWrites` batches are in flight at once, and one starts beside those
/// in flight only once each has taken `overlapAfter`: a commit that takes its usual time is waited
/// for, a slow one does not hold the next batch back longer than that. Meanwhile new webhooks pile
/// up and form the next, larger batch (fewer statements per webhook: PostgreSQL's and the relay's
/// CPU per webhook go down). A caller is answered only after its batch has
/// committed. If the statement fails because of one webhook's data (a data exception), the batch is
/// split and its halves stored apart until only that webhook fails; any other failure fails the
/// whole batch and stores nothing of it.
///
/// Pacing: while this instance's dispatcher has more than `paceWaiting` deliveries waiting for a
/// sender (delivery has fallen behind intake, on a machine whose cores both share), the writer
/// holds the next batch back, up to `paceMaxWait`, and the webhooks wait unacknowledged in its
/// queue instead of waiting, stored, for a sender. So on a saturated instance the time from a
/// webhook's commit to its push stays short, batches grow (fewer commits per webhook), and nothing
/// is held longer than `paceMaxWait`: a provider that hangs slows intake by at most that per batch.
final class IntakeWriter: Service, Sendable {
    /// Who is told when a webhook is committed or failed: a task waiting in ``submit(_:)``, or a
    /// callback (``submit(_:completion:)``, for the event loop's ``WebhookShortcut``).
    private enum Waiter: Sendable {
        case task(CheckedContinuation<IntakeReceipt, any Error>)
        case callback(@Sendable (Result<IntakeReceipt, any Error>) -> Void)

        func resume(returning receipt: IntakeReceipt) {
            switch self {
            case .task(let continuation): continuation.resume(returning: receipt)
            case .callback(let callback): callback(.success(receipt))
            }
        }

        func resume(throwing error: any Error) {
            switch self {
            case .task(let continuation): continuation.resume(throwing: error)
            case .callback(let callback): callback(.failure(error))
            }
        }
    }

    private struct State {
        var queue: [(item: IntakeItem, waiter: Waiter)] = []
        var accepting = true
    }

    private let queue: DeliveryQueue
    private let logger: Logger
    private let maxBatch: Int
    private let maxConcurrentWrites: Int
    private let state = Mutex(State())
    private let doorbell = Doorbell()
    /// This instance's dispatcher, which takes fresh deliveries straight from intake; `nil` when
    /// this instance does not deliver.
    private let dispatcher: Dispatcher?
    private let paceWaiting: Int
    private let paceMaxWait: Duration
    /// How long the writes in flight must have taken before another starts beside them.
    private let overlapAfter: Duration
    /// Times the writes for ``overlapAfter`` and the pacing's wait.
    private let clock: RelayClock
    /// The wait for ``overlapAfter``, ended at shutdown.
    private let overlapTimer: Pauses

    /// `settings` gives the batch size, the group commits in flight and when another may start
    /// beside them, and the pacing (which needs `dispatcher`, whose waiting deliveries it counts).
    init(
        queue: DeliveryQueue,
        logger: Logger,
        settings: WebhookSettings = WebhookSettings(),
        dispatcher: Dispatcher? = nil,
        clock: RelayClock = .system
    ) {
        self.clock = clock
        overlapTimer = Pauses(clock: clock)
        self.overlapAfter = max(.zero, settings.concurrentWriteAfter)
        self.dispatcher = dispatcher
        self.paceWaiting = settings.paceWaitingDeliveries
        self.paceMaxWait = settings.paceMaxWait
        self.queue = queue
        self.logger = logger
        self.maxBatch = max(1, settings.batchSize)
        self.maxConcurrentWrites = max(1, settings.concurrentWrites)
    }

    /// Queues a webhook and returns once it is committed.
    /// - Throws: ``IntakeError``, or the database's error when the batch failed otherwise.
    func submit(_ item: IntakeItem) async throws -> IntakeReceipt {
        try await withCheckedThrowingContinuation { continuation in
            enqueue(item, .task(continuation))
        }
    }

    /// Queues a webhook; `completion` is called once it is committed or has failed (with
    /// ``IntakeError`` or the database's error), on the writer's task, so it must only hand the
    /// result on (to an event loop, say).
    func submit(_ item: IntakeItem, completion: @escaping @Sendable (Result<IntakeReceipt, any Error>) -> Void) {
        enqueue(item, .callback(completion))
    }

    private func enqueue(_ item: IntakeItem, _ waiter: Waiter) {
        let accepted = state.withLock { state in
            guard state.accepting else { return false }
            state.queue.append((item, waiter))
            return true
        }
        if accepted {
            doorbell.ring()
        } else {
            waiter.resume(throwing: IntakeError.shuttingDown)
        }
    }

    /// What a child task of ``run()`` reports when it ends.
    private enum Finished: Sendable {
        /// A batch's write, started at that instant, is over.
        case write(started: ContinuousClock.Instant)
        /// A wait for ``overlapAfter`` is over.
        case timer
    }

    /// Writes batches until graceful shutdown, then writes what is still queued and stops.
    func run() async throws {
        await withTaskGroup(of: Finished.self) { group in
            // When each write in flight started.
            var writing: [ContinuousClock.Instant] = []
            var timerPending = false
            func reap(_ finished: Finished?) {
                switch finished {
                case .write(let started):
                    if let index = writing.firstIndex(of: started) { writing.remove(at: index) }
                case .timer: timerPending = false
                case nil: break
                }
            }
            // The doorbell ends on graceful shutdown; anything queued after that is still written.
            await withGracefulShutdownHandler {
                for await _ in doorbell.rings {
                    while hasQueued() {
                        // A slot first, then the batch: what arrives while the writer waits for a
                        // slot joins the next batch, instead of waiting behind one taken early.
                        // With no write in flight a batch starts at once; with some, only once
                        // each has taken `overlapAfter` (and a slot is free), so a commit that
                        // takes its usual time is waited for and the next batch grows, while a
                        // slow one holds the next back for no longer than that.
                        while let newest = writing.max() {
                            let due = newest + overlapAfter
                            if writing.count < maxConcurrentWrites, due <= clock.now() { break }
                            if writing.count < maxConcurrentWrites, !timerPending {
                                timerPending = true
                                group.addTask {
                                    await self.overlapTimer.sleep(until: due)
                                    return .timer
                                }
                            }
                            reap(await group.next())
                        }
                        await pace()
                        guard let batch = takeBatch() else { break }
                        let started = clock.now()
                        writing.append(started)
                        group.addTask {
                            await self.write(batch)
                            return .write(started: started)
                        }
                    }
                }
            } onGracefulShutdown: {
                self.doorbell.close()
            }
            overlapTimer.end()
            state.withLock { $0.accepting = false }
            while let batch = takeBatch() {
                group.addTask {
                    await self.write(batch)
                    return .write(started: self.clock.now())
                }
            }
            await group.waitForAll()
        }
    }

    private func hasQueued() -> Bool {
        state.withLock { !$0.queue.isEmpty }
    }

    /// Waits while the dispatcher has more than `paceWaiting` deliveries waiting for a sender, up
    /// to `paceMaxWait` (see the type's comment).
    private func pace() async {
        guard let dispatcher, paceWaiting > 0, paceMaxWait > .zero, dispatcher.waitingForSenders > paceWaiting else {
            return
        }
        let deadline = clock.now() + paceMaxWait
        while dispatcher.waitingForSenders > paceWaiting, clock.now() < deadline {
            try? await clock.sleep(for: .milliseconds(1))
        }
    }

    private func takeBatch() -> [(item: IntakeItem, waiter: Waiter)]? {
        state.withLock { state in
            guard !state.queue.isEmpty else { return nil }
            let count = min(maxBatch, state.queue.count)
            let batch = Array(state.queue.prefix(count))
            state.queue.removeFirst(count)
            return batch
        }
    }

    private func write(_ batch: [(item: IntakeItem, waiter: Waiter)]) async {
        let items = batch.map(\.item)
        // Room in this instance's dispatcher: those deliveries are stored claimed and started at once.
        let reservation = dispatcher.map { dispatcher in
            var wanted: [String: Int] = [:]
            for item in items { wanted[item.appID, default: 0] += item.notification.devices.count }
            return dispatcher.reserve(wanted)
        }
        let stored: (receipts: [IntakeReceipt], claimed: [ClaimedDelivery])
        do {
            stored = try await queue.enqueue(items, reservation: reservation)
        } catch {
            if let reservation { dispatcher?.cancel(reservation) }
            let postgres = error as? PostgresError
            if batch.count > 1, postgres?.isDataException == true {
                // One member's data failed the statement for everyone: store the halves apart, so
                // the others commit and only the member at fault fails (for one such member, about
                // 2·log2(batch) more statements, on a path valid input never takes).
                logger.warning(
                    "a webhook batch failed on a value of one of its webhooks; storing its halves separately",
                    metadata: PostgresError.metadata(error, ["push.batch_size": "\(batch.count)"])
                )
                let half = batch.count / 2
                await write(Array(batch[..<half]))
                await write(Array(batch[half...]))
                return
            }
            // An unavailable database is logged once by the pool, when the fault begins.
            logger.log(
                level: postgres?.isUnavailable == true ? .debug : .warning,
                "storing a webhook batch failed",
                metadata: PostgresError.metadata(error, ["push.batch_size": "\(batch.count)"])
            )
            let failure: any Error =
                if let postgres, postgres.isUnavailable {
                    IntakeError.databaseUnavailable(postgres)
                } else if let postgres, postgres.isDataException {
                    IntakeError.unstorable(postgres)
                } else {
                    error
                }
            for entry in batch { entry.waiter.resume(throwing: failure) }
            return
        }
        for (entry, receipt) in zip(batch, stored.receipts) { entry.waiter.resume(returning: receipt) }
        if let reservation { dispatcher?.handOff(stored.claimed, from: reservation) }
    }
}
