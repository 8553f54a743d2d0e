import Configuration

extension WebhookSettings {
    /// Reads the `webhooks` section; a key that is not set keeps its default.
    public init(config: ConfigReader) {
        let defaults = WebhookSettings()
        self.init(
            maxDevices: max(1, config.int(forKey: "max_devices", default: defaults.maxDevices)),
            signatureTolerance: config.double(
                forKey: "signature_tolerance_seconds",
                default: defaults.signatureTolerance
            ),
            batchSize: config.int(forKey: "batch_size", default: defaults.batchSize),
            concurrentWrites: config.int(forKey: "concurrent_writes", default: defaults.concurrentWrites),
            concurrentWriteAfter: config.millisecondsDuration(
                forKey: "concurrent_write_after_ms",
                default: defaults.concurrentWriteAfter,
                atLeast: 0,
                atMost: 1000
            ),
            paceWaitingDeliveries: max(
                0,
                config.int(forKey: "pace_waiting_deliveries", default: defaults.paceWaitingDeliveries)
            ),
            paceMaxWait: config.millisecondsDuration(
                forKey: "pace_max_wait_ms",
                default: defaults.paceMaxWait,
                atLeast: 0,
                atMost: 5000
            )
        )
    }
}
