import Foundation

/// An app's APNs section.
///
/// ```yaml
/// apns:
///   topic: com.example.app          # the app's bundle id (apns-topic)
///   environment: production         # or sandbox: Apple's host for devices registered without one
///   # url: https://localhost:8443   # one host for every request, such as `push-relay sandbox`
///   # production_url: …             # or replace Apple's host of one environment (a proxy, a test gateway)
///   # sandbox_url: …
///   token:                          # token authentication (recommended) ...
///     key_file: /etc/push-relay/AuthKey_ABC123DEFG.p8   # or key: the .p8 file's PEM text
///     key_id: ABC123DEFG
///     team_id: DEF123GHIJ
///   # certificate:                  # ... or certificate authentication
///   #   file: /etc/push-relay/apns.p12
///   #   type: P12                   # or PEM
///   #   password_file: /etc/push-relay/apns.p12.password
///   #   key_file: /etc/push-relay/apns-key.pem   # PEM only, when the key is a separate file
/// ```
/// Certificate authentication reads files only (libcurl loads the certificate from a path), so an
/// app managed through the admin API uses token authentication.
public struct APNsSettings: Sendable, Codable, Hashable {
    public var topic: String
    public var environment: Environment
    public var url: String?
    public var productionURL: String?
    public var sandboxURL: String?
    public var token: Token?
    public var certificate: Certificate?

    public enum Environment: String, Sendable, Codable, Hashable {
        case production, sandbox

        /// Apple's host for this environment.
        public var url: String {
            switch self {
            case .production: "https://api.push.apple.com"
            case .sandbox: "https://api.sandbox.push.apple.com"
            }
        }
    }

    /// Token authentication: a `.p8` key signs ES256 provider tokens. The key is given inline
    /// (`key`, the PEM text) or as a file (`key_file`): exactly one.
    public struct Token: Sendable, Codable, Hashable {
        /// The `.p8` file's content: PKCS#8 PEM of a P-256 key.
        public var key: String?
        public var keyFile: String?
        public var keyID: String
        public var teamID: String

        public init(keyFile: String, keyID: String, teamID: String) {
            self.keyFile = keyFile
            self.keyID = keyID
            self.teamID = teamID
        }

        public init(key: String, keyID: String, teamID: String) {
            self.key = key
            self.keyID = keyID
            self.teamID = teamID
        }

        enum CodingKeys: String, CodingKey {
            case key
            case keyFile = "key_file"
            case keyID = "key_id"
            case teamID = "team_id"
        }

        /// The PEM text of the key, inline or read from `key_file`.
        func privateKeyPEM(app: String) throws -> String {
            try secretMaterial(
                inline: key,
                file: keyFile,
                app: app,
                key: "apns.token.key",
                fileKey: "apns.token.key_file",
                minBytes: 1
            )
        }

        /// The configuration key the private key came from, for messages.
        var keySource: String { key != nil ? "apns.token.key" : "apns.token.key_file" }
    }

    /// Certificate authentication: a client certificate on the TLS connection.
    public struct Certificate: Sendable, Codable, Hashable {
        public var file: String
        public var type: String?
        public var keyFile: String?
        public var passwordFile: String?

        public init(file: String, type: String? = nil, keyFile: String? = nil, passwordFile: String? = nil) {
            self.file = file
            self.type = type
            self.keyFile = keyFile
            self.passwordFile = passwordFile
        }

        enum CodingKeys: String, CodingKey {
            case file, type
            case keyFile = "key_file"
            case passwordFile = "password_file"
        }

        /// `P12` or `PEM`: as configured, else from the file name.
        var resolvedType: String {
            if let type { return type.uppercased() }
            return file.lowercased().hasSuffix(".pem") ? "PEM" : "P12"
        }
    }

    public init(
        topic: String,
        environment: Environment = .production,
        url: String? = nil,
        token: Token? = nil,
        certificate: Certificate? = nil
    ) {
        self.topic = topic
        self.environment = environment
        self.url = url
        self.token = token
        self.certificate = certificate
    }

    /// Settings that replace Apple's host of each environment, so the environment check runs.
    public init(
        topic: String,
        environment: Environment = .production,
        productionURL: String?,
        sandboxURL: String?,
        token: Token? = nil
    ) {
        self.init(topic: topic, environment: environment, token: token)
        self.productionURL = productionURL
        self.sandboxURL = sandboxURL
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        topic = try container.decode(String.self, forKey: .topic)
        environment = try container.decodeIfPresent(Environment.self, forKey: .environment) ?? .production
        url = try container.decodeIfPresent(String.self, forKey: .url)
        productionURL = try container.decodeIfPresent(String.self, forKey: .productionURL)
        sandboxURL = try container.decodeIfPresent(String.self, forKey: .sandboxURL)
        token = try container.decodeIfPresent(Token.self, forKey: .token)
        certificate = try container.decodeIfPresent(Certificate.self, forKey: .certificate)
    }

    enum CodingKeys: String, CodingKey {
        case topic, environment, url, token, certificate
        case productionURL = "production_url"
        case sandboxURL = "sandbox_url"
    }

    /// Where requests go for the app's own environment: `url` when set, else that environment's host.
    public var baseURL: String { baseURL(for: environment) }

    /// Where requests for devices of `environment` go: `url` when set (one host for everything),
    /// else `production_url` / `sandbox_url`, else Apple's host.
    public func baseURL(for environment: Environment) -> String {
        (url ?? (environment == .production ? productionURL : sandboxURL) ?? environment.url).trimmingSuffix("/")
    }

    func validate(app: String) throws {
        guard !topic.isEmpty else { throw ConfigurationError("app '\(app)': apns.topic must name the app's bundle id") }
        switch (token, certificate) {
        case (nil, nil), (.some, .some):
            throw ConfigurationError("app '\(app)': apns needs exactly one of token (a .p8 key) or certificate")
        case (let token?, nil):
            _ = try token.privateKeyPEM(app: app)
            guard token.keyID.count == 10, token.teamID.count == 10 else {
                throw ConfigurationError("app '\(app)': apns.token.key_id and team_id are Apple's 10-character ids")
            }
        case (nil, let certificate?):
            try ConfiguredFile.checkReadable(certificate.file, what: "app '\(app)': cannot read apns.certificate.file")
            guard ["P12", "PEM"].contains(certificate.resolvedType) else {
                throw ConfigurationError("app '\(app)': apns.certificate.type must be P12 or PEM")
            }
        }
        if let url { try validateHTTPSURL(url, app: app, key: "apns.url") }
        if let productionURL { try validateHTTPSURL(productionURL, app: app, key: "apns.production_url") }
        if let sandboxURL { try validateHTTPSURL(sandboxURL, app: app, key: "apns.sandbox_url") }
    }

    /// The password of a P12 certificate, read from its file.
    func certificatePassword() throws -> String? {
        guard let path = certificate?.passwordFile else { return nil }
        let data = try ConfiguredFile.read(path, what: "cannot read apns.certificate.password_file")
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
    }
}
