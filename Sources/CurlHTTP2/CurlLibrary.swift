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

    /// Whether the linked libcurl can speak HTTP/2, which APNs requires.
    public static var supportsHTTP2: Bool { pushrelay_curl_has_http2() != 0 }
}
