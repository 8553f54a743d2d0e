import Configuration

extension HTTPSettings {
    /// Reads the listener's keys of the `http` section; a key that is not set keeps its default.
    public init(config: ConfigReader) {
        self.init()
        host = config.string(forKey: "host", default: host)
        port = config.int(forKey: "port", default: port)
    }
}
