import Configuration

extension TrustedProxies {
    /// Reads `trusted_proxies` (a list of strings) from a reader scoped to `http`; none by default.
    public init(config: ConfigReader) throws {
        try self.init(config.stringArray(forKey: "trusted_proxies", default: []))
    }
}
