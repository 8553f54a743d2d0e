import Foundation

/// The delay before retry number `attempt` (1-based): `base` doubled per attempt up to `cap`, with
/// "equal jitter" (half fixed, half random), and never below a provider's `Retry-After` seconds,
/// which count only up to `maxRetryAfter` (a peer may ask for any number; the operator's setting
/// says how long a wait the relay honours). Deliveries, the Zendesk forwarder and feedback events
/// all retry this way.
///
/// Whatever it is given (a negative or huge attempt, a NaN jitter, durations near their limits)
/// the result is between zero and ``longestBackoff``: it cannot trap, so no answer from the
/// network can take the relay down through it.
///
/// - Parameter jitter: where in the random half the delay lands, from 0 to 1; random unless given
///   (tests pass it to check the bounds).
func backoffDelay(
    base: Duration,
    cap: Duration,
    attempt: Int,
    retryAfter: Int?,
    maxRetryAfter: Duration,
    jitter: Double = .random(in: 0...1)
) -> Duration {
    let doublings = Double(min(max(attempt, 1), 31) - 1)
    let exponential = min(max(cap.timeInterval, 0), max(base.timeInterval, 0) * pow(2, doublings))
    let spread = jitter.isNaN ? 0.5 : min(max(jitter, 0), 1)
    var delay = exponential / 2 + exponential / 2 * spread
    if let retryAfter { delay = max(delay, min(Double(max(retryAfter, 0)), max(maxRetryAfter.timeInterval, 0))) }
    return .milliseconds(Int64(delay.isFinite ? min(max(delay, 0), longestBackoff.timeInterval) * 1000 : 0))
}

/// The longest delay ``backoffDelay(base:cap:attempt:retryAfter:maxRetryAfter:jitter:)`` returns
/// (a year): beyond any setting, and small enough to add to a date or an instant safely.
let longestBackoff = Duration.seconds(365 * 86400)

extension Duration {
    var timeInterval: TimeInterval { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
