/// What a delivery outcome tells the customer's systems, as an event's `type`.
enum DeliveryEventType: String, Sendable, Hashable, CaseIterable, Codable {
    /// An agent's reply reached the provider (APNs accepted it, FCM returned a message name).
    case delivered
    /// The provider refused an agent's reply for good, or the relay could not build the request.
    case failed
    /// An agent's reply ran out of attempts or passed `delivery.max_age_seconds`.
    case expired
    /// The provider reported the device token dead; the device is invalidated (unless it was
    /// registered again after the moment APNs says the token died).
    case deadToken = "dead_token"
    /// An agent's reply was not sent: the device was invalidated or unregistered after the webhook.
    case skipped
    /// A badge sync (after a read on another device) reached the provider.
    case badgeSyncDelivered = "badge_sync_delivered"
    /// A badge sync was refused, ran out of attempts or could not be built.
    case badgeSyncFailed = "badge_sync_failed"

    /// The types an app's `events.types` gets when it lists none.
    static let defaults: Set<DeliveryEventType> = [.delivered, .failed, .expired, .deadToken, .badgeSyncFailed]

    /// The event a delivery's final outcome makes, or `nil` for an outcome that is not final
    /// (a retry, a credential wait, a hand-back) or not worth telling (a skipped badge sync).
    init?(_ result: DeliveryResult) {
        switch (result.delivery.kind, result.outcome) {
        case (_, .deadToken): self = .deadToken
        case (.alert, .delivered): self = .delivered
        case (.alert, .failed), (.alert, .unsendable): self = .failed
        case (.alert, .expired): self = .expired
        case (.alert, .skipped): self = .skipped
        case (.badgeSync, .delivered): self = .badgeSyncDelivered
        case (.badgeSync, .failed), (.badgeSync, .unsendable), (.badgeSync, .expired): self = .badgeSyncFailed
        case (_, .retry), (_, .credential), (_, .lapsed), (_, .handedBack), (.badgeSync, .skipped): return nil
        }
    }
}
