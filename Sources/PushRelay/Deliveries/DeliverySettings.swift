import Configuration
import Foundation

/// How the dispatcher works (`delivery.*`), with the defaults a production relay wants.
public struct DeliverySettings: Sendable {
    /// Whether this instance sends pushes. An intake-only instance (false) still accepts webhooks;
    /// another instance delivers them.
    public var enabled: Bool
    /// Most deliveries claimed by one query.
    public var batchSize: Int
    /// Most deliveries claimed and not finished per app (waiting for a sender or being sent): one
    /// app whose provider hangs or fails cannot take the others' turn.
    public var maxInFlightPerApp: Int
    /// How often due rows are looked for without a NOTIFY (retries come due this way).
    public var pollInterval: Duration
    /// How long a claim holds; after that another instance may take the delivery over.
    public var lease: Duration
    /// First retry delay; doubled per attempt, with jitter, up to `retryMax`.
    public var retryBase: Duration
    public var retryMax: Duration
    /// The longest `Retry-After` honoured (`max_retry_after_seconds`, default 3600, 0 to ignore the
    /// header): APNs or FCM may ask for any wait, and a delivery waits at most this long for it.
    public var maxRetryAfter: Duration
    /// Attempts before a delivery is `expired`.
    public var maxAttempts: Int
    /// Age (since the webhook) after which a delivery is `expired` instead of sent or retried.
    public var maxAge: Duration
    /// How long a delivery waits when the app's credentials are rejected (it is not counted as an attempt).
    public var credentialRetry: Duration
    /// apns-expiration and the FCM ttl: how long the provider keeps trying an offline device.
    public var pushTTL: Duration
    /// One provider request, connection set-up included.
    public var requestTimeout: Duration
    /// HTTP/2 connections per provider host and streams per connection.
    public var connectionsPerHost: Int
    public var streamsPerConnection: Int
    /// Event threads per provider client (`event_threads`, default 1), each with its own
    /// `connections_per_host` connections: one thread drives a few tens of thousands of pushes a
    /// second; a machine with cores to spare can give a busy credential more.
    public var eventThreads: Int
    /// After each write of outcomes, how long the writer waits before the next
    /// (`outcome_write_interval_ms`, default 10, 0 to 1000; 0 writes as soon as the last write
    /// ends). Outcomes answered meanwhile share one statement: each statement costs PostgreSQL about
    /// as much as fifteen of its rows, so fewer, larger statements cost it less per push. The push
    /// itself is not delayed; its row says `sending` up to this much longer, and a crash in that
    /// time leaves those rows to be sent again after the lease, as for any push in flight.
    public var outcomeWriteInterval: Duration
    /// Extra CA bundle to trust for outbound TLS (`tls.ca_file`), such as the sandbox's CA.
    public var caFile: String?

    public init(config: ConfigReader, tls: ConfigReader? = nil) {
        enabled = config.bool(forKey: "enabled", default: true)
        batchSize = max(1, config.int(forKey: "batch_size", default: 500))
        maxInFlightPerApp = max(1, config.int(forKey: "max_in_flight_per_app", default: 4000))
        pollInterval = .milliseconds(max(10, config.int(forKey: "poll_interval_ms", default: 1000)))
        lease = .seconds(max(1, config.int(forKey: "lease_seconds", default: 60)))
        retryBase = .milliseconds(max(1, config.int(forKey: "retry_base_ms", default: 1000)))
        retryMax = .seconds(max(1, config.int(forKey: "retry_max_seconds", default: 3600)))
        maxRetryAfter = .seconds(
            min(max(0, config.int(forKey: "max_retry_after_seconds", default: 3600)), RetryAfter.ceiling)
        )
        maxAttempts = max(1, config.int(forKey: "max_attempts", default: 12))
        maxAge = .seconds(max(1, config.int(forKey: "max_age_seconds", default: 86400)))
        credentialRetry = .seconds(max(1, config.int(forKey: "credential_retry_seconds", default: 60)))
        pushTTL = .seconds(max(0, config.int(forKey: "push_ttl_seconds", default: 86400)))
        requestTimeout = .seconds(max(1, config.int(forKey: "request_timeout_seconds", default: 30)))
        connectionsPerHost = max(1, config.int(forKey: "connections_per_host", default: 2))
        streamsPerConnection = max(1, config.int(forKey: "streams_per_connection", default: 90))
        eventThreads = min(16, max(1, config.int(forKey: "event_threads", default: 1)))
        outcomeWriteInterval = .milliseconds(
            min(max(0, config.int(forKey: "outcome_write_interval_ms", default: 10)), 1000)
        )
        caFile = tls?.string(forKey: "ca_file")
    }

    /// How long after its claim a delivery may still be sent: its lease less one request timeout
    /// and a tenth of the lease to spare, so the send ends before the lease does and no other
    /// claimer sends it meanwhile. With a lease too short for that (under about twice the request
    /// timeout), half the lease: such a lease cannot cover a slow send anyway.
    var sendWindow: Duration { max(lease - requestTimeout - lease / 10, lease / 2) }

    /// When a send of a delivery claimed at `claimedAt` must be over (its lease less a tenth).
    func sendDeadline(claimedAt: ContinuousClock.Instant, clock: RelayClock = .system) -> SendDeadline {
        SendDeadline(claimedAt: claimedAt, lease: lease, requestTimeout: requestTimeout, clock: clock)
    }

    /// The delay before retry number `attempt` (1-based): exponential with "equal jitter" (half
    /// fixed, half random), never below what the provider asked for in Retry-After, up to `maxRetryAfter`.
    func retryDelay(attempt: Int, retryAfter: Int?, jitter: Double = .random(in: 0...1)) -> Duration {
        backoffDelay(
            base: retryBase,
            cap: retryMax,
            attempt: attempt,
            retryAfter: retryAfter,
            maxRetryAfter: maxRetryAfter,
            jitter: jitter
        )
    }
}
