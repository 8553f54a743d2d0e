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
        for app in apps { try app.checkCredentials() }
        return apps
    }

    /// Parses the app's signing keys.
    func checkCredentials() throws {
        if let token = apns?.token {
            guard (try? P256.Signing.PrivateKey(pemRepresentation: try token.privateKeyPEM(app: id))) != nil else {
                _ = try token.privateKeyPEM(app: id)
                throw ConfigurationError("app '\(id)': \(token.keySource) is not a PKCS#8 P-256 key (.p8)")
            }
        }
        if let fcm {
            let account = try fcm.serviceAccount(app: id)
            guard (try? Insecure.RSA.PrivateKey(pem: account.privateKey)) != nil else {
                throw ConfigurationError("app '\(id)': the private_key of \(fcm.accountSource) is not an RSA key")
            }
        }
    }

    /// The app as an operator checks it: where it delivers, and each secret and credential by its
    /// fingerprint (``secretIdentifiers``), never its value.
    public var summary: [String] {
        var lines: [String] = []
        if let apns {
            var line = "apns: topic \(apns.topic), \(apns.environment.rawValue), \(apns.baseURL)"
            if let token = apns.token { line += ", key_id \(token.keyID), team_id \(token.teamID)" }
            if let certificate = apns.certificate { line += ", certificate \(certificate.file)" }
            lines.append(line)
        }
        if let fcm {
            let account = try? fcm.serviceAccount(app: id)
            lines.append("fcm: \(fcm.baseURL), project \(account?.projectID ?? "?"), \(account?.clientEmail ?? "?")")
        }
        if let zendesk { lines.append("zendesk: \(zendesk.baseURL) as \(zendesk.email)") }
        if let events {
            lines.append(
                "events: \(events.url), types \(events.eventTypes.map(\.rawValue).sorted().joined(separator: ","))"
            )
        }
        return lines + secretIdentifiers.map { "\($0.label): \($0.fingerprint)" }
    }
}
