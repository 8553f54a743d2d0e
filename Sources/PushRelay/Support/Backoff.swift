import Foundation

/// The delay before retry number `attempt` (1-based): `base` doubled per attempt up to `cap`, with
/// "equal jitter" (half fixed, half random), and never below a provider's `Retry-After` seconds.
/// Deliveries and the Zendesk forwarder both retry this way.
///
/// - Parameter jitter: where in the random half the delay lands, from 0 to 1; random unless given
///   (tests pass it to check the bounds).
func backoffDelay(base: Duration, cap: Duration, attempt: Int, retryAfter: Int?, jitter: Double = .random(in: 0...1)) -> Duration {
    let exponential = min(cap.timeInterval, base.timeInterval * pow(2, Double(min(max(attempt - 1, 0), 30))))
    var delay = exponential / 2 + exponential / 2 * min(max(jitter, 0), 1)
    if let retryAfter { delay = max(delay, Double(retryAfter)) }
    return .milliseconds(Int64(delay * 1000))
}

extension Duration {
    var timeInterval: TimeInterval { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
