import Configuration
import Crypto
import Foundation

/// An app's `events:` section: where its feedback events go.
///
/// ```yaml
/// events:
///   url: https://hooks.example.com/push-relay      # HTTPS (HTTP/2 or HTTP/1.1)
///   signing_secret_file: /etc/push-relay/support-events.key   # or signing_secret: the secret itself
///   types: [delivered, failed, expired, dead_token, badge_sync_failed]   # the default
/// ```
public struct EventSettings: Sendable, Codable, Hashable {
    public var url: String
    /// The signing secret itself (exactly one of this and ``signingSecretFile``).
    public var signingSecret: String?
    public var signingSecretFile: String?
    /// Event types to send; every other outcome writes no event. `nil`: ``DeliveryEventType/defaults``.
    public var types: [String]?

    public init(url: String, signingSecretFile: String, types: [String]? = nil) {
        self.url = url
        self.signingSecretFile = signingSecretFile
        self.types = types
    }

    public init(url: String, signingSecret: String, types: [String]? = nil) {
        self.url = url
        self.signingSecret = signingSecret
        self.types = types
    }

    enum CodingKeys: String, CodingKey {
        case url, types
        case signingSecret = "signing_secret"
        case signingSecretFile = "signing_secret_file"
    }

    /// The types this app's outcomes produce events for.
    var eventTypes: Set<DeliveryEventType> {
        guard let types else { return DeliveryEventType.defaults }
        return Set(types.compactMap(DeliveryEventType.init(rawValue:)))
    }

    /// The signing secret (trimmed), at least 16 bytes, inline or from its file.
    func secretText(app: String) throws -> String {
        try secretMaterial(
            inline: signingSecret,
            file: signingSecretFile,
            app: app,
            key: "events.signing_secret",
            fileKey: "events.signing_secret_file",
            minBytes: 16
        )
    }

    /// The signing secret as an HMAC key.
    func secret(app: String) throws -> SymmetricKey {
        SymmetricKey(data: Data(try secretText(app: app).utf8))
    }

    func validate(app: String) throws {
        try validateHTTPSURL(url, app: app, key: "events.url")
        _ = try secret(app: app)
        for type in types ?? [] where DeliveryEventType(rawValue: type) == nil {
            throw ConfigurationError(
                "app '\(app)': events.types lists '\(type)'; use \(DeliveryEventType.allCases.map(\.rawValue).joined(separator: ", "))"
            )
        }
        if let types, types.isEmpty {
            throw ConfigurationError("app '\(app)': events.types is empty; remove the events section instead")
        }
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
    public var batchSize = 100
    public var pollInterval = Duration.milliseconds(500)
    public var retryBase = Duration.seconds(1)
    public var retryMax = Duration.seconds(300)
    /// The longest `Retry-After` from a receiver that is honoured.
    public var maxRetryAfter = Duration.seconds(3600)
    public var requestTimeout = Duration.seconds(15)
    public var lease = Duration.seconds(60)

    public init() {}
}
