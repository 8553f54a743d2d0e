import Configuration
import Crypto
import Foundation
import JWTKit

extension AppConfiguration {
    /// The apps of the configuration file, checked as far as can be without a network: ids,
    /// secrets and files (``validate(_:)``), and the credentials themselves: the `.p8` key parses
    /// as a P-256 key, the service account's key as an RSA key. `serve`, a reload and
    /// `push-relay config check` all refuse a file this refuses.
    public static func loadChecked(reader: ConfigReader) async throws -> [AppConfiguration] {
        let apps = try load(reader: reader)
        for app in apps { try await app.checkCredentials() }
        return apps
    }

    /// Parses the app's signing keys.
    func checkCredentials() async throws {
        if let token = apns?.token {
            let pem = try readSecretFile(token.keyFile, app: id, key: "apns.token.key_file", minBytes: 1)
            guard (try? P256.Signing.PrivateKey(pemRepresentation: pem)) != nil else {
                throw ConfigurationError("app '\(id)': apns.token.key_file is not a PKCS#8 P-256 key (.p8)")
            }
        }
        if let fcm {
            let account = try fcm.serviceAccount(app: id)
            guard (try? Insecure.RSA.PrivateKey(pem: account.privateKey)) != nil else {
                throw ConfigurationError("app '\(id)': the private_key of fcm.service_account_file is not an RSA key")
            }
        }
    }

    /// The app as an operator checks it: each secret and credential by its ``Fingerprint``, never
    /// its value. Files that cannot be read show as such (``loadChecked(reader:)`` refuses them).
    public var summary: [String] {
        func file(_ path: String) -> String {
            guard let data = FileManager.default.contents(atPath: path) else { return "\(path) (unreadable)" }
            return "\(path) \(Fingerprint.of(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)))"
        }
        var lines = webhookSecrets.enumerated().map { "webhook_secrets[\($0.offset)]: \(Fingerprint.of($0.element))" }
        for (index, secret) in webhookSigningSecrets.enumerated() {
            lines.append("webhook_signing_secret\(webhookSigningSecrets.count > 1 ? "[\(index)]" : ""): \(Fingerprint.of(secret))")
        }
        if let userTokens { lines.append("user_tokens.secret_file: \(file(userTokens.secretFile))") }
        if let apns {
            lines.append("apns: topic \(apns.topic), \(apns.environment.rawValue), \(apns.baseURL)")
            if let token = apns.token {
                lines.append("apns.token: key_id \(token.keyID), team_id \(token.teamID), key_file \(file(token.keyFile))")
            }
            if let certificate = apns.certificate { lines.append("apns.certificate: \(file(certificate.file))") }
        }
        if let fcm {
            let account = try? fcm.serviceAccount(app: id)
            lines.append(
                "fcm: \(fcm.baseURL), project \(account?.projectID ?? "?"), \(account?.clientEmail ?? "?"), "
                    + "service_account_file \(file(fcm.serviceAccountFile))"
            )
        }
        if let zendesk { lines.append("zendesk: \(zendesk.baseURL) as \(zendesk.email), api_token_file \(file(zendesk.apiTokenFile))") }
        if let events {
            lines.append(
                "events: \(events.url), types \(events.eventTypes.map(\.rawValue).sorted().joined(separator: ",")), "
                    + "signing_secret_file \(file(events.signingSecretFile))"
            )
        }
        return lines
    }
}
