import Configuration
import Foundation
import TestSupport
import Testing

@testable import PushRelay

/// The dispatcher's decisions, driven through its state machine alone: no database, no network,
/// no clock (times are passed in).
@Suite("Dispatcher state machine")
struct DispatcherStateMachineTests {
    typealias Machine = Dispatcher.StateMachine
    typealias Line = Dispatcher.Line

    /// The defaults, changed by `change`.
    static func settings(_ change: (inout DeliverySettings) -> Void = { _ in }) -> DeliverySettings {
        var settings = DeliverySettings()
        change(&settings)
        return settings
    }

    /// Settings read from `values` under `delivery.*`, as `serve` reads them.
    static func read(_ values: [String: Int] = [:]) -> DeliverySettings {
        var config: [AbsoluteConfigKey: ConfigValue] = [:]
        for (key, value) in values { config[AbsoluteConfigKey(stringLiteral: key)] = .init(.int(value), isSecret: false) }
        return DeliverySettings(config: ConfigReader(provider: InMemoryProvider(values: config)))
    }

    static let epoch = Date(timeIntervalSince1970: 1_800_000_000)
    static let start = ContinuousClock.now

    static func delivery(
        _ id: Int64,
        app: String = "support",
        platform: Platform = .ios,
        attempts: Int = 1,
        createdAt: Date = epoch,
        active: Bool = true,
        claimedAt: ContinuousClock.Instant = start
    ) -> ClaimedDelivery {
        ClaimedDelivery(
            id: id,
            appID: app,
            token: "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6",
            platform: platform,
            kind: .alert,
            attempts: attempts,
            createdAt: createdAt,
            ticketID: "4711",
            title: "Re: printer",
            body: "It works now",
            environment: nil,
            deviceActive: active,
            badge: 1,
            claimedAt: claimedAt
        )
    }

    // MARK: Claiming

    @Test("one wake-up gives one round of claims: every app with room, at most a batch each, and again only while claims come back full")
    func claimRounds() {
        var machine = Machine(
            settings: Self.settings {
                $0.batchSize = 3
                $0.maxInFlightPerApp = 5
            },
            apps: ["a", "b"]
        )
        let firstLook = machine.startClaiming()
        #expect(firstLook)
        let secondLook = machine.startClaiming()
        #expect(!secondLook, "the wish is taken by the first look")
        let request = machine.claimRequest()
        #expect(request == .init(apps: ["a", "b"], limits: [3, 3]))

        // Full: both apps gave a whole batch, so claim again; now a has room for 2, b for 2.
        let full = [1, 2, 3].map { Self.delivery($0, app: "a") } + [4, 5, 6].map { Self.delivery($0, app: "b") }
        let claimAgain = machine.claimed(full, for: request!)
        #expect(claimAgain)
        #expect(machine.claimRequest() == .init(apps: ["a", "b"], limits: [2, 2]))

        // Short: fewer than asked, nothing more is due.
        let claimAgainAfterShort = machine.claimed([Self.delivery(7, app: "a")], for: .init(apps: ["a", "b"], limits: [2, 2]))
        #expect(!claimAgainAfterShort)
        #expect(machine.inFlight == ["a": 4, "b": 3])

        machine.wantClaim()
        let lookAfterWakeUp = machine.startClaiming()
        #expect(lookAfterWakeUp)
    }

    @Test("an app at max_in_flight_per_app is left out of claims until one of its deliveries finishes, which asks for a claim")
    func fullAppWaitsForRoom() {
        var machine = Machine(
            settings: Self.settings {
                $0.batchSize = 10
                $0.maxInFlightPerApp = 2
            },
            apps: ["a", "b"]
        )
        _ = machine.startClaiming()
        let request = machine.claimRequest()!
        _ = machine.claimed([Self.delivery(1, app: "a"), Self.delivery(2, app: "a")], for: request)
        #expect(machine.claimRequest() == .init(apps: ["b"], limits: [2]))
        let lookWhileFull = machine.startClaiming()
        #expect(!lookWhileFull)

        let result = DeliveryResult(delivery: Self.delivery(1, app: "a"), status: .delivered, outcome: .delivered)
        let freedAsks = machine.finished(result)
        #expect(freedAsks, "a was full: its freed slot asks for a claim")
        let lookAfterFree = machine.startClaiming()
        #expect(lookAfterFree)
        #expect(machine.claimRequest() == .init(apps: ["a", "b"], limits: [1, 2]))

        let other = DeliveryResult(delivery: Self.delivery(2, app: "a"), status: .delivered, outcome: .delivered)
        let roomyAsks = machine.finished(other)
        #expect(!roomyAsks, "a had room already")
    }

    @Test("senders per line: at most connections × streams start; the rest of the deliveries wait on the line, oldest first")
    func sendersPerLine() {
        var machine = Machine(
            settings: Self.settings {
                $0.connectionsPerHost = 1
                $0.streamsPerConnection = 2
            },
            apps: ["a"]
        )
        let request = machine.claimRequest()!
        let claimed = (1...5).map { Self.delivery(Int64($0), app: "a", platform: $0 == 5 ? .android : .ios) }
        _ = machine.claimed(claimed, for: request)
        let ios = Line(app: "a", platform: .ios)
        let android = Line(app: "a", platform: .android)
        #expect(machine.takeSendersToStart() == [ios, ios, android])
        #expect(machine.takeSendersToStart().isEmpty)
        #expect(machine.waitingCount(on: ios) == 4)

        var sent: [Int64] = []
        while case .send(let delivery) = machine.nextSend(on: ios, now: Self.start, date: Self.epoch) { sent.append(delivery.id) }
        #expect(sent == [1, 2, 3, 4])
        #expect(machine.senders[ios] == 1, "the sender that found the line empty has ended")
    }

    // MARK: Hand-over from intake

    @Test("intake's reservations count against the app's room; unused slots are released; nothing is reserved for unknown apps")
    func reservations() {
        var machine = Machine(settings: Self.settings { $0.maxInFlightPerApp = 10 }, apps: ["a"])
        #expect(machine.reserve(app: "a", count: 7) == 7)
        #expect(machine.reserve(app: "a", count: 7) == 3)
        #expect(machine.reserve(app: "a", count: 1) == 0)
        #expect(machine.reserve(app: "elsewhere", count: 5) == 0)
        #expect(machine.claimRequest() == nil, "no app has room")

        machine.handOff([Self.delivery(1, app: "a"), Self.delivery(2, app: "a")])
        #expect(machine.takeSendersToStart() == [Line(app: "a", platform: .ios), Line(app: "a", platform: .ios)])
        let releaseAsks = machine.release(app: "a", count: 8)
        #expect(releaseAsks, "the app was full: releasing asks for a claim")
        #expect(machine.inFlight["a"] == 2)
        let emptyReleaseAsks = machine.release(app: "a", count: 0)
        #expect(!emptyReleaseAsks)
        #expect(machine.claimRequest() == .init(apps: ["a"], limits: [8]))
    }

    @Test("a reservation marks the first granted deliveries of each app claimed, in order")
    func reservationClaims() {
        let reservation = DeliveryReservation(owner: "me", lease: .seconds(60), granted: ["a": 2, "b": 1])
        #expect(reservation.claims(apps: ["a", "b", "a", "c", "a", "b"]) == [true, true, true, false, false, false])
    }

    // MARK: Send window

    @Test("a delivery that waited past its send window is handed back uncounted, due when its lease ends; one within it is sent")
    func sendWindow() {
        let settings = Self.settings {
            $0.lease = .seconds(60)
            $0.requestTimeout = .seconds(30)
        }
        #expect(settings.sendWindow == .seconds(30))
        var machine = Machine(settings: settings, apps: ["a"])
        machine.handOff([Self.delivery(1, app: "a"), Self.delivery(2, app: "a")])
        let line = Line(app: "a", platform: .ios)
        #expect(machine.nextSend(on: line, now: Self.start + .seconds(29), date: Self.epoch) == .send(Self.delivery(1, app: "a")))
        guard case .handBack(let result) = machine.nextSend(on: line, now: Self.start + .seconds(31), date: Self.epoch) else {
            Issue.record("expected a hand-back")
            return
        }
        #expect(result.outcome == .lapsed)
        #expect(result.status == .pending)
        #expect(!result.countsAttempt)
        #expect(result.nextAttemptAt == nil, "due when the lease would have ended")
    }

    // MARK: Shutdown

    @Test("shutdown: no claims or reservations; deliveries still waiting are handed back uncounted and due at once")
    func shutdown() {
        var machine = Machine(settings: Self.settings { $0.maxInFlightPerApp = 10 }, apps: ["a"])
        #expect(machine.reserve(app: "a", count: 1) == 1)
        machine.handOff([Self.delivery(1, app: "a")])
        machine.wantClaim()
        machine.beginShutdown()
        #expect(machine.phase == .stopping)
        let lookWhileStopping = machine.startClaiming()
        #expect(!lookWhileStopping)
        #expect(machine.claimRequest() == nil)
        #expect(machine.reserve(app: "a", count: 3) == 0)
        let now = Self.epoch.addingTimeInterval(5)
        guard case .handBack(let result) = machine.nextSend(on: Line(app: "a", platform: .ios), now: Self.start, date: now) else {
            Issue.record("expected a hand-back")
            return
        }
        #expect(result == .handedBack(Self.delivery(1, app: "a"), outcome: .handedBack, next: now, reason: nil))
        let finishAsksWhileStopping = machine.finished(result)
        #expect(!finishAsksWhileStopping, "no claims while stopping")
        #expect(machine.inFlight["a"] == 0)
        #expect(machine.nextSend(on: Line(app: "a", platform: .ios), now: Self.start, date: now) == .stop)
    }

    @Test("finished results wait to be written oldest first; a batch whose write failed goes back in front")
    func unwrittenResults() {
        var machine = Machine(settings: Self.settings { $0.maxInFlightPerApp = 10 }, apps: ["a"])
        let granted = machine.reserve(app: "a", count: 3)
        #expect(granted == 3)
        let results = (1...3).map { DeliveryResult(delivery: Self.delivery(Int64($0), app: "a"), status: .delivered, outcome: .delivered) }
        for result in results { _ = machine.finished(result) }
        let first = machine.takeUnwritten(max: 2)
        #expect(first.map(\.delivery.id) == [1, 2])
        machine.writeFailed(first)
        #expect(machine.takeUnwritten(max: 10).map(\.delivery.id) == [1, 2, 3])
        #expect(machine.takeUnwritten(max: 10).isEmpty)
        #expect(machine.inFlight["a"] == 0)
    }

    @Test("delivery.outcome_write_interval_ms: 10 ms unless set, 0 to 1000 ms")
    func outcomeWriteIntervalSetting() {
        #expect(Self.read().outcomeWriteInterval == .milliseconds(10))
        #expect(Self.read(["outcome_write_interval_ms": 0]).outcomeWriteInterval == .zero)
        #expect(Self.read(["outcome_write_interval_ms": 25]).outcomeWriteInterval == .milliseconds(25))
        #expect(Self.read(["outcome_write_interval_ms": -1]).outcomeWriteInterval == .zero)
        #expect(Self.read(["outcome_write_interval_ms": 5_000]).outcomeWriteInterval == .milliseconds(1000))
    }

    // MARK: Outcome rules

    @Test("before sending: an invalidated device is skipped, a delivery past max_age expires, an app without the platform's section fails")
    func preflight() {
        let machine = Machine(settings: Self.settings { $0.maxAge = .seconds(3600) }, apps: ["a"])
        let now = Self.epoch.addingTimeInterval(60)
        #expect(machine.rules.preflight(Self.delivery(1), now: now, hasProvider: true) == nil)
        #expect(machine.rules.preflight(Self.delivery(1, active: false), now: now, hasProvider: true)?.status == .skipped)
        let old = machine.rules.preflight(Self.delivery(1), now: Self.epoch.addingTimeInterval(3601), hasProvider: true)
        #expect(old?.status == .expired)
        #expect(old?.outcome == .expired)
        let unconfigured = machine.rules.preflight(Self.delivery(1, platform: .android), now: now, hasProvider: false)
        #expect(unconfigured?.status == .failed)
        #expect(unconfigured?.reason == "app has no fcm section configured")
    }

    @Test("retry: exponential backoff with equal jitter from delivery.retry_base_ms, never under Retry-After, counted as an attempt")
    func retryBackoff() {
        let machine = Machine(
            settings: Self.settings {
                $0.retryBase = .milliseconds(1000)
                $0.retryMax = .seconds(60)
                $0.maxAttempts = 12
            },
            apps: ["a"]
        )
        let now = Self.epoch.addingTimeInterval(10)
        func delay(attempt: Int, retryAfter: Int? = nil, jitter: Double) -> TimeInterval? {
            let result = machine.rules.decide(
                Self.delivery(1, attempts: attempt),
                .retry(reason: "InternalServerError", retryAfter: retryAfter),
                now: now,
                jitter: jitter
            )
            #expect(result.status == .pending)
            #expect(result.outcome == .retry)
            #expect(result.countsAttempt)
            #expect(result.reason == "InternalServerError")
            return result.nextAttemptAt?.timeIntervalSince(now)
        }
        #expect(delay(attempt: 1, jitter: 0) == 0.5)
        #expect(delay(attempt: 1, jitter: 1) == 1)
        #expect(delay(attempt: 3, jitter: 0) == 2)
        #expect(delay(attempt: 3, jitter: 1) == 4)
        #expect(delay(attempt: 10, jitter: 1) == 60, "capped at retry_max_seconds")
        #expect(delay(attempt: 1, retryAfter: 30, jitter: 0) == 30, "Retry-After is a floor")
        #expect(delay(attempt: 1, retryAfter: 10_000_000_000_000_000, jitter: 0) == 3600, "Retry-After counts up to delivery.max_retry_after_seconds")
    }

    @Test("a send's deadline is its lease less a tenth; a retry inside the send needs what a late first request gets, a request gets the time left")
    func sendDeadline() {
        let settings = Self.settings {
            $0.lease = .seconds(60)
            $0.requestTimeout = .seconds(30)
        }
        // The time left is read from this clock, which stands still.
        let time = ManualTime()
        let clock = RelayClock(time)
        let now = time.now
        let fresh = settings.sendDeadline(claimedAt: now, clock: clock)
        #expect(fresh.instant == now + .seconds(54))
        #expect(fresh.allowsRequest && fresh.allowsAnotherRequest)
        #expect(fresh.timeout() == .seconds(30))
        #expect(fresh.retryBudget == .seconds(24), "a send started at the end of its 30 s window has 24 s")
        let late = settings.sendDeadline(claimedAt: now - .seconds(35), clock: clock)
        #expect(late.allowsRequest)
        #expect(!late.allowsAnotherRequest, "19 s left, under the 24 s a late first request gets")
        #expect(late.timeout() == .seconds(19))
        #expect(late.timeout(.seconds(5)) == .seconds(5))
        let over = settings.sendDeadline(claimedAt: now - .seconds(60), clock: clock)
        #expect(!over.allowsRequest && !over.allowsAnotherRequest)
        #expect(over.timeout() == .seconds(-6), "the client turns a timeout under 1 ms into 1 ms, never into curl's 0 (no timeout)")
        // A lease shorter than two request timeouts (the delivery tests' 5 s and 10 s): retries need 2 s, not 10.
        let short = Self.settings {
            $0.lease = .seconds(5)
            $0.requestTimeout = .seconds(10)
        }.sendDeadline(claimedAt: now, clock: clock)
        #expect(short.retryBudget == .seconds(2))
        #expect(short.allowsAnotherRequest)
    }

    @Test("retry gives up: at max_attempts, or when the next try would come after max_age, the delivery expires")
    func retryExpires() {
        let machine = Machine(
            settings: Self.settings {
                $0.retryBase = .milliseconds(1000)
                $0.maxAttempts = 3
                $0.maxAge = .seconds(100)
            },
            apps: ["a"]
        )
        let now = Self.epoch.addingTimeInterval(10)
        let retry = PushOutcome.retry(reason: "ServiceUnavailable", retryAfter: nil)
        #expect(machine.rules.decide(Self.delivery(1, attempts: 2), retry, now: now, jitter: 0).outcome == .retry)
        let exhausted = machine.rules.decide(Self.delivery(1, attempts: 3), retry, now: now, jitter: 0)
        #expect(exhausted.status == .expired)
        #expect(exhausted.outcome == .expired)
        let late = machine.rules.decide(Self.delivery(1, attempts: 1), .retry(reason: "TooManyRequests", retryAfter: 95), now: now, jitter: 0)
        #expect(late.status == .expired, "due at 105 s, after the 100 s max age")
    }

    @Test("rejected credentials: the delivery waits delivery.credential_retry_seconds, its attempt not counted")
    func credentialWait() {
        let machine = Machine(settings: Self.settings { $0.credentialRetry = .seconds(90) }, apps: ["a"])
        let result = machine.rules.decide(
            Self.delivery(1),
            .credential(reason: "InvalidProviderToken", refreshToken: false),
            now: Self.epoch,
            jitter: 0.5
        )
        #expect(result.status == .pending)
        #expect(result.outcome == .credential)
        #expect(!result.countsAttempt)
        #expect(result.nextAttemptAt == Self.epoch.addingTimeInterval(90))
    }

    @Test("a dead token ends the delivery in status dead_token, with the provider's time; a reason quoting the token keeps it redacted")
    func deadToken() {
        let machine = Machine(settings: Self.settings(), apps: ["a"])
        let since = Self.epoch.addingTimeInterval(-3600)
        let delivery = Self.delivery(1)
        let result = machine.rules.decide(delivery, .deadToken(reason: "Unregistered", since: since), now: Self.epoch, jitter: 0)
        #expect(result.status == .deadToken)
        #expect(result.isDeadToken)
        #expect(result.deadSince == since)
        let quoting = machine.rules.decide(delivery, .permanent(reason: "bad token \(delivery.token)"), now: Self.epoch, jitter: 0)
        #expect(quoting.outcome == .failed)
        #expect(quoting.reason == "bad token \(Redaction.token(delivery.token))")
    }

    @Test("delivered keeps the provider's id and a learned environment; an unsendable request fails as unsendable")
    func deliveredAndUnsendable() {
        let machine = Machine(settings: Self.settings(), apps: ["a"])
        let delivered = machine.rules.decide(Self.delivery(1), .delivered(providerID: "id-1", environment: "sandbox"), now: Self.epoch, jitter: 0)
        #expect(
            delivered
                == DeliveryResult(
                    delivery: Self.delivery(1),
                    status: .delivered,
                    outcome: .delivered,
                    providerID: "id-1",
                    learnedEnvironment: "sandbox"
                )
        )
        let unsendable = machine.rules.decide(Self.delivery(1), .unsendable(reason: "header"), now: Self.epoch, jitter: 0)
        #expect(unsendable.status == .failed)
        #expect(unsendable.outcome == .unsendable)
        #expect(unsendable.countsAttempt)
    }
}
