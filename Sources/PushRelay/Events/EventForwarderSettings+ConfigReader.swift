import Configuration

extension EventForwarderSettings {
    /// Reads the `events` section; a key that is not set keeps its default.
    public init(config: ConfigReader) {
        self.init()
        batchSize = min(1000, max(1, config.int(forKey: "batch_size", default: batchSize)))
        pollInterval = .milliseconds(
            max(10, config.int(forKey: "poll_interval_ms", default: pollInterval.wholeMilliseconds))
        )
        retryBase = .milliseconds(max(1, config.int(forKey: "retry_base_ms", default: retryBase.wholeMilliseconds)))
        retryMax = .seconds(max(1, config.int(forKey: "retry_max_seconds", default: retryMax.wholeSeconds)))
        maxRetryAfter = .seconds(
            min(
                max(0, config.int(forKey: "max_retry_after_seconds", default: maxRetryAfter.wholeSeconds)),
                RetryAfter.ceiling
            )
        )
        requestTimeout = .seconds(
            max(1, config.int(forKey: "request_timeout_seconds", default: requestTimeout.wholeSeconds))
        )
        lease = .seconds(max(5, config.int(forKey: "lease_seconds", default: lease.wholeSeconds)))
    }
}
