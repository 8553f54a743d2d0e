/// `console.*` keys; the values below are the defaults, and `ConsoleSettings+ConfigReader.swift`
/// reads the keys.
public struct ConsoleSettings: Sendable {
    /// Serve the console at `/console` (default true).
    public var enabled = true
    /// A session unused this long ends (default 30 minutes).
    public var idleTimeout = Duration.seconds(1800)
    /// A session ends this long after sign-in (default 12 hours).
    public var sessionLifetime = Duration.seconds(43_200)
    /// `auto` (default): the session cookie is `Secure` (and `__Host-` prefixed) when the request
    /// came over TLS (its scheme, or `X-Forwarded-Proto: https` from one of `http.trusted_proxies`);
    /// `always` or `never` override.
    public var secureCookies = "auto"
    /// Most sessions one key holds; a sign-in past it closes the key's oldest (default 5, 1-100).
    public var maxSessionsPerKey = ConsoleSessionStore.defaultMaxPerKey
    /// Sign-ins each instance accepts per minute for one key (default 10) and from one client
    /// address (default 30), every attempt counted; past them 429 with `Retry-After`.
    public var signInsPerKey = 10
    public var signInsPerAddress = 30

    public init() {}
}
