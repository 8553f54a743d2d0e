import Crypto
import Foundation
import Testing
import Yams

@testable import PushRelay

@Suite("Inline credentials, secret fingerprints and the managed apps' key")
struct InlineCredentialsTests {
    static let secret = "a-user-token-secret-of-at-least-32-bytes"

    static func file(_ text: String) throws -> String {
        let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("inline-\(UUID().uuidString)")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("each secret comes inline or from its file, exactly one: the messages name both keys")
    func exactlyOne() throws {
        let path = try Self.file(Self.secret + "\n")
        #expect(try AppConfiguration.UserTokens(secret: Self.secret).key(app: "a") == Self.secret)
        #expect(try AppConfiguration.UserTokens(secretFile: path).key(app: "a") == Self.secret)
        var both = AppConfiguration.UserTokens(secret: Self.secret)
        both.secretFile = path
        var neither = AppConfiguration.UserTokens(secret: Self.secret)
        neither.secret = nil
        var keyless = APNsSettings.Token(key: "", keyID: "ABCDEFGHIJ", teamID: "ABCDEFGHIJ")
        keyless.key = nil
        var accountless = FCMSettings(serviceAccountFile: path)
        accountless.serviceAccountFile = nil
        let cases: [(() throws -> Any, String)] = [
            ({ try both.key(app: "a") }, "app 'a': set only one of user_tokens.secret or user_tokens.secret_file"),
            ({ try neither.key(app: "a") }, "app 'a': set one of user_tokens.secret or user_tokens.secret_file"),
            ({ try AppConfiguration.UserTokens(secret: "short").key(app: "a") }, "the key in user_tokens.secret must be at least 32 bytes"),
            ({ try ZendeskSettings(url: "https://x.zendesk.com", email: "a@b.c", apiToken: " ").token(app: "a") }, "zendesk.api_token is empty"),
            ({ try EventSettings(url: "https://x", signingSecret: "short").secret(app: "a") }, "events.signing_secret must be at least 16 bytes"),
            ({ try keyless.privateKeyPEM(app: "a") }, "apns.token.key or apns.token.key_file"),
            ({ try accountless.serviceAccount(app: "a") }, "fcm.service_account or fcm.service_account_file"),
        ]
        for (access, fragment) in cases {
            let error = #expect(throws: ConfigurationError.self) { _ = try access() }
            #expect(error?.message.contains(fragment) == true, "\(error?.message ?? "")")
        }
        #expect(
            try ZendeskSettings(url: "https://x.zendesk.com", email: "a@b.c", apiToken: "token").authorization(app: "a")
                == "Basic " + Data("a@b.c/token:token".utf8).base64EncodedString()
        )
    }

    @Test("the YAML takes inline credentials, and encoding keeps the YAML's key names")
    func yamlAndEncoding() throws {
        let pem = P256.Signing.PrivateKey().pemRepresentation
        let yaml = """
            id: inline
            webhook_secrets: ["inline-secret-0123456789"]
            user_tokens: { secret: "\(Self.secret)" }
            apns:
              topic: com.example.inline
              token:
                key: |
            \(pem.split(separator: "\n").map { "      \($0)" }.joined(separator: "\n"))
                key_id: ABCDEFGHIJ
                team_id: KLMNOPQRST
            fcm:
              service_account: { project_id: p, client_email: a@p.iam.gserviceaccount.com, private_key: k, token_uri: "https://oauth2.googleapis.com/token" }
            zendesk: { url: "https://x.zendesk.com", email: a@x.com, api_token: zendesk-token }
            events: { url: "https://hooks.example.com", signing_secret: events-secret-0123456789 }
            """
        let app = try YAMLDecoder().decode(AppConfiguration.self, from: yaml)
        try AppConfiguration.validate([app])
        #expect(try app.apns?.token?.privateKeyPEM(app: "inline") == pem.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(try app.fcm?.serviceAccount(app: "inline").projectID == "p")
        let json = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(app)) as? [String: Any])
        #expect(Set(json.keys) == ["id", "webhook_secrets", "user_tokens", "apns", "fcm", "zendesk", "events"])
        #expect((json["zendesk"] as? [String: Any])?["api_token"] as? String == "zendesk-token")
        #expect(((json["apns"] as? [String: Any])?["token"] as? [String: Any])?["key_id"] as? String == "ABCDEFGHIJ")
        #expect(try JSONDecoder().decode(AppConfiguration.self, from: JSONEncoder().encode(app)) == app)
    }

    @Test("secrets are shown as a label and sha256: plus 8 hex digits, never a prefix")
    func fingerprints() throws {
        let app = AppConfiguration(
            id: "a",
            webhookSecrets: ["support-secret-0123456789"],
            webhookSigningSecret: "signing-secret-0123456789",
            userTokens: .init(secretFile: try Self.file(Self.secret)),
            zendesk: ZendeskSettings(url: "https://x.zendesk.com", email: "a@b.c", apiToken: "zendesk-token")
        )
        let expected = { (secret: String) in
            "sha256:" + SHA256.hash(data: Data(secret.utf8)).map { String(format: "%02x", $0) }.joined().prefix(8)
        }
        #expect(
            app.secretIdentifiers == [
                SecretIdentifier(label: "webhook_secrets[0]", secret: "support-secret-0123456789"),
                SecretIdentifier(label: "webhook_signing_secret", secret: "signing-secret-0123456789"),
                SecretIdentifier(label: "user_tokens.secret_file", secret: Self.secret),
                SecretIdentifier(label: "zendesk.api_token", secret: "zendesk-token"),
            ]
        )
        #expect(app.secretIdentifiers[0].fingerprint == expected("support-secret-0123456789"))
        #expect(
            app.secretIdentifiers.allSatisfy { identifier in
                identifier.fingerprint.hasPrefix("sha256:") && identifier.fingerprint.count == 15
                    && identifier.fingerprint.dropFirst(7).allSatisfy { "0123456789abcdef".contains($0) }
            }
        )
        let shown = String(decoding: try JSONEncoder().encode(app.withoutSecrets), as: UTF8.self)
        for secret in ["support-secret-0123456789", "signing-secret-0123456789", "zendesk-token", "supp"] {
            #expect(!shown.contains(secret), "\(shown)")
        }
    }

    @Test("the managed apps' key: 32 bytes in base64 or hex, anything else refused with how to make one")
    func keys() throws {
        let bytes = Data((0..<32).map { UInt8($0) })
        let base64 = try ManagedAppKey(text: bytes.base64EncodedString() + "\n", source: "apps_store.key_file")
        let hex = try ManagedAppKey(text: bytes.map { String(format: "%02X", $0) }.joined(), source: "apps_store.key_file")
        #expect(base64.id == hex.id)
        #expect(base64.id == SecretIdentifier.fingerprint(bytes))
        for text in ["", "c2hvcnQ=", Data(count: 31).base64EncodedString(), String(repeating: "g", count: 64)] {
            let error = #expect(throws: ConfigurationError.self) { try ManagedAppKey(text: text, source: "apps_store.key_file") }
            #expect(error?.message.contains("openssl rand -base64 32") == true)
        }
        let sealed = try base64.seal(Data("plain".utf8), app: "a")
        #expect(try base64.open(sealed, app: "a") == Data("plain".utf8))
        // The app id is authenticated: a row's value moved to another row does not open.
        #expect(throws: (any Error).self) { try base64.open(sealed, app: "b") }
        #expect(throws: (any Error).self) { try ManagedAppKey(bytes: Data(count: 32)).open(sealed, app: "a") }
    }
}
