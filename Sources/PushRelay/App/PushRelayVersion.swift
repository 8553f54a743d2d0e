import CurlHTTP2
import Postgres

/// Version facts printed by `push-relay version` and logged at start-up.
public enum PushRelayVersion {
    /// PushRelay's own version.
    public static let current = "0.1.0"

    /// libpq's version as a dotted string (for example `15.18`).
    public static var libpq: String { PostgresLibrary.version }

    /// Lines describing this build and the C libraries it runs on.
    public static var report: [String] {
        [
            "push-relay \(current)",
            "libpq \(libpq)",
            "\(CurlLibrary.version) (HTTP/2 \(CurlLibrary.supportsHTTP2 ? "yes" : "no"))",
        ]
    }
}
