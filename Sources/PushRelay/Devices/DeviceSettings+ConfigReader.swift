import Configuration

extension DeviceSettings {
    /// Reads the `devices` section; a key that is not set keeps its default.
    public init(config: ConfigReader) {
        self.init()
        maxPerUser = min(max(1, config.int(forKey: "max_per_user", default: maxPerUser)), 10_000)
    }

    init(config: ConfigReader, pushKeys: DevicePushKeys) {
        self.init(config: config)
        self.pushKeys = pushKeys
    }
}
