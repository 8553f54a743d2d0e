import Configuration

extension ZendeskForwarderSettings {
    /// Reads the `zendesk` section; a key that is not set keeps its default.
    public init(config: ConfigReader) {
        self.init()
        batchSize = max(1, config.int(forKey: "batch_size", default: batchSize))
        pollInterval = .milliseconds(
            max(10, config.int(forKey: "poll_interval_ms", default: pollInterval.wholeMilliseconds))
        )
        retryBase = .milliseconds(max(1, config.int(forKey: "retry_base_ms", default: retryBase.wholeMilliseconds)))
        maxRetryAfter = .seconds(
            min(
                max(0, config.int(forKey: "max_retry_after_seconds", default: maxRetryAfter.wholeSeconds)),
                RetryAfter.ceiling
            )
        )
    }
}
