import Configuration

extension WebhookSettings {
    /// Reads the `webhooks` section; a key that is not set keeps its default.
    public init(config: ConfigReader) {
        let defaults = WebhookSettings()
        let writeAfter = config.int(
            forKey: "concurrent_write_after_ms",
            default: defaults.concurrentWriteAfter.wholeMilliseconds
        )
        self.init(
            maxDevices: max(1, config.int(forKey: "max_devices", default: defaults.maxDevices)),
            signatureTolerance: config.double(
                forKey: "signature_tolerance_seconds",
                default: defaults.signatureTolerance
            ),
            batchSize: config.int(forKey: "batch_size", default: defaults.batchSize),
            concurrentWrites: config.int(forKey: "concurrent_writes", default: defaults.concurrentWrites),
            concurrentWriteAfter: .milliseconds(min(1000, max(0, writeAfter))),
            paceWaitingDeliveries: max(
                0,
                config.int(forKey: "pace_waiting_deliveries", default: defaults.paceWaitingDeliveries)
            ),
            paceMaxWait: .milliseconds(
                min(
                    5000,
                    max(0, config.int(forKey: "pace_max_wait_ms", default: defaults.paceMaxWait.wholeMilliseconds))
                )
            )
        )
    }
}
