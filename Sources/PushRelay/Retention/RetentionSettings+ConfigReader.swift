import Configuration

extension RetentionSettings {
    /// Reads the `retention` section; a key that is not set keeps its default.
    public init(config: ConfigReader) {
        self.init()
        enabled = config.bool(forKey: "enabled", default: enabled)
        deliveredDays = max(1, config.int(forKey: "delivered_days", default: deliveredDays))
        failedDays = max(1, config.int(forKey: "failed_days", default: failedDays))
        jobsDays = max(1, config.int(forKey: "jobs_days", default: jobsDays))
        zendeskForwardedDays = max(1, config.int(forKey: "zendesk_forwarded_days", default: zendeskForwardedDays))
        interval = config.secondsDuration(forKey: "interval_seconds", default: interval, atLeast: 1)
        batchSize = min(100_000, max(1, config.int(forKey: "batch_size", default: batchSize)))
        batchPause = config.millisecondsDuration(forKey: "batch_pause_ms", default: batchPause, atLeast: 0)
        partitionDays = min(31, max(1, config.int(forKey: "partition_days", default: partitionDays)))
        partitionsAheadDays = min(
            366,
            max(1, config.int(forKey: "partitions_ahead_days", default: partitionsAheadDays))
        )
    }
}
