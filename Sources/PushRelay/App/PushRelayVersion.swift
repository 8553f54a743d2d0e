import CBuildInfo
import CurlHTTP2
import Postgres

/// Version facts printed by `push-relay version` and logged at start-up.
public enum PushRelayVersion {
    /// The release this source tree is; a release build's version (``build``) adds to it.
    /// Deploy/lib.sh reads this line.
    public static let current = "0.1.0"

    /// This build's version: Deploy/release.sh compiles one in (`0.1.0.20261206050200.g45e1e92a1b2c`,
    /// the commit's UTC time and hash, so dpkg orders two builds), ``current`` for a development build.
    public static var build: String {
        let version = String(cString: push_relay_build_version())
        return version.isEmpty ? current : version
    }

    /// The commit this binary was built from (a release build's; see Deploy/release.sh), nil for a
    /// development build.
    public static var commit: String? {
        let commit = String(cString: push_relay_build_commit())
        return commit.isEmpty ? nil : commit
    }

    /// The version and the commit, as `--version` prints them: `0.1.0.20261206050200.g45e1e92a1b2c
    /// (commit 45e1e92a1b2c)`, or `0.1.0 (development build)`.
    public static var full: String { "\(build) (\(commit.map { "commit \($0)" } ?? "development build"))" }

    /// libpq's version as a dotted string (for example `15.18`).
    public static var libpq: String { PostgresLibrary.version }

    /// Lines describing this build and the C libraries it runs on.
    public static var report: [String] {
        [
            "push-relay \(full)",
            "libpq \(libpq)",
            "\(CurlLibrary.version) (HTTP/2 \(CurlLibrary.supportsHTTP2 ? "yes" : "no"))",
        ]
    }
}
