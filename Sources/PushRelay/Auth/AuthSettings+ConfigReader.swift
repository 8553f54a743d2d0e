import Configuration

extension AuthSettings {
    /// Reads the `auth` section; a key that is not set keeps its default.
    init(config: ConfigReader) {
        self.init()
        let megabytes = config.int(forKey: "user_token_cache_mb", default: userTokenCacheBytes >> 20)
        userTokenCacheBytes = min(max(1, megabytes), 4096) << 20
    }
}
