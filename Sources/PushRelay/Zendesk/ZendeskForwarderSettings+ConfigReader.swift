import Configuration

extension ZendeskForwarderSettings {
    /// Reads the `zendesk` section; a key that is not set keeps its default.
    public init(config: ConfigReader) {
        self.init()
        batchSize = max(1, config.int(forKey: "batch_size", default: batchSize))
        pollInterval = config.millisecondsDuration(forKey: "poll_interval_ms", default: pollInterval, atLeast: 10)
        retryBase = config.millisecondsDuration(forKey: "retry_base_ms", default: retryBase, atLeast: 1)
        maxRetryAfter = config.secondsDuration(
            forKey: "max_retry_after_seconds",
            default: maxRetryAfter,
            atLeast: 0,
            atMost: RetryAfter.ceiling
        )
    }
}
