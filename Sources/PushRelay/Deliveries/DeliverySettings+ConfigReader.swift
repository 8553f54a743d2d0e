import Configuration

extension DeliverySettings {
    /// Reads the `delivery` section, and `ca_file` from `tls` when given; a key that is not set
    /// keeps its default.
    public init(config: ConfigReader, tls: ConfigReader? = nil) {
        self.init()
        enabled = config.bool(forKey: "enabled", default: enabled)
        batchSize = max(1, config.int(forKey: "batch_size", default: batchSize))
        maxInFlightPerApp = max(1, config.int(forKey: "max_in_flight_per_app", default: maxInFlightPerApp))
        pollInterval = .milliseconds(
            max(10, config.int(forKey: "poll_interval_ms", default: pollInterval.wholeMilliseconds))
        )
        lease = .seconds(max(1, config.int(forKey: "lease_seconds", default: lease.wholeSeconds)))
        retryBase = .milliseconds(max(1, config.int(forKey: "retry_base_ms", default: retryBase.wholeMilliseconds)))
        retryMax = .seconds(max(1, config.int(forKey: "retry_max_seconds", default: retryMax.wholeSeconds)))
        maxRetryAfter = .seconds(
            min(
                max(0, config.int(forKey: "max_retry_after_seconds", default: maxRetryAfter.wholeSeconds)),
                RetryAfter.ceiling
            )
        )
        maxAttempts = max(1, config.int(forKey: "max_attempts", default: maxAttempts))
        maxAge = .seconds(max(1, config.int(forKey: "max_age_seconds", default: maxAge.wholeSeconds)))
        credentialRetry = .seconds(
            max(1, config.int(forKey: "credential_retry_seconds", default: credentialRetry.wholeSeconds))
        )
        pushTTL = .seconds(max(0, config.int(forKey: "push_ttl_seconds", default: pushTTL.wholeSeconds)))
        requestTimeout = .seconds(
            max(1, config.int(forKey: "request_timeout_seconds", default: requestTimeout.wholeSeconds))
        )
        connectionsPerHost = max(1, config.int(forKey: "connections_per_host", default: connectionsPerHost))
        streamsPerConnection = max(1, config.int(forKey: "streams_per_connection", default: streamsPerConnection))
        eventThreads = min(16, max(1, config.int(forKey: "event_threads", default: eventThreads)))
        outcomeWriteInterval = .milliseconds(
            min(
                max(
                    0,
                    config.int(forKey: "outcome_write_interval_ms", default: outcomeWriteInterval.wholeMilliseconds)
                ),
                1000
            )
        )
        caFile = tls?.string(forKey: "ca_file")
    }
}
