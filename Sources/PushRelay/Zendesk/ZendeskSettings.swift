import Configuration
import Foundation

/// An app's Zendesk section: where dead and bulk-unregistered tokens are forwarded.
///
/// ```yaml
/// zendesk:
///   url: https://example.zendesk.com            # the account's base URL
///   email: admin@example.com                    # an admin's email; Basic {email}/token:{api_token}
///   api_token_file: /etc/push-relay/zendesk-api-token   # or api_token: the token itself
/// ```
public struct ZendeskSettings: Sendable, Codable, Hashable {
    public var url: String
    public var email: String
    /// The API token itself (exactly one of this and ``apiTokenFile``).
    public var apiToken: String?
    public var apiTokenFile: String?

    public init(url: String, email: String, apiTokenFile: String) {
        self.url = url
        self.email = email
        self.apiTokenFile = apiTokenFile
    }

    public init(url: String, email: String, apiToken: String) {
        self.url = url
        self.email = email
        self.apiToken = apiToken
    }

    enum CodingKeys: String, CodingKey {
        case url, email
        case apiToken = "api_token"
        case apiTokenFile = "api_token_file"
    }

    /// The API token, inline or read from its file.
    func token(app: String) throws -> String {
        try secretMaterial(
            inline: apiToken,
            file: apiTokenFile,
            app: app,
            key: "zendesk.api_token",
            fileKey: "zendesk.api_token_file",
            minBytes: 1
        )
    }

    public var baseURL: String { url.trimmingSuffix("/") }

    /// `Basic base64({email}/token:{api_token})`.
    func authorization(app: String) throws -> String {
        let token = try token(app: app)
        return "Basic " + Data("\(email)/token:\(token)".utf8).base64EncodedString()
    }

    func validate(app: String) throws {
        try validateHTTPSURL(url, app: app, key: "zendesk.url")
        guard email.contains("@") else {
            throw ConfigurationError("app '\(app)': zendesk.email must be an admin's email address")
        }
        _ = try authorization(app: app)
    }
}

/// How the Zendesk forwarder works (`zendesk.*`, one set for every app).
///
/// Keys, read from a reader scoped to `zendesk`:
/// - `batch_size` (int, default 100): most tokens in one bulk-unregister request (Zendesk's limit is 100).
/// - `poll_interval_ms` (int, default 1000, at least 10): how often the queue is looked at when idle.
/// - `retry_base_ms` (int, default 1000): first retry delay, doubled per attempt up to 4096 times it.
/// - `max_retry_after_seconds` (int, default 3600): the longest `Retry-After` honoured.
public struct ZendeskForwarderSettings: Sendable {
    public var batchSize = 100
    public var pollInterval = Duration.seconds(1)
    public var retryBase = Duration.seconds(1)
    /// The longest `Retry-After` from Zendesk that is honoured (`max_retry_after_seconds`, default
    /// 3600, 0 to ignore the header); Zendesk's rate limits ask for seconds to minutes.
    public var maxRetryAfter = Duration.seconds(3600)

    public init() {}
}
