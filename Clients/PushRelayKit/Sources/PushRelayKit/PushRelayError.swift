/// Why a PushRelayKit call or background request failed.
public enum PushRelayError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No user is authorized: call ``PushRelayClient/authorize(userID:tokenProvider:)`` first.
    case notAuthorized
    /// The relay refused the user token, also a fresh one from the token provider (a wrong
    /// signing key, a `sub` that is not the user, an app without user tokens).
    case unauthorized(String)
    /// The token provider threw; its error's description.
    case tokenProvider(String)
    /// The relay could not be reached or the connection broke (no network, relay down, timeout).
    case network(String)
    /// The relay answered with an error: HTTP status, the error `code` and message it sent.
    case server(status: Int, code: String, message: String)
    /// The relay's answer was not what the API promises.
    case invalidResponse(String)
    /// The push key store (``PushRelayClient/Configuration/pushKeys``) failed to read or save a
    /// key; its error's description.
    case pushKeyStore(String)

    public var description: String {
        switch self {
        case .notAuthorized: "no user is authorized"
        case .unauthorized(let message): "the relay refused the user token: \(message)"
        case .tokenProvider(let message): "the token provider failed: \(message)"
        case .network(let message): "network error: \(message)"
        case .server(let status, let code, let message): "the relay answered \(status) \(code): \(message)"
        case .invalidResponse(let message): "unexpected answer from the relay: \(message)"
        case .pushKeyStore(let message): "the push key store failed: \(message)"
        }
    }

    /// The message that goes with the case, without the prefix ``description`` adds.
    public var message: String {
        switch self {
        case .notAuthorized: "no user is authorized"
        case .unauthorized(let message), .tokenProvider(let message), .network(let message), .invalidResponse(let message),
            .pushKeyStore(let message):
            message
        case .server(_, _, let message): message
        }
    }

    /// Worth retrying later by itself: the network, a relay busy or restarting (5xx, 429).
    public var isTransient: Bool {
        switch self {
        case .network: true
        case .server(let status, _, _): status >= 500 || status == 429
        default: false
        }
    }
}
