import Configuration

extension UnreadSettings {
    /// Reads the `unread` section; a key that is not set keeps its default, and the two shares
    /// default to their parts of the `max_streams` read.
    public init(config: ConfigReader) {
        let defaults = UnreadSettings()
        let maxStreams = min(max(0, config.int(forKey: "max_streams", default: defaults.maxStreams)), 1_000_000)
        let perApp = config.int(forKey: "max_streams_per_app", default: Self.defaultAppShare(of: maxStreams))
        let perCredential = config.int(
            forKey: "max_streams_per_credential",
            default: Self.defaultCredentialShare(of: maxStreams)
        )
        self.init(
            heartbeat: config.secondsDuration(forKey: "heartbeat_seconds", default: defaults.heartbeat, atLeast: 1),
            pollAfter: min(max(0, config.int(forKey: "poll_after_seconds", default: defaults.pollAfter)), 86_400),
            maxStreamsPerOwner: min(
                max(1, config.int(forKey: "max_streams_per_owner", default: defaults.maxStreamsPerOwner)),
                1000
            ),
            maxStreams: maxStreams,
            maxStreamsPerApp: min(max(1, perApp), 1_000_000),
            maxStreamsPerCredential: min(max(1, perCredential), 1_000_000),
            streamLifetime: config.secondsDuration(
                forKey: "stream_max_seconds",
                default: defaults.streamLifetime,
                atLeast: 10,
                atMost: 7 * 86_400
            ),
            cacheBytes: min(max(1, config.int(forKey: "etag_cache_mb", default: defaults.cacheBytes >> 20)), 64 * 1024)
                << 20
        )
    }
}
