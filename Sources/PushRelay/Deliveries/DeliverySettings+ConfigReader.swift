import Configuration

extension DeliverySettings {
    /// Reads the `delivery` section, and `ca_file` from `tls` when given; a key that is not set
    /// keeps its default.
    public init(config: ConfigReader, tls: ConfigReader? = nil) {
        self.init()
        enabled = config.bool(forKey: "enabled", default: enabled)
        batchSize = max(1, config.int(forKey: "batch_size", default: batchSize))
        maxInFlightPerApp = max(1, config.int(forKey: "max_in_flight_per_app", default: maxInFlightPerApp))
        pollInterval = config.millisecondsDuration(forKey: "poll_interval_ms", default: pollInterval, atLeast: 10)
        lease = config.secondsDuration(forKey: "lease_seconds", default: lease, atLeast: 1)
        retryBase = config.millisecondsDuration(forKey: "retry_base_ms", default: retryBase, atLeast: 1)
        retryMax = config.secondsDuration(forKey: "retry_max_seconds", default: retryMax, atLeast: 1)
        maxRetryAfter = config.secondsDuration(
            forKey: "max_retry_after_seconds",
            default: maxRetryAfter,
            atLeast: 0,
            atMost: RetryAfter.ceiling
        )
        maxAttempts = max(1, config.int(forKey: "max_attempts", default: maxAttempts))
        maxAge = config.secondsDuration(forKey: "max_age_seconds", default: maxAge, atLeast: 1)
        credentialRetry = config.secondsDuration(
            forKey: "credential_retry_seconds",
            default: credentialRetry,
            atLeast: 1
        )
        pushTTL = config.secondsDuration(forKey: "push_ttl_seconds", default: pushTTL, atLeast: 0)
        requestTimeout = config.secondsDuration(forKey: "request_timeout_seconds", default: requestTimeout, atLeast: 1)
        connectionsPerHost = max(1, config.int(forKey: "connections_per_host", default: connectionsPerHost))
        streamsPerConnection = max(1, config.int(forKey: "streams_per_connection", default: streamsPerConnection))
        eventThreads = min(16, max(1, config.int(forKey: "event_threads", default: eventThreads)))
        outcomeWriteInterval = config.millisecondsDuration(
            forKey: "outcome_write_interval_ms",
            default: outcomeWriteInterval,
            atLeast: 0,
            atMost: 1000
        )
        caFile = tls?.string(forKey: "ca_file")
    }
}
