import CCurlShim
import CLibCurl

/// Process-wide facts about the linked libcurl.
///
/// The HTTP/2 client built on the multi interface lives beside this type; `curl_global_init` must run
/// once before any handle is created, and ``initialize()`` is how this module guarantees it.
public enum CurlLibrary {
    private static let initialized: Bool = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
    }()

    /// Initialises libcurl once per process; returns whether initialisation succeeded.
    @discardableResult
    public static func initialize() -> Bool { initialized }

    /// The libcurl version line, for example `libcurl/7.88.1 OpenSSL/3.0.17 ... nghttp2/1.52.0`.
    public static var version: String { String(cString: pushrelay_curl_version()) }

    /// The linked libcurl's version as `0xXXYYZZ` (8.14.1 is `0x080e01`).
    public static var versionNumber: UInt32 { UInt32(pushrelay_curl_version_number()) }

    /// Whether the client may let OpenSSL read ahead on its TLS connections: libcurl 8.14 reads
    /// the bytes OpenSSL holds; 7.88 (Debian 12's own) waits for the socket to be readable again,
    /// so a response whose last bytes were read ahead never completes (every request timed out).
    /// Versions between were not tried, so they go without read-ahead too.
    public static var readsAhead: Bool { versionNumber >= 0x080E00 }

    /// Whether the linked libcurl can speak HTTP/2, which APNs requires.
    public static var supportsHTTP2: Bool { pushrelay_curl_has_http2() != 0 }
}
