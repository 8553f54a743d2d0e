import Foundation
import Logging
import Postgres
import ServiceLifecycle
import Synchronization

/// Sends queued deliveries to APNs and FCM.
///
/// The table is the truth. The dispatcher claims due rows per app through the outbox
/// (``DeliveryQueue/claim(apps:limits:owner:lease:)``: `FOR UPDATE SKIP LOCKED`, marked `sending`
/// under a lease, so a crashed instance's claims come due again), queues them per app and platform
/// for as many sender tasks as the provider's HTTP/2 client has streams, and writes the outcomes
/// back in batches. It looks for work when intake sends a NOTIFY, when a send frees room in a full
/// app, and every `pollInterval` (retries come due that way).
///
/// Fast path: intake reserves room here (``reserve(_:)``), stores those deliveries already claimed
/// for this instance in the same transaction as the webhook, and hands them over
/// (``handOff(_:from:)``) after the commit, so a fresh push costs no claim query. The lease covers
/// them as it covers claimed rows: if this instance dies, they come due again.
///
/// On graceful shutdown it stops claiming, lets in-flight sends finish, writes their outcomes, then
/// closes the provider connections.
///
/// This type is the I/O shell: every decision (what to claim, which delivery a sender takes, what
/// an answer means, shutdown) is made by ``StateMachine``, which it holds under a lock.
final class Dispatcher: Service, Sendable {
    private let queue: DeliveryQueue
    private let providers: ProviderSet
    private let settings: DeliverySettings
    private let wakeUps: AsyncStream<PostgresListenerEvent>?
    private let metrics: RelayMetrics
    private let logger: Logger
    /// This instance's name in `lease_owner`.
    let owner: String
    private let machine: Mutex<StateMachine>
    /// The state machine's outcome rules, used without its lock.
    private let rules: OutcomeRules
    private let doorbell = Doorbell()
    private let writerBell = Doorbell()
    /// Times the poll and the spacing of outcome writes.
    private let clock: RelayClock
    /// The outcome writer's wait between writes, ended at shutdown.
    private let spacing: Pauses
    /// The event types each app wants, written with the outcomes.
    private let events: Mutex<[String: Set<DeliveryEventType>]>

    init(
        queue: DeliveryQueue,
        providers: ProviderSet,
        settings: DeliverySettings,
        apps: [String],
        wakeUps: AsyncStream<PostgresListenerEvent>?,
        events: [String: Set<DeliveryEventType>] = [:],
        metrics: RelayMetrics = RelayMetrics(),
        logger: Logger,
        clock: RelayClock = .system
    ) {
        self.clock = clock
        spacing = Pauses(clock: clock)
        self.events = Mutex(events)
        self.metrics = metrics
        self.queue = queue
        self.providers = providers
        self.settings = settings
        self.wakeUps = wakeUps
        self.logger = logger
        owner = leaseOwnerName(role: "delivery")
        let machine = StateMachine(settings: settings, apps: apps)
        rules = machine.rules
        self.machine = Mutex(machine)
    }

    /// A reload: from now on, claims are for `apps` and outcomes write the event types in `events`.
    /// Deliveries already claimed for an app no longer listed are sent again later (``deliver(_:)``).
    func update(apps: [String], events: [String: Set<DeliveryEventType>]) {
        self.events.withLock { $0 = events }
        machine.withLock { $0.apps = apps }
        wantClaim()
    }

    func run() async throws {
        guard settings.enabled else {
            try? await gracefulShutdown()
            await providers.shutdown()
            return
        }
        await withTaskGroup(of: Void.self) { helpers in
            // Wake-ups: NOTIFY from intake (and a re-read whenever the listener reconnects) ...
            if let wakeUps {
                helpers.addTask {
                    for await _ in wakeUps { self.wantClaim() }
                }
            }
            // ... and the poll, which is what brings retries back, then the sweep, which brings
            // back the deliveries a dead instance held from intake (its NOTIFY wakes the claims).
            // The claim first: a long sweep (the first after migration 0015 visits every old row)
            // does not hold retries back.
            helpers.addTask { [settings, clock] in
                while !Task.isCancelled {
                    try? await clock.sleep(for: settings.pollInterval)
                    self.wantClaim()
                    await self.sweep()
                }
            }
            async let writer: Void = writeResults()
            doorbell.ring()

            await withDiscardingTaskGroup { sends in
                await withGracefulShutdownHandler {
                    for await _ in doorbell.rings {
                        startSenders(into: &sends)
                        await claimAndSend(into: &sends)
                    }
                } onGracefulShutdown: {
                    let (claimed, waiting) = self.machine.withLock { machine in
                        machine.beginShutdown()
                        return (machine.inFlight.values.reduce(0, +), machine.waitingTotal)
                    }
                    // After the phase changed: a send answered from now on frees no sender for what waits.
                    self.logger.info(
                        "shutting down: the sends in flight finish, the deliveries waiting for a sender are handed back",
                        metadata: ["push.deliveries": "\(claimed)", "push.waiting": "\(waiting)"]
                    )
                    self.doorbell.close()
                }
                // Intake stops before the dispatcher, so nothing is handed over after this; these
                // senders hand back what still waits.
                startSenders(into: &sends)
                // Leaving the group waits for the sends in flight.
            }
            // The writer stores what is left (without its spacing), then the wake-up tasks are stopped.
            writerBell.close()
            spacing.end()
            await writer
            helpers.cancelAll()
        }
        await providers.shutdown()
    }

    /// Claims due deliveries for every app with room when a claim is wanted, and starts their
    /// senders; repeats while a claim comes back full.
    private func claimAndSend(into sends: inout DiscardingTaskGroup) async {
        guard machine.withLock({ $0.startClaiming() }) else { return }
        while let request = machine.withLock({ $0.claimRequest() }) {
            let claimed: [ClaimedDelivery]
            do {
                claimed = try await queue.claim(
                    apps: request.apps,
                    limits: request.limits,
                    owner: owner,
                    lease: settings.lease
                )
            } catch {
                logger.log(
                    level: PostgresError.logLevel(for: error),
                    "claiming deliveries failed; trying again at the next poll",
                    metadata: PostgresError.metadata(error)
                )
                return
            }
            let again = machine.withLock { $0.claimed(claimed, for: request) }
            startSenders(into: &sends)
            if !again { return }
        }
    }

    /// Makes due the deliveries that were stored claimed at intake and whose lease ended with them
    /// still unsent (``DeliveryQueue/sweep(upTo:limit:)``), a statement at a time while one comes
    /// back full.
    private func sweep() async {
        do {
            let cutoff = try await queue.sweepCutoff()
            var madeDue = 0
            while true {
                let pass = try await queue.sweep(upTo: cutoff)
                madeDue += pass.madeDue
                if pass.visited < DeliveryQueue.sweepLimit || Task.isCancelled { break }
            }
            if madeDue > 0 {
                logger.notice(
                    "deliveries whose lease ended unsent are due again",
                    metadata: ["deliveries": "\(madeDue)"]
                )
            }
        } catch is CancellationError {
            // Shutdown: the next instance's sweep will do it.
        } catch {
            logger.log(
                level: PostgresError.logLevel(for: error),
                "sweeping ended leases failed; trying again at the next poll",
                metadata: PostgresError.metadata(error)
            )
        }
    }

    private func startSenders(into sends: inout DiscardingTaskGroup) {
        for line in machine.withLock({ $0.takeSendersToStart() }) {
            sends.addTask { await self.send(line) }
        }
    }

    /// Reserves room for fresh deliveries of each app (`wanted[app]` of them) that intake will
    /// store already claimed for this instance. Each granted slot must be handed over or given back
    /// with ``handOff(_:from:)`` or ``cancel(_:)``.
    func reserve(_ wanted: [String: Int]) -> DeliveryReservation {
        var granted: [String: Int] = [:]
        machine.withLock { machine in
            for (app, count) in wanted {
                let room = machine.reserve(app: app, count: count)
                if room > 0 { granted[app] = room }
            }
        }
        return DeliveryReservation(owner: owner, lease: settings.lease, granted: granted)
    }

    /// Starts the deliveries intake stored claimed under `reservation`, and gives back the slots
    /// it did not use.
    func handOff(_ deliveries: [ClaimedDelivery], from reservation: DeliveryReservation) {
        var unused = reservation.granted
        for delivery in deliveries { unused[delivery.appID, default: 0] -= 1 }
        let ring = machine.withLock { machine in
            machine.handOff(deliveries)
            return unused.reduce(false) { machine.release(app: $1.key, count: $1.value) || $0 }
        }
        if ring || !deliveries.isEmpty { doorbell.ring() }
    }

    /// Deliveries claimed by this instance and waiting for a sender, over every line.
    var waitingForSenders: Int { machine.withLock { $0.waitingTotal } }

    /// Deliveries this instance claimed (or reserved for intake) and has not finished, per app (an
    /// app may show 0); the console's queue depth, through `instance_queue`
    /// (``ActivityWriter/report(_:)`` keeps the apps with any).
    var inFlightByApp: [String: Int] { machine.withLock { $0.inFlight } }

    /// Gives back a whole reservation (its webhooks were not stored).
    func cancel(_ reservation: DeliveryReservation) {
        handOff([], from: reservation)
    }

    /// Rings for a claim query.
    private func wantClaim() {
        machine.withLock { $0.wantClaim() }
        doorbell.ring()
    }

    /// One sender: delivers the line's waiting deliveries, oldest first, until none is left. What
    /// it may not send (past its send window, or at shutdown) it hands back; see ``StateMachine``.
    private func send(_ line: Line) async {
        var lapsed = 0
        var handedBack = 0
        while true {
            switch machine.withLock({ $0.nextSend(on: line, now: .now, date: clock.date()) }) {
            case .stop:
                if lapsed > 0 {
                    logger.warning(
                        "claimed deliveries waited for a sender longer than their lease allows; handed back to be claimed again",
                        metadata: [
                            "push.app": "\(line.app)", "push.platform": "\(line.platform.rawValue)",
                            "push.deliveries": "\(lapsed)",
                        ]
                    )
                }
                if handedBack > 0 {
                    logger.notice(
                        "shutting down: deliveries still waiting for a sender handed back",
                        metadata: [
                            "push.app": "\(line.app)", "push.platform": "\(line.platform.rawValue)",
                            "push.deliveries": "\(handedBack)",
                        ]
                    )
                }
                return
            case .handBack(let result):
                if result.outcome == .lapsed { lapsed += 1 } else { handedBack += 1 }
                finish(result)
            case .send(let delivery):
                await deliver(delivery)
            }
        }
    }

    private func deliver(_ delivery: ClaimedDelivery) async {
        let provider = providers.provider(app: delivery.appID, platform: delivery.platform)
        if provider == nil, !providers.knows(app: delivery.appID) {
            // The app was removed by a reload after this was claimed: keep it, as a credential
            // problem is kept (no attempt counted), in case the app comes back.
            let outcome = PushOutcome.credential(
                reason: "the app is not configured (removed by a reload)",
                refreshToken: false
            )
            finish(rules.decide(delivery, outcome, now: clock.date(), jitter: .random(in: 0...1)))
            return
        }
        if let result = rules.preflight(delivery, now: clock.date(), hasProvider: provider != nil) {
            finish(result)
            return
        }
        let answer = await provider!.send(delivery, deadline: settings.sendDeadline(claimedAt: delivery.claimedAt))
        let result = rules.decide(delivery, answer, now: clock.date(), jitter: .random(in: 0...1))
        result.log(to: logger)
        finish(result)
    }

    /// Counts the outcome, frees the delivery's slot and queues its row's update.
    private func finish(_ result: DeliveryResult) {
        // Queued for the writer before it is counted: an outcome the metric shows is on its way to the table.
        let claim = machine.withLock { $0.finished(result) }
        metrics.delivery(
            app: result.delivery.appID,
            platform: result.delivery.platform.rawValue,
            outcome: result.outcome
        )
        if result.outcome == .credential {
            metrics.activity.credentialRejected(
                app: result.delivery.appID,
                platform: result.delivery.platform.rawValue,
                reason: result.reason ?? ""
            )
        }
        if result.outcome == .delivered {
            metrics.deliveredAfter(
                app: result.delivery.appID,
                .seconds(max(0, clock.date().timeIntervalSince(result.delivery.createdAt)))
            )
        }
        writerBell.ring()
        if claim { doorbell.ring() }
    }

    // MARK: - Writing outcomes

    /// Writes outcomes as they come, many per transaction, until the sends are over. The first
    /// outcome after a quiet time is written at once; after each write the writer waits
    /// ``DeliverySettings/outcomeWriteInterval`` before the next, so under load the outcomes of that
    /// time go in one statement. Shutdown writes what is left without waiting.
    private func writeResults() async {
        for await _ in writerBell.rings {
            await flush(spaced: true)
        }
        await flush(spaced: false)
    }

    private func flush(spaced: Bool) async {
        var failures = 0
        while true {
            let batch = machine.withLock { $0.takeUnwritten(max: 2000) }
            guard !batch.isEmpty else { return }
            do {
                try await queue.store(batch, owner: owner, events: events.withLock { $0 })
                failures = 0
            } catch {
                machine.withLock { $0.writeFailed(batch) }
                failures += 1
                logger.log(
                    level: PostgresError.logLevel(for: error),
                    "writing delivery outcomes failed; retrying",
                    metadata: PostgresError.metadata(error, ["push.outcomes": "\(batch.count)"])
                )
                if failures >= 30 { return }
                try? await clock.sleep(for: .seconds(1))
                continue
            }
            if spaced && settings.outcomeWriteInterval > .zero {
                await spacing.sleep(for: settings.outcomeWriteInterval)
            }
        }
    }
}
