import Configuration

extension EventForwarderSettings {
    /// Reads the `events` section; a key that is not set keeps its default.
    public init(config: ConfigReader) {
        self.init()
        batchSize = min(1000, max(1, config.int(forKey: "batch_size", default: batchSize)))
        pollInterval = config.millisecondsDuration(forKey: "poll_interval_ms", default: pollInterval, atLeast: 10)
        retryBase = config.millisecondsDuration(forKey: "retry_base_ms", default: retryBase, atLeast: 1)
        retryMax = config.secondsDuration(forKey: "retry_max_seconds", default: retryMax, atLeast: 1)
        maxRetryAfter = config.secondsDuration(
            forKey: "max_retry_after_seconds",
            default: maxRetryAfter,
            atLeast: 0,
            atMost: RetryAfter.ceiling
        )
        requestTimeout = config.secondsDuration(forKey: "request_timeout_seconds", default: requestTimeout, atLeast: 1)
        lease = config.secondsDuration(forKey: "lease_seconds", default: lease, atLeast: 5)
    }
}
