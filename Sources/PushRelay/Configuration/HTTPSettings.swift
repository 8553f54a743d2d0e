/// The HTTP listener; the values below are the defaults, and `HTTPSettings+ConfigReader.swift`
/// reads the keys.
///
/// Keys, read from a reader scoped to `http`:
/// - `host` (string, default `127.0.0.1`): address to bind; `0.0.0.0` for all interfaces.
/// - `port` (int, default 8080).
public struct HTTPSettings: Sendable, Equatable {
    public var host = "127.0.0.1"
    public var port = 8080

    public init() {}
}
