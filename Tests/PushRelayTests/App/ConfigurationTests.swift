import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Postgres
import TestSupport
import Testing

@testable import PushRelay

@Suite("Configuration")
struct ConfigurationTests {
    @Test("the YAML file supplies keys, overrides win over it, and database.url counts as a secret")
    func yamlAndOverrides() async throws {
        let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-\(UUID().uuidString).yaml")
        try """
        http:
          host: 0.0.0.0
          port: 9090
        database:
          url: "host=db.internal password=s3cret"
          max_connections: 25
        webhooks:
          max_devices: 50
        apps:
          - id: support
            webhook_secrets: ["support-secret-0123456789", "support-secret-rotated-01"]
          - id: other-app
            webhook_secrets: ["other-secret-0123456789"]
            webhook_signing_secret: "signing-secret-0123456789"
        """.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try await ConfigReader.pushRelay(
            overrides: ["http.port": .init(.int(7070), isSecret: false)],
            configFile: path
        )
        let http = HTTPSettings(config: reader.scoped(to: "http"))
        #expect(http.host == "0.0.0.0")
        #expect(http.port == 7070)
        let database = DatabaseSettings(config: reader.scoped(to: "database"))
        #expect(database.url == "host=db.internal password=s3cret")
        #expect(database.maxConnections == 25)
        #expect(database.migrateOnStart)
        #expect(reader.int(forKey: "webhooks.max_devices") == 50)

        let apps = try AppConfiguration.load(configFile: path)
        #expect(apps.map(\.id) == ["support", "other-app"])
        #expect(apps[0].webhookSecrets.count == 2)
        #expect(apps[1].webhookSigningSecret == "signing-secret-0123456789")
    }

    @Test("app mistakes stop start-up with a message naming the app and the key")
    func appValidation() throws {
        let cases: [(AppConfiguration, String)] = [
            (AppConfiguration(id: "Bad Id", webhookSecrets: ["support-secret-0123456789"]), "app id"),
            (AppConfiguration(id: "short", webhookSecrets: ["tooshort"]), "webhook_secrets[0]"),
            (AppConfiguration(id: "none", webhookSecrets: []), "at least one"),
            (
                AppConfiguration(id: "keyless", webhookSecrets: ["support-secret-0123456789"], userTokens: .init(secretFile: "/nonexistent")),
                "secret_file"
            ),
        ]
        for (app, fragment) in cases {
            let error = #expect(throws: ConfigurationError.self) { try AppConfiguration.validate([app]) }
            #expect(error?.message.contains(fragment) == true, "\(error?.message ?? "")")
        }
        let twice = AppConfiguration(id: "twice", webhookSecrets: ["support-secret-0123456789"])
        #expect(throws: ConfigurationError.self) { try AppConfiguration.validate([twice, twice]) }
    }

    @Test("a missing configuration file is an error, not a silent default")
    func missingFile() async throws {
        await #expect(throws: (any Error).self) {
            _ = try await ConfigReader.pushRelay(configFile: "/nonexistent/push-relay.yaml")
        }
    }
}
