import Configuration
import Crypto
import Foundation

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

/// An app's `events:` section: where its feedback events go.
///
/// ```yaml
/// events:
///   url: https://hooks.example.com/push-relay      # HTTPS (HTTP/2 or HTTP/1.1)
///   signing_secret_file: /etc/push-relay/support-events.key
///   types: [delivered, failed, expired, dead_token, badge_sync_failed]   # the default
/// ```
public struct EventSettings: Sendable, Decodable, Hashable {
    public var url: String
    public var signingSecretFile: String
    /// Event types to send; every other outcome writes no event. `nil`: ``DeliveryEventType/defaults``.
    public var types: [String]?

    public init(url: String, signingSecretFile: String, types: [String]? = nil) {
        self.url = url
        self.signingSecretFile = signingSecretFile
        self.types = types
    }

    enum CodingKeys: String, CodingKey {
        case url, types
        case signingSecretFile = "signing_secret_file"
    }

    /// The types this app's outcomes produce events for.
    var eventTypes: Set<DeliveryEventType> {
        guard let types else { return DeliveryEventType.defaults }
        return Set(types.compactMap(DeliveryEventType.init(rawValue:)))
    }

    /// The signing secret (trimmed), at least 16 bytes.
    func secret(app: String) throws -> SymmetricKey {
        SymmetricKey(data: Data(try readSecretFile(signingSecretFile, app: app, key: "events.signing_secret_file", minBytes: 16).utf8))
    }

    func validate(app: String) throws {
        try validateHTTPSURL(url, app: app, key: "events.url")
        _ = try secret(app: app)
        for type in types ?? [] where DeliveryEventType(rawValue: type) == nil {
            throw ConfigurationError(
                "app '\(app)': events.types lists '\(type)'; use \(DeliveryEventType.allCases.map(\.rawValue).joined(separator: ", "))"
            )
        }
        if let types, types.isEmpty { throw ConfigurationError("app '\(app)': events.types is empty; remove the events section instead") }
    }
}

/// How events are sent (`events.*`, one set for every app).
///
/// Keys, read from a reader scoped to `events`:
/// - `batch_size` (int, default 100, at most 1000): most events in one request.
/// - `poll_interval_ms` (int, default 500, at least 10): how often an idle app's queue is looked at.
/// - `retry_base_ms` (int, default 1000): first delay after a failed request, doubled per failure
///   (with jitter) up to `retry_max_seconds` (int, default 300); a longer `Retry-After` wins, up to
///   `max_retry_after_seconds` (int, default 3600, 0 to ignore the header).
/// - `request_timeout_seconds` (int, default 15).
/// - `lease_seconds` (int, default 60, at least three request timeouts): how long an instance holds
///   an app's sending; it renews it while it sends or waits to retry, and another instance takes
///   over when it lapses.
public struct EventForwarderSettings: Sendable {
    public var batchSize: Int
    public var pollInterval: Duration
    public var retryBase: Duration
    public var retryMax: Duration
    /// The longest `Retry-After` from a receiver that is honoured.
    public var maxRetryAfter: Duration
    public var requestTimeout: Duration
    public var lease: Duration

    public init(config: ConfigReader) {
        batchSize = min(1000, max(1, config.int(forKey: "batch_size", default: 100)))
        pollInterval = .milliseconds(max(10, config.int(forKey: "poll_interval_ms", default: 500)))
        retryBase = .milliseconds(max(1, config.int(forKey: "retry_base_ms", default: 1000)))
        retryMax = .seconds(max(1, config.int(forKey: "retry_max_seconds", default: 300)))
        maxRetryAfter = .seconds(min(max(0, config.int(forKey: "max_retry_after_seconds", default: 3600)), RetryAfter.ceiling))
        requestTimeout = .seconds(max(1, config.int(forKey: "request_timeout_seconds", default: 15)))
        lease = .seconds(max(5, config.int(forKey: "lease_seconds", default: 60)))
    }
}
