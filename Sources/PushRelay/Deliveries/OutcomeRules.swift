import Foundation

/// What an answer (or its absence) means for a delivery: pure functions of the delivery
/// settings, the time and, for a retry, a jitter. The dispatcher's state machine applies them.
struct OutcomeRules: Sendable {
    let settings: DeliverySettings

    /// The result of a delivery that is not to be sent at all, or `nil` to send it: the device
    /// was invalidated since it was queued (`skipped`), it is older than `max_age` (`expired`),
    /// or the app has no section for its platform (`failed`).
    func preflight(_ delivery: ClaimedDelivery, now: Date, hasProvider: Bool) -> DeliveryResult? {
        if !delivery.deviceActive {
            return DeliveryResult(
                delivery: delivery,
                status: .skipped,
                outcome: .skipped,
                reason: "device is invalid or unregistered"
            )
        }
        if now.timeIntervalSince(delivery.createdAt) > settings.maxAge.timeInterval {
            return DeliveryResult(
                delivery: delivery,
                status: .expired,
                outcome: .expired,
                reason: "older than the maximum age"
            )
        }
        if !hasProvider {
            let section = delivery.platform == .ios ? "apns" : "fcm"
            return DeliveryResult(
                delivery: delivery,
                status: .failed,
                outcome: .failed,
                reason: "app has no \(section) section configured"
            )
        }
        return nil
    }

    /// What a provider's answer means for the delivery. A reason that quotes the device token
    /// keeps only its redacted form. `jitter` (0…1) places a retry within its backoff's random half;
    /// it is evaluated for a retry only (a random draw is a system call).
    func decide(
        _ delivery: ClaimedDelivery,
        _ outcome: PushOutcome,
        now: Date,
        jitter: @autoclosure () -> Double
    ) -> DeliveryResult {
        func clean(_ reason: String) -> String {
            reason.replacingOccurrences(of: delivery.token, with: Redaction.token(delivery.token))
        }
        switch outcome {
        case .delivered(let providerID, let environment):
            return DeliveryResult(
                delivery: delivery,
                status: .delivered,
                outcome: .delivered,
                providerID: providerID,
                learnedEnvironment: environment
            )
        case .deadToken(let reason, let since):
            return DeliveryResult(
                delivery: delivery,
                status: .deadToken,
                outcome: .deadToken,
                reason: clean(reason),
                deadSince: since
            )
        case .permanent(let reason):
            return DeliveryResult(delivery: delivery, status: .failed, outcome: .failed, reason: clean(reason))
        case .unsendable(let reason):
            return DeliveryResult(delivery: delivery, status: .failed, outcome: .unsendable, reason: clean(reason))
        case .credential(let reason, _):
            return DeliveryResult(
                delivery: delivery,
                status: .pending,
                outcome: .credential,
                nextAttemptAt: now.addingTimeInterval(settings.credentialRetry.timeInterval),
                reason: clean(reason),
                countsAttempt: false
            )
        case .retry(let reason, let retryAfter):
            let delay = settings.retryDelay(attempt: delivery.attempts, retryAfter: retryAfter, jitter: jitter())
                .timeInterval
            let next = now.addingTimeInterval(delay)
            if delivery.attempts >= settings.maxAttempts
                || next.timeIntervalSince(delivery.createdAt) > settings.maxAge.timeInterval
            {
                return DeliveryResult(delivery: delivery, status: .expired, outcome: .expired, reason: clean(reason))
            }
            return DeliveryResult(
                delivery: delivery,
                status: .pending,
                outcome: .retry,
                nextAttemptAt: next,
                reason: clean(reason)
            )
        }
    }
}
