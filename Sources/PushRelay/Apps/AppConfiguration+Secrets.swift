import Foundation

extension AppConfiguration {
    /// Every secret of the app as an identifier (where it is configured and a fingerprint), in the
    /// order of the configuration. A secret kept in a file is fingerprinted from the file's content
    /// and left out when the file cannot be read.
    public var secretIdentifiers: [SecretIdentifier] {
        var list = webhookSecrets.enumerated().map {
            SecretIdentifier(label: "webhook_secrets[\($0.offset)]", secret: $0.element)
        }
        let signing = webhookSigningSecrets
        for (index, secret) in signing.enumerated() {
            list.append(
                SecretIdentifier(
                    label: signing.count > 1 ? "webhook_signing_secret[\(index)]" : "webhook_signing_secret",
                    secret: secret
                )
            )
        }
        func add(_ label: String, _ material: () throws -> String) {
            if let secret = try? material() { list.append(SecretIdentifier(label: label, secret: secret)) }
        }
        if let tokens = userTokens {
            add(tokens.secret != nil ? "user_tokens.secret" : "user_tokens.secret_file") { try tokens.key(app: id) }
        }
        if let token = apns?.token {
            add(token.keySource) { try token.privateKeyPEM(app: id) }
        }
        if let fcm {
            add(
                fcm.inlineServiceAccount != nil
                    ? "fcm.service_account.private_key" : "fcm.service_account_file (private_key)"
            ) {
                try fcm.serviceAccount(app: id).privateKey
            }
        }
        if let zendesk {
            add(zendesk.apiToken != nil ? "zendesk.api_token" : "zendesk.api_token_file") { try zendesk.token(app: id) }
        }
        if let events {
            add(events.signingSecret != nil ? "events.signing_secret" : "events.signing_secret_file") {
                try events.secretText(app: id)
            }
        }
        return list
    }

    /// The keys of this configuration that name files on the relay's disk. An app stored in
    /// PostgreSQL may use none: each instance would read its own disk, and the admin API must not
    /// make the relay read a path its caller chose.
    var fileKeys: [String] {
        var keys: [String] = []
        if userTokens?.secretFile != nil { keys.append("user_tokens.secret_file") }
        if apns?.token?.keyFile != nil { keys.append("apns.token.key_file") }
        if apns?.certificate != nil { keys.append("apns.certificate") }
        if fcm?.serviceAccountFile != nil { keys.append("fcm.service_account_file") }
        if zendesk?.apiTokenFile != nil { keys.append("zendesk.api_token_file") }
        if events?.signingSecretFile != nil { keys.append("events.signing_secret_file") }
        return keys
    }

    /// This configuration as the API shows it: the YAML's key names and every value that is not
    /// a secret (file paths included); the secrets themselves are left out (``secretIdentifiers``
    /// names them), as is the `private_key` of an inline service account.
    public var withoutSecrets: PublicView { PublicView(app: self) }

    /// See ``withoutSecrets``.
    public struct PublicView: Encodable, Sendable {
        let app: AppConfiguration

        public func encode(to encoder: any Encoder) throws {
            var copy = app
            copy.userTokens?.secret = nil
            copy.apns?.token?.key = nil
            copy.zendesk?.apiToken = nil
            copy.events?.signingSecret = nil
            var container = encoder.container(keyedBy: AppConfiguration.CodingKeys.self)
            try container.encode(copy.id, forKey: .id)
            try container.encodeIfPresent(copy.userTokens, forKey: .userTokens)
            try container.encodeIfPresent(copy.apns, forKey: .apns)
            if let fcm = copy.fcm {
                var nested = container.nestedContainer(keyedBy: FCMSettings.CodingKeys.self, forKey: .fcm)
                try nested.encodeIfPresent(fcm.serviceAccountFile, forKey: .serviceAccountFile)
                try nested.encodeIfPresent(fcm.url, forKey: .url)
                if let account = fcm.inlineServiceAccount {
                    var inline = nested.nestedContainer(
                        keyedBy: ServiceAccount.CodingKeys.self,
                        forKey: .inlineServiceAccount
                    )
                    try inline.encode(account.projectID, forKey: .projectID)
                    try inline.encode(account.clientEmail, forKey: .clientEmail)
                    try inline.encode(account.tokenURI, forKey: .tokenURI)
                }
            }
            try container.encodeIfPresent(copy.zendesk, forKey: .zendesk)
            try container.encodeIfPresent(copy.events, forKey: .events)
        }
    }
}
