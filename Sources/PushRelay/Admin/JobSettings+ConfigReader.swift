import Configuration

extension JobSettings {
    /// Reads the `jobs` section; a key that is not set keeps its default.
    public init(config: ConfigReader) {
        self.init()
        batchSize = max(1, config.int(forKey: "batch_size", default: batchSize))
        parallelBatches = max(1, config.int(forKey: "parallel_batches", default: parallelBatches))
        pollInterval = .milliseconds(
            max(10, config.int(forKey: "poll_interval_ms", default: pollInterval.wholeMilliseconds))
        )
        lease = .seconds(max(1, config.int(forKey: "lease_seconds", default: lease.wholeSeconds)))
        maxUploadBytes = max(1, config.int(forKey: "max_upload_bytes", default: maxUploadBytes))
    }
}
