import Foundation

/// When one send of a delivery must be over: its claim's lease, less a tenth of it to write the
/// outcome. After the lease another claimer (another instance, or this one's next claim query) may
/// take the delivery and send it again, so nothing of this send may still be in flight then: not
/// the first request, and not the retries inside the send (the other APNs environment, a request
/// with a new provider token, the token fetch itself).
///
/// A request gets `min(request timeout, time left)`; a retry inside the send starts only while the
/// time left still covers ``retryBudget``, what a send started at the end of its send window is
/// sure to have (a request timeout, or four tenths of a lease shorter than about twice that).
/// Otherwise the send ends with what it has, and the delivery is retried by a later claim that has
/// a lease of its own.
struct SendDeadline: Sendable {
    /// The end of the send.
    var instant: ContinuousClock.Instant
    /// `delivery.request_timeout_seconds`.
    var requestTimeout: Duration
    /// The least time left for a retry inside the send to start.
    var retryBudget: Duration
    /// The time the deadline is measured against.
    var clock: RelayClock

    /// The deadline of a send of a delivery claimed at `claimedAt` (the monotonic time taken just
    /// before the claiming statement, so no later than PostgreSQL's own start of the lease).
    init(claimedAt: ContinuousClock.Instant, lease: Duration, requestTimeout: Duration, clock: RelayClock = .system) {
        self.clock = clock
        instant = claimedAt + lease - lease / 10
        self.requestTimeout = requestTimeout
        // A send starts at most `DeliverySettings.sendWindow` after its claim, which leaves it
        // min(request timeout, 0.4 × lease) before this deadline: a retry gets no less than that.
        retryBudget = min(requestTimeout, lease * 4 / 10)
    }

    /// The time left, zero or negative once the deadline has passed.
    var remaining: Duration { instant - clock.now() }

    /// The timeout for a request started now: `timeout` (the request timeout unless given), or the
    /// time left when that is shorter.
    func timeout(_ timeout: Duration? = nil) -> Duration { min(timeout ?? requestTimeout, remaining) }

    /// Whether a first request may still start: some time is left.
    var allowsRequest: Bool { remaining > .milliseconds(10) }

    /// Whether a further request inside the same send may start: the time left covers
    /// ``retryBudget``, as much as a first request is sure to get.
    var allowsAnotherRequest: Bool { remaining >= retryBudget }

    /// The deadline of the send this task is making, for code below the provider that makes
    /// requests of its own (the FCM OAuth token fetch), so its request is bounded too.
    @TaskLocal static var current: SendDeadline?
}
