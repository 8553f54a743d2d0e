import Configuration
import Foundation
import Yams

/// One app served by this relay, as configured under `apps:` in the YAML file.
///
/// ```yaml
/// apps:
///   - id: support                      # [a-z0-9][a-z0-9_-]*, at most 64 characters
///     webhook_secrets: ["…", "…"]      # any one matches; list two while rotating
///     webhook_signing_secret: "…"      # optional: require X-Zendesk-Webhook-Signature
///     user_tokens:
///       secret_file: /etc/push-relay/support-user-tokens.key   # HS256 key for user JWTs
///     apns: { topic: com.example.app, token: { key_file: …, key_id: …, team_id: … } }
///     fcm: { service_account_file: /etc/push-relay/support-firebase.json }
///     events: { url: https://hooks.example.com/push, signing_secret_file: /etc/push-relay/support-events.key }
/// ```
/// ``APNsSettings`` and ``FCMSettings`` describe the delivery sections. Every secret kept in a
/// file (`…_file`) may instead be given inline under the key without `_file` (`user_tokens.secret`,
/// `apns.token.key`, `fcm.service_account`, `zendesk.api_token`, `events.signing_secret`): exactly
/// one of each pair. Apps managed through the admin API (``ManagedAppStore``) use the inline form
/// only. Encoding writes the same key names, secrets included: encode only to store or send it
/// where a secret may go.
public struct AppConfiguration: Sendable, Codable, Hashable {
    /// The app's id, used in every URL and registry row.
    public var id: String
    /// Secrets accepted in the webhook URL. Each at least 16 URL-safe characters.
    public var webhookSecrets: [String]
    /// When set, webhooks must carry a valid `X-Zendesk-Webhook-Signature`.
    public var webhookSigningSecret: String?
    /// More secrets a signature may be made with, while the signing secret is rotated (the file's
    /// `webhook_signing_secret` given as a list: its first entry is ``webhookSigningSecret``).
    public var additionalWebhookSigningSecrets: [String] = []

    /// Every secret a webhook signature is checked against; none when signatures are not required.
    public var webhookSigningSecrets: [String] {
        webhookSigningSecret.map { [$0] + additionalWebhookSigningSecrets } ?? []
    }
    /// Where the HS256 key for user JWTs is read from.
    public var userTokens: UserTokens?
    /// How to reach APNs for this app's iOS devices; without it iOS deliveries fail as unconfigured.
    public var apns: APNsSettings?
    /// How to reach FCM for this app's Android devices.
    public var fcm: FCMSettings?
    /// Where dead and bulk-unregistered tokens are forwarded (Zendesk's Bulk Unregister API).
    public var zendesk: ZendeskSettings?
    /// Where the app's feedback events (delivered, failed, dead token …) are sent; none when absent.
    public var events: EventSettings?
    /// What alert pushes carry (full text, generic, or encrypted) and how they group; full text
    /// grouped by ticket when absent.
    public var push: PushSettings?

    /// User JWT settings: the HS256 key, inline (`secret`) or in a file (`secret_file`).
    public struct UserTokens: Sendable, Codable, Hashable {
        /// The HS256 key itself (trimmed).
        public var secret: String?
        /// A file whose content (trimmed) is the HS256 key.
        public var secretFile: String?
        /// Whether a user token may link a device registered to no user (implicitly, by a
        /// webhook, or by an app key without `user_id`) to its user. Off unless set: anyone with
        /// a user token of the app could otherwise take over such a device.
        public var claimUnownedDevices: Bool?

        public init(secretFile: String, claimUnownedDevices: Bool? = nil) {
            self.secretFile = secretFile
            self.claimUnownedDevices = claimUnownedDevices
        }

        public init(secret: String, claimUnownedDevices: Bool? = nil) {
            self.secret = secret
            self.claimUnownedDevices = claimUnownedDevices
        }

        enum CodingKeys: String, CodingKey {
            case secret
            case secretFile = "secret_file"
            case claimUnownedDevices = "claim_unowned_devices"
        }
    }

    public init(
        id: String,
        webhookSecrets: [String],
        webhookSigningSecret: String? = nil,
        userTokens: UserTokens? = nil,
        apns: APNsSettings? = nil,
        fcm: FCMSettings? = nil,
        zendesk: ZendeskSettings? = nil,
        events: EventSettings? = nil
    ) {
        self.zendesk = zendesk
        self.events = events
        self.id = id
        self.webhookSecrets = webhookSecrets
        self.webhookSigningSecret = webhookSigningSecret
        self.userTokens = userTokens
        self.apns = apns
        self.fcm = fcm
    }

    enum CodingKeys: String, CodingKey {
        case id, apns, fcm, zendesk, events, push
        case webhookSecrets = "webhook_secrets"
        case webhookSigningSecret = "webhook_signing_secret"
        case userTokens = "user_tokens"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        webhookSecrets = try container.decode([String].self, forKey: .webhookSecrets)
        // One secret, or a list while rotating.
        if let list = try? container.decodeIfPresent([String].self, forKey: .webhookSigningSecret) {
            webhookSigningSecret = list.first
            additionalWebhookSigningSecrets = Array(list.dropFirst())
        } else {
            webhookSigningSecret = try container.decodeIfPresent(String.self, forKey: .webhookSigningSecret)
        }
        userTokens = try container.decodeIfPresent(UserTokens.self, forKey: .userTokens)
        apns = try container.decodeIfPresent(APNsSettings.self, forKey: .apns)
        fcm = try container.decodeIfPresent(FCMSettings.self, forKey: .fcm)
        zendesk = try container.decodeIfPresent(ZendeskSettings.self, forKey: .zendesk)
        events = try container.decodeIfPresent(EventSettings.self, forKey: .events)
        push = try container.decodeIfPresent(PushSettings.self, forKey: .push)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(webhookSecrets, forKey: .webhookSecrets)
        if additionalWebhookSigningSecrets.isEmpty {
            try container.encodeIfPresent(webhookSigningSecret, forKey: .webhookSigningSecret)
        } else {
            try container.encode(webhookSigningSecrets, forKey: .webhookSigningSecret)
        }
        try container.encodeIfPresent(userTokens, forKey: .userTokens)
        try container.encodeIfPresent(apns, forKey: .apns)
        try container.encodeIfPresent(fcm, forKey: .fcm)
        try container.encodeIfPresent(zendesk, forKey: .zendesk)
        try container.encodeIfPresent(events, forKey: .events)
        try container.encodeIfPresent(push, forKey: .push)
    }

    /// Whether `value` can be an app id.
    public static func isValidID(_ value: some StringProtocol) -> Bool {
        guard let first = value.utf8.first, value.utf8.count <= 64, isLowerAlphanumeric(first) else { return false }
        return value.utf8.allSatisfy { isLowerAlphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }

    private static func isLowerAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }

    /// Whether `value` can be a webhook secret: 16–256 characters from `A-Z a-z 0-9 - _ . ~`.
    public static func isValidWebhookSecret(_ value: String) -> Bool {
        value.utf8.count >= 16 && value.utf8.count <= 256
            && value.utf8.allSatisfy { byte in
                (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122) || (byte >= 48 && byte <= 57)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
                    || byte == UInt8(ascii: "~")
            }
    }
}

extension AppConfiguration {
    private struct File: Decodable {
        var apps: [AppConfiguration]?
    }

    /// The apps of the configuration file named by `config.file`; none when no file is named.
    public static func load(reader: ConfigReader) throws -> [AppConfiguration] {
        try reader.string(forKey: "config.file").map { try load(configFile: $0) } ?? []
    }

    /// Reads the `apps:` list of a YAML configuration file; an absent list means no apps.
    public static func load(configFile: String) throws -> [AppConfiguration] {
        let data = try ConfiguredFile.read(configFile, what: "cannot read the configuration file")
        let apps: [AppConfiguration]
        do {
            try checkKeys(yaml: String(decoding: data, as: UTF8.self), file: configFile)
            apps = try YAMLDecoder().decode(File.self, from: data).apps ?? []
        } catch let error as DecodingError {
            if case .dataCorrupted(let context) = error, context.underlyingError is YamlError {
                throw ConfigurationError.invalidYAML(error, file: configFile)
            }
            throw ConfigurationError("invalid apps section in \(configFile): \(Self.describe(error))")
        } catch let error as YamlError {
            throw ConfigurationError.invalidYAML(error, file: configFile)
        }
        try validate(apps)
        return apps
    }

    /// The keys an entry of `apps:` may hold, dotted (`apns.token.key_id`).
    public static let knownKeys: [String] =
        [
            "id", "webhook_secrets", "webhook_signing_secret", "user_tokens.secret_file", "user_tokens.secret",
            "user_tokens.claim_unowned_devices",
            "apns.topic", "apns.environment", "apns.url", "apns.production_url", "apns.sandbox_url",
            "apns.token.key_file", "apns.token.key", "apns.token.key_id", "apns.token.team_id",
            "apns.certificate.file", "apns.certificate.type", "apns.certificate.key_file",
            "apns.certificate.password_file",
            "fcm.service_account_file", "fcm.service_account", "fcm.url",
            "zendesk.url", "zendesk.email", "zendesk.api_token_file", "zendesk.api_token",
            "events.url", "events.signing_secret_file", "events.signing_secret", "events.types",
        ] + PushSettings.knownKeys

    /// Refuses keys of `apps:` entries that no setting reads, naming the app, the key and the
    /// nearest known key (the decoder alone would ignore a misspelt `webhook_secret`).
    static func checkKeys(yaml: String, file: String) throws {
        guard let root = (try? Yams.load(yaml: yaml)) as? [String: Any], let list = root["apps"] as? [Any] else {
            return
        }
        let known = Set(knownKeys)
        let sections = Set(
            knownKeys.flatMap { key in
                let parts = key.split(separator: ".")
                return (1..<max(parts.count, 1)).map { parts[0..<$0].joined(separator: ".") }
            }
        )
        func walk(_ mapping: [String: Any], prefix: String, app: String) throws {
            for (key, value) in mapping.sorted(by: { $0.key < $1.key }) {
                let full = prefix.isEmpty ? key : prefix + "." + key
                if known.contains(full) { continue }
                if sections.contains(full), let nested = value as? [String: Any] {
                    try walk(nested, prefix: full, app: app)
                    continue
                }
                throw ConfigurationError(
                    "\(file): apps entry \(app): unknown key '\(full)'\(nearestNameSuggestion(for: full, among: knownKeys))"
                )
            }
        }
        for (index, entry) in list.enumerated() {
            guard let mapping = entry as? [String: Any] else { continue }
            let app = (mapping["id"] as? String).map { "'\($0)'" } ?? "[\(index)]"
            try walk(mapping, prefix: "", app: app)
        }
    }

    /// Checks ids, secrets and key files, so that a mistake stops start-up with a clear message.
    public static func validate(_ apps: [AppConfiguration]) throws {
        var seen = Set<String>()
        for app in apps {
            guard isValidID(app.id) else {
                throw ConfigurationError(
                    "app id '\(app.id)' must be lower-case letters, digits, '-' or '_' (at most 64)"
                )
            }
            guard seen.insert(app.id).inserted else { throw ConfigurationError("app id '\(app.id)' appears twice") }
            guard !app.webhookSecrets.isEmpty else {
                throw ConfigurationError("app '\(app.id)': webhook_secrets must list at least one secret")
            }
            for (index, secret) in app.webhookSecrets.enumerated() where !isValidWebhookSecret(secret) {
                throw ConfigurationError(
                    "app '\(app.id)': webhook_secrets[\(index)] must be 16-256 characters of A-Z a-z 0-9 - _ . ~"
                )
            }
            if app.webhookSigningSecret != nil || !app.additionalWebhookSigningSecrets.isEmpty {
                guard !app.webhookSigningSecrets.isEmpty, app.webhookSigningSecrets.allSatisfy({ $0.utf8.count >= 16 })
                else {
                    throw ConfigurationError(
                        "app '\(app.id)': webhook_signing_secret must be at least 16 characters (each, when a list)"
                    )
                }
            }
            if let tokens = app.userTokens {
                _ = try tokens.key(app: app.id)
            }
            try app.apns?.validate(app: app.id)
            try app.fcm?.validate(app: app.id)
            try app.zendesk?.validate(app: app.id)
            try app.events?.validate(app: app.id)
            try app.push?.validate(app: app.id)
        }
    }

    /// A decoding error as a message naming the key (`missing .apns.topic`).
    static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        }
        switch error {
        case .keyNotFound(let key, let context): return "missing \(path(context)).\(key.stringValue)"
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            return "\(path(context)): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}

extension AppConfiguration.UserTokens {
    /// The HS256 key, inline or from its file; at least 32 bytes, as RFC 7518 asks of HS256 keys.
    func key(app: String) throws -> String {
        try secretMaterial(
            inline: secret,
            file: secretFile,
            app: app,
            key: "user_tokens.secret",
            fileKey: "user_tokens.secret_file",
            minBytes: 32,
            what: "the key"
        )
    }
}
