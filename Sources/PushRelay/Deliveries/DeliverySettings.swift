import Foundation

/// How the dispatcher works (`delivery.*`), with the defaults a production relay wants;
/// `DeliverySettings+ConfigReader.swift` reads the keys.
public struct DeliverySettings: Sendable {
    /// Whether this instance sends pushes. An intake-only instance (false) still accepts webhooks;
    /// another instance delivers them.
    public var enabled = true
    /// Most deliveries claimed by one query.
    public var batchSize = 500
    /// Most deliveries claimed and not finished per app (waiting for a sender or being sent): one
    /// app whose provider hangs or fails cannot take the others' turn.
    public var maxInFlightPerApp = 4000
    /// How often due rows are looked for without a NOTIFY (retries come due this way).
    public var pollInterval = Duration.seconds(1)
    /// How long a claim holds; after that another instance may take the delivery over.
    public var lease = Duration.seconds(60)
    /// First retry delay; doubled per attempt, with jitter, up to `retryMax`.
    public var retryBase = Duration.seconds(1)
    public var retryMax = Duration.seconds(3600)
    /// The longest `Retry-After` honoured (`max_retry_after_seconds`, default 3600, 0 to ignore the
    /// header): APNs or FCM may ask for any wait, and a delivery waits at most this long for it.
    public var maxRetryAfter = Duration.seconds(3600)
    /// Attempts before a delivery is `expired`.
    public var maxAttempts = 12
    /// Age (since the webhook) after which a delivery is `expired` instead of sent or retried.
    public var maxAge = Duration.seconds(86400)
    /// How long a delivery waits when the app's credentials are rejected (it is not counted as an attempt).
    public var credentialRetry = Duration.seconds(60)
    /// apns-expiration and the FCM ttl: how long the provider keeps trying an offline device.
    public var pushTTL = Duration.seconds(86400)
    /// One provider request, connection set-up included.
    public var requestTimeout = Duration.seconds(30)
    /// HTTP/2 connections per provider host and streams per connection.
    public var connectionsPerHost = 2
    public var streamsPerConnection = 90
    /// Event threads per provider client (`event_threads`, default 1), each with its own
    /// `connections_per_host` connections: one thread drives a few tens of thousands of pushes a
    /// second; a machine with cores to spare can give a busy credential more.
    public var eventThreads = 1
    /// After each write of outcomes, how long the writer waits before the next
    /// (`outcome_write_interval_ms`, default 10, 0 to 1000; 0 writes as soon as the last write
    /// ends). Outcomes answered meanwhile share one statement: each statement costs PostgreSQL about
    /// as much as fifteen of its rows, so fewer, larger statements cost it less per push. The push
    /// itself is not delayed; its row says `sending` up to this much longer, and a crash in that
    /// time leaves those rows to be sent again after the lease, as for any push in flight.
    public var outcomeWriteInterval = Duration.milliseconds(10)
    /// Extra CA bundle to trust for outbound TLS (`tls.ca_file`), such as the sandbox's CA.
    public var caFile: String?

    public init() {}

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
