import Configuration

extension JobSettings {
    /// Reads the `jobs` section; a key that is not set keeps its default.
    public init(config: ConfigReader) {
        self.init()
        batchSize = max(1, config.int(forKey: "batch_size", default: batchSize))
        parallelBatches = max(1, config.int(forKey: "parallel_batches", default: parallelBatches))
        pollInterval = config.millisecondsDuration(forKey: "poll_interval_ms", default: pollInterval, atLeast: 10)
        lease = config.secondsDuration(forKey: "lease_seconds", default: lease, atLeast: 1)
        maxUploadBytes = max(1, config.int(forKey: "max_upload_bytes", default: maxUploadBytes))
    }
}
