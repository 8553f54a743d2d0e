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
                #expect(String(buffer: response.body) == #"{"status":"ok","version":"\#(PushRelayVersion.build)"}"#)
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
                #expect(body?["version"] as? String == PushRelayVersion.build, "which build answers, after an upgrade")
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
            // /ready answers from a check at most a second old: the outage shows within it.
            var response = try await client.execute(uri: "/ready", method: .get)
            #expect(
                try await eventually {
                    response = try await client.execute(uri: "/ready", method: .get)
                    return response.status == .serviceUnavailable
                }
            )
            #expect(response.headers[.retryAfter] == "5")
            let body = try JSONDecoder().decode(ErrorEnvelope.self, from: Data(buffer: response.body))
            #expect(body.error.code == "database_unavailable")
            #expect(!body.error.message.contains("127.0.0.1"))
            // /health does not depend on the database.
            try await client.execute(uri: "/health", method: .get) { #expect($0.status == .ok) }
            _ = try await cluster.start()
            #expect(try await eventually { try await client.execute(uri: "/ready", method: .get).status == .ok })
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
