import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Postgres
@testable import PushRelay
import TestSupport
import Testing

/// Builds the application on a database of its own.
func makeApp(conninfo: String, extra: [AbsoluteConfigKey: ConfigValue] = [:]) async throws -> some ApplicationProtocol {
    var values: [AbsoluteConfigKey: ConfigValue] = [
        "database.url": .init(.string(conninfo), isSecret: true),
        "database.max_connections": .init(.int(4), isSecret: false),
    ]
    values.merge(extra) { $1 }
    return try await buildApplication(reader: ConfigReader(provider: InMemoryProvider(values: values)), logger: TestDatabase.logger)
}

@Suite("Application skeleton")
struct ApplicationTests {
    @Test("/health answers 200 while the process runs")
    func health() async throws {
        let app = try await makeApp(conninfo: try await TestDatabase.makeDatabase())
        try await app.test(.router) { client in
            try await client.execute(uri: "/health", method: .get) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == #"{"status":"ok"}"#)
            }
        }
    }

    @Test("/ready answers 200 once migrations are applied at start")
    func readyAfterMigrations() async throws {
        let app = try await makeApp(conninfo: try await TestDatabase.makeDatabase())
        try await app.test(.router) { client in
            try await client.execute(uri: "/ready", method: .get) { response in
                #expect(response.status == .ok)
                let body = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
                #expect(body?["status"] as? String == "ready")
                #expect((body?["schema_version"] as? Int ?? 0) >= 1)
                #expect(body?["schema_version"] as? Int == body?["expected_schema_version"] as? Int)
            }
        }
    }

    @Test("/ready answers 503 migrations_pending when the schema is behind")
    func readyWithPendingMigrations() async throws {
        let app = try await makeApp(
            conninfo: try await TestDatabase.makeDatabase(),
            extra: ["database.migrate_on_start": .init(.bool(false), isSecret: false)]
        )
        try await app.test(.router) { client in
            try await client.execute(uri: "/ready", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                let body = try JSONDecoder().decode(ErrorEnvelope.self, from: Data(buffer: response.body))
                #expect(body.error.code == "migrations_pending")
            }
        }
    }

    @Test("/ready turns 503 while PostgreSQL is down and 200 again after it restarts, without restarting the relay")
    func readyFollowsTheDatabase() async throws {
        let (cluster, conninfo) = try await TestDatabase.makeCluster(durable: true)
        let app = try await makeApp(conninfo: conninfo)
        try await app.test(.router) { client in
            try await client.execute(uri: "/ready", method: .get) { #expect($0.status == .ok) }
            try await cluster.stop(immediate: true)
            try await client.execute(uri: "/ready", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(response.headers[.retryAfter] == "5")
                let body = try JSONDecoder().decode(ErrorEnvelope.self, from: Data(buffer: response.body))
                #expect(body.error.code == "database_unavailable")
                #expect(!body.error.message.contains("127.0.0.1"))
            }
            // /health does not depend on the database.
            try await client.execute(uri: "/health", method: .get) { #expect($0.status == .ok) }
            _ = try await cluster.start()
            try await client.execute(uri: "/ready", method: .get) { #expect($0.status == .ok) }
        }
        try await cluster.stop()
    }

    @Test("new request ids are distinct version 4 UUIDs, from concurrent callers too")
    func newRequestIDs() async {
        let ids = await withTaskGroup(of: [String].self) { group in
            for _ in 0..<4 { group.addTask { (0..<5_000).map { _ in RequestIDMiddleware<AppRequestContext>.newID() } } }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(Set(ids).count == 20_000)
        for id in ids.prefix(100) {
            #expect(UUID(uuidString: id) != nil && id == id.lowercased())
            #expect(Array(id)[14] == "4" && "89ab".contains(Array(id)[19]), "\(id)")
        }
    }

    @Test("unknown routes get a JSON 404 error and every response carries a request id")
    func notFoundAndRequestID() async throws {
        let app = try await makeApp(conninfo: try await TestDatabase.makeDatabase())
        let requestID = HTTPField.Name("X-Request-Id")!
        try await app.test(.router) { client in
            try await client.execute(uri: "/v1/nothing-here", method: .get) { response in
                #expect(response.status == .notFound)
                #expect(response.headers[.contentType] == "application/json; charset=utf-8")
                let body = try JSONDecoder().decode(ErrorEnvelope.self, from: Data(buffer: response.body))
                #expect(body.error.code == "not_found")
                #expect(UUID(uuidString: response.headers[requestID] ?? "") != nil)
            }
            try await client.execute(uri: "/health", method: .get, headers: [requestID: "helpdesk-retry-42"]) { response in
                #expect(response.headers[requestID] == "helpdesk-retry-42")
            }
            try await client.execute(uri: "/health", method: .get, headers: [requestID: "bad id\u{7f}"]) { response in
                #expect(response.headers[requestID] != "bad id\u{7f}")
                #expect(UUID(uuidString: response.headers[requestID] ?? "") != nil)
            }
        }
    }

    @Test("a method a known path does not serve is a JSON 405 naming the allowed methods; an unknown path stays 404")
    func methodNotAllowed() async throws {
        let app = try await makeApp(conninfo: try await TestDatabase.makeDatabase())
        try await app.test(.router) { client in
            for (uri, method, allowed) in [
                ("/health", HTTPRequest.Method.post, "GET"), ("/ready", HTTPRequest.Method(rawValue: "TRACE")!, "GET"),
                ("/metrics", .delete, "GET"), ("/v1/apps/support/devices/abc", .post, "DELETE, GET, PUT"),
            ] {
                try await client.execute(uri: uri, method: method) { response in
                    #expect(response.status == .methodNotAllowed, "\(method) \(uri)")
                    #expect(response.headers[.allow] == allowed)
                    let body = try JSONDecoder().decode(ErrorEnvelope.self, from: Data(buffer: response.body))
                    #expect(body.error.code == "method_not_allowed")
                }
            }
            try await client.execute(uri: "/v1/nothing/here", method: .post) { response in
                #expect(response.status == .notFound)
            }
        }
    }
}

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
        let http = HTTPConfiguration(config: reader.scoped(to: "http"))
        #expect(http.host == "0.0.0.0")
        #expect(http.port == 7070)
        let database = DatabaseConfiguration(config: reader.scoped(to: "database"))
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
            (AppConfiguration(id: "keyless", webhookSecrets: ["support-secret-0123456789"], userTokens: .init(secretFile: "/nonexistent")), "secret_file"),
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

@Suite("Request log")
struct RequestLogTests {
    @Test("the logged route carries neither the webhook secret nor a full device token, and unmatched paths log no segment")
    func redaction() throws {
        typealias Log = RequestLogMiddleware<AppRequestContext>
        let secret = "support-secret-0123456789"
        let token = String(repeating: "ab", count: 32)
        var parameters = Parameters()
        parameters["app"] = "support"
        parameters["secret"] = Substring(secret)
        #expect(Log.route("/v1/webhooks/zendesk/{app}/{secret}", parameters: parameters) == "/v1/webhooks/zendesk/support/…")
        parameters = Parameters()
        parameters["app"] = "support"
        parameters["token"] = Substring(token)
        let device = Log.route("/v1/apps/{app}/devices/{token}", parameters: parameters)
        #expect(!device.contains(token))
        #expect(device.hasPrefix("/v1/apps/support/devices/ababab"))
        // Unread counts of a device linked to no user are addressed by its token.
        parameters = Parameters()
        parameters["app"] = "support"
        parameters["user"] = Substring(token)
        let owner = Log.route("/v1/apps/{app}/users/{user}/unread", parameters: parameters)
        #expect(!owner.contains(token))
        #expect(owner.hasSuffix("/unread"))
        parameters["user"] = "Jos%C3%A9%0A"
        #expect(Log.route("/v1/apps/{app}/users/{user}/unread", parameters: parameters) == "/v1/apps/support/users/José\\n/unread")
        #expect(Log.route("/health", parameters: Parameters()) == "/health")
        #expect(Log.route("NotFound", parameters: Parameters()) == "(no route)")
        #expect(Log.route(nil, parameters: Parameters()) == "(no route)")
    }
}
