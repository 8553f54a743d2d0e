import Configuration

/// The HTTP listener.
///
/// Keys, read from a reader scoped to `http`:
/// - `host` (string, default `127.0.0.1`): address to bind; `0.0.0.0` for all interfaces.
/// - `port` (int, default 8080).
public struct HTTPSettings: Sendable {
    public var host: String
    public var port: Int

    public init(config: ConfigReader) {
        self.host = config.string(forKey: "host", default: "127.0.0.1")
        self.port = config.int(forKey: "port", default: 8080)
    }
}
