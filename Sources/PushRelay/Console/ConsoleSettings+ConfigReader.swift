import Configuration

extension ConsoleSettings {
    /// Reads the `console` section; a key that is not set keeps its default.
    public init(config: ConfigReader) {
        self.init()
        enabled = config.bool(forKey: "enabled", default: enabled)
        idleTimeout = config.secondsDuration(forKey: "idle_timeout_seconds", default: idleTimeout, atLeast: 60)
        sessionLifetime = config.secondsDuration(
            forKey: "session_lifetime_seconds",
            default: sessionLifetime,
            atLeast: 300
        )
        secureCookies = config.string(forKey: "secure_cookies", default: secureCookies)
        maxSessionsPerKey = min(100, max(1, config.int(forKey: "max_sessions_per_key", default: maxSessionsPerKey)))
        signInsPerKey = min(10_000, max(1, config.int(forKey: "sign_ins_per_key_per_minute", default: signInsPerKey)))
        signInsPerAddress = min(
            10_000,
            max(1, config.int(forKey: "sign_ins_per_address_per_minute", default: signInsPerAddress))
        )
    }
}
