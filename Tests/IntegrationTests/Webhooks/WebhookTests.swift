import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Postgres
import StrictJSON
import TestSupport
import Testing

@testable import PushRelay

/// The two ways a webhook can take through a relay: the router alone (`app.test(.router)`), and a
/// live server, where a well-formed webhook is taken on the connection's event loop
/// (``WebhookShortcut``) and any other goes on to the router. Every intake test runs both.
enum WebhookPath: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case router
    case live

    var testDescription: String { rawValue }
}

extension ApplicationProtocol {
    /// `test(.router)`, or ``testLive(_:)`` (the live server with a client whose read timeout only
    /// bounds a hang), as `path` says.
    func test<Value>(on path: WebhookPath, _ test: @Sendable (any TestClientProtocol) async throws -> Value) async throws -> Value {
        switch path {
        case .router: try await self.test(.router, test)
        case .live: try await testLive(test)
        }
    }
}

@Suite("Zendesk webhook intake")
struct WebhookTests {
    static let url = "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)"
    static let json: HTTPFields = [.contentType: "application/json"]

    @Test("the fixture is stored durably: 202 after commit, with the notification and one delivery per device", arguments: WebhookPath.allCases)
    func fixtureAccepted(mode: WebhookPath) async throws {
        let test = try await TestApp.make()
        try await test.application().test(on: mode) { client in
            let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(fixtureWebhook))
            #expect(response.status == .accepted)
            let body = try #require(response.json)
            #expect(body["deliveries"] as? Int == 2)
            #expect(body["skipped"] as? Int == 0)
            let id = try #require(body["notification_id"] as? Int)

            let row = try #require(
                try await test.client.query(
                    "SELECT app_id, ticket_id, title, body FROM notifications WHERE id = $1",
                    [id]
                ).first
            )
            let (app, ticket, title, text) = try row.decode((String, String, String, String).self)
            #expect(app == "support")
            #expect(ticket == "5")
            #expect(title == "Agent replied")
            #expect(text == "Agent replied something something")
            let deliveries = try await test.client.query(
                "SELECT device_token, platform, status FROM deliveries WHERE notification_id = $1 ORDER BY platform",
                [id]
            ).rows.map { try $0.decode((String, String, String).self) }
            #expect(deliveries.map(\.0) == ["iuytfrdcvbnmkl", "oiuytrdsdfghjk"])
            #expect(deliveries.map(\.1) == ["android", "ios"])
            #expect(deliveries.allSatisfy { $0.2 == "pending" })
            // Unknown devices are registered implicitly with the type given.
            #expect(try await test.count("SELECT count(*) FROM devices WHERE app_id = 'support' AND status = 'active'") == 2)
        }
    }

    @Test("a committed webhook sends NOTIFY push_relay_deliveries to wake the dispatchers", arguments: WebhookPath.allCases)
    func notifiesAfterCommit(mode: WebhookPath) async throws {
        let test = try await TestApp.make()
        let listener = try PostgresListener(conninfo: test.conninfo, channels: ["push_relay_deliveries"], logger: TestDatabase.logger)
        let events = listener.events()
        try await test.application().test(on: mode) { client in
            let woke = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await listener.run()
                    return false
                }
                group.addTask {
                    for await event in events {
                        switch event {
                        case .listening:
                            let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(fixtureWebhook))
                            #expect(response.status == .accepted)
                        case .lost:
                            break
                        case .notification(let notification):
                            #expect(notification.channel == "push_relay_deliveries")
                            // By the time the wake-up arrives, the rows it announces are visible.
                            #expect(try await test.count("SELECT count(*) FROM deliveries") == 2)
                            return true
                        }
                    }
                    return false
                }
                group.addTask {
                    try await Task.sleep(for: hangCeiling)  // only a hang ends here
                    return false
                }
                let first = try await group.next() ?? false
                group.cancelAll()
                return first
            }
            #expect(woke)
        }
    }

    @Test("every active secret is accepted, so rotation needs no downtime", arguments: WebhookPath.allCases)
    func rotatedSecret(mode: WebhookPath) async throws {
        let test = try await TestApp.make()
        try await test.application().test(on: mode) { client in
            let response = try await client.execute(
                uri: "/v1/webhooks/zendesk/support/\(TestApp.rotatedSecret)",
                method: .post,
                headers: Self.json,
                body: jsonBody(fixtureWebhook)
            )
            #expect(response.status == .accepted)
        }
    }

    @Test("a wrong secret, another app's secret and an unknown app all get the same 404 and store nothing", arguments: WebhookPath.allCases)
    func wrongSecretOrApp(mode: WebhookPath) async throws {
        let test = try await TestApp.make()
        try await test.application().test(on: mode) { client in
            var bodies: [String] = []
            for uri in [
                "/v1/webhooks/zendesk/support/wrong-secret-0123456789",
                "/v1/webhooks/zendesk/support/\(TestApp.otherSecret)",
                "/v1/webhooks/zendesk/nosuchapp/\(TestApp.webhookSecret)",
            ] {
                let response = try await client.execute(uri: uri, method: .post, headers: Self.json, body: jsonBody(fixtureWebhook))
                #expect(response.status == .notFound)
                bodies.append(String(buffer: response.body))
            }
            #expect(Set(bodies).count == 1)
            #expect(try await test.count("SELECT count(*) FROM notifications") == 0)
        }
    }

    static let malformed: [(name: String, body: String, status: Int, fragment: String)] = [
        ("not JSON", "{\"devices\": [", 400, "not valid JSON"),
        ("a JSON array", "[1, 2]", 400, "must be a JSON object"),
        ("empty body", "", 400, "empty"),
        ("missing notification", #"{"devices":[{"identifier":"abc","type":"ios"}]}"#, 400, "notification is required"),
        ("notification not an object", #"{"devices":[{"identifier":"abc","type":"ios"}],"notification":"x"}"#, 400, "notification must be an object"),
        (
            "ticket_id a number", #"{"devices":[{"identifier":"abc","type":"ios"}],"notification":{"title":"t","body":"b","ticket_id":5}}"#, 400,
            "notification.ticket_id must be a string"
        ),
        (
            "title missing", #"{"devices":[{"identifier":"abc","type":"ios"}],"notification":{"body":"b","ticket_id":"5"}}"#, 400,
            "notification.title is required"
        ),
        ("devices empty", #"{"devices":[],"notification":{"title":"t","body":"b","ticket_id":"5"}}"#, 400, "devices must list at least one device"),
        (
            "devices not a list", #"{"devices":{"identifier":"abc"},"notification":{"title":"t","body":"b","ticket_id":"5"}}"#, 400,
            "devices must be a list"
        ),
        ("devices missing", #"{"notification":{"title":"t","body":"b","ticket_id":"5"}}"#, 400, "devices is required"),
        (
            "unknown device type", #"{"devices":[{"identifier":"abc","type":"windows"}],"notification":{"title":"t","body":"b","ticket_id":"5"}}"#,
            400, "devices[0].type must be"
        ),
        (
            "identifier not a string", #"{"devices":[{"identifier":7,"type":"ios"}],"notification":{"title":"t","body":"b","ticket_id":"5"}}"#, 400,
            "devices[0].identifier must be a string"
        ),
        (
            "identifier with spaces", #"{"devices":[{"identifier":"a b","type":"ios"}],"notification":{"title":"t","body":"b","ticket_id":"5"}}"#,
            400, "devices[0].identifier"
        ),
    ]

    @Test("each malformed body gets its 400 naming the problem and writes nothing", arguments: WebhookPath.allCases, 0..<malformed.count)
    func malformedBodies(mode: WebhookPath, index: Int) async throws {
        let test = try await TestApp.make()
        let (_, body, status, fragment) = Self.malformed[index]
        try await test.application().test(on: mode) { client in
            let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(body))
            #expect(Int(response.status.code) == status)
            let error = try #require(response.errorBody)
            #expect(error.message.contains(fragment), "\(error.message)")
            #expect(try await test.count("SELECT count(*) FROM notifications") == 0)
            #expect(try await test.count("SELECT count(*) FROM devices") == 0)
        }
    }

    @Test("a body over 1 MiB gets 413; more devices than allowed gets 400; a wrong content type gets 415", arguments: WebhookPath.allCases)
    func limits(mode: WebhookPath) async throws {
        let test = try await TestApp.make()
        try await test.application(extra: ["webhooks.max_devices": .init(.int(3), isSecret: false)]).test(on: mode) { client in
            let huge =
                #"{"devices":[{"identifier":"abc","type":"ios"}],"notification":{"title":"t","ticket_id":"5","body":""#
                + String(repeating: "x", count: 1_100_000) + #""}}"#
            let tooLarge = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(huge))
            #expect(tooLarge.status == .contentTooLarge)
            #expect(tooLarge.errorBody?.code == "payload_too_large")

            let devices = (0..<4).map { #"{"identifier":"device\#($0)","type":"android"}"# }.joined(separator: ",")
            let many = try await client.execute(
                uri: Self.url,
                method: .post,
                headers: Self.json,
                body: jsonBody(#"{"devices":[\#(devices)],"notification":{"title":"t","body":"b","ticket_id":"5"}}"#)
            )
            #expect(many.status == .badRequest)
            #expect(many.errorBody?.code == "too_many_devices")

            let form = try await client.execute(
                uri: Self.url,
                method: .post,
                headers: [.contentType: "application/x-www-form-urlencoded"],
                body: jsonBody(fixtureWebhook)
            )
            #expect(form.status == .unsupportedMediaType)
            #expect(try await test.count("SELECT count(*) FROM notifications") == 0)
        }
    }

    @Test("title, body and ticket id are kept exactly, emoji and all; duplicate devices count once", arguments: WebhookPath.allCases)
    func unicodeKeptExactly(mode: WebhookPath) async throws {
        let test = try await TestApp.make()
        let title = "Agent répondu 🎉 — “quoted” \\ back"
        let text = "Line one\nLine two\t𝄞 ünïcødé ✓ 中文"
        let payload: [String: Any] = [
            "devices": [["identifier": "dup-token", "type": "android"], ["identifier": "dup-token", "type": "android"]],
            "notification": ["title": title, "body": text, "ticket_id": "ticket-🎫-42"],
        ]
        let data = try JSONSerialization.data(withJSONObject: payload)
        try await test.application().test(on: mode) { client in
            let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: ByteBuffer(bytes: data))
            #expect(response.status == .accepted)
            #expect(response.json?["deliveries"] as? Int == 1)
            let row = try #require(try await test.client.query("SELECT title, body, ticket_id FROM notifications").first)
            let (storedTitle, storedBody, ticket) = try row.decode((String, String, String).self)
            #expect(storedTitle == title)
            #expect(storedBody == text)
            #expect(ticket == "ticket-🎫-42")
        }
    }

    @Test("devices marked invalid are skipped and counted; hex iOS tokens match the registry case-insensitively", arguments: WebhookPath.allCases)
    func invalidDevicesSkipped(mode: WebhookPath) async throws {
        let test = try await TestApp.make()
        let hex = String(repeating: "ab", count: 32)
        try await test.application().test(on: mode) { client in
            try await test.client.query(
                "INSERT INTO devices (app_id, token, platform, status, invalid_reason) VALUES ('support', $1, 'ios', 'invalid', 'Unregistered')",
                [hex]
            )
            let body =
                #"{"devices":[{"identifier":"\#(hex.uppercased())","type":"ios"},{"identifier":"fresh","type":"android"}],"notification":{"title":"t","body":"b","ticket_id":"9"}}"#
            let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(body))
            #expect(response.status == .accepted)
            #expect(response.json?["deliveries"] as? Int == 1)
            #expect(response.json?["skipped"] as? Int == 1)
            #expect(try await test.count("SELECT count(*) FROM deliveries WHERE device_token = $1", [hex]) == 0)
            #expect(try await test.count("SELECT count(*) FROM deliveries WHERE device_token = 'fresh'") == 1)
        }
    }

    /// Live, the requests go over 20 connections of their own: HummingbirdTesting's live client
    /// is one pipelined HTTP/1.1 connection, which the server answers one request at a time, so
    /// its 200 requests were not concurrent at all, and on a loaded machine the last ones waited
    /// past the client's 20 s timeout behind the others.
    @Test("concurrent webhooks are all stored, each exactly once, with their own receipts", arguments: WebhookPath.allCases)
    func concurrentGroupCommit(mode: WebhookPath) async throws {
        let test = try await TestApp.make()
        @Sendable func body(_ n: Int) -> String {
            #"{"devices":[{"identifier":"dev-\#(n % 7)","type":"android"}],"notification":{"title":"t\#(n)","body":"b","ticket_id":"\#(n)"}}"#
        }
        @Sendable func receipt(_ text: String) -> Int {
            ((try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any])?["notification_id"] as? Int ?? -1
        }
        try await test.application().test(on: mode) { client in
            let ids = try await withThrowingTaskGroup(of: [Int].self) { group in
                if mode == .live, let port = client.port {
                    for connection in 0..<20 {
                        group.addTask {
                            try await RawConnection.with(port: port) { raw in
                                var ids: [Int] = []
                                for n in stride(from: connection, to: 200, by: 20) {
                                    let headers = [("Content-Type", "application/json")]
                                    try await raw.send(RawConnection.request("POST", Self.url, headers: headers, body: Array(body(n).utf8)))
                                    let answer = try await raw.next()
                                    #expect(answer?.status == 202)
                                    ids.append(receipt(answer?.text ?? ""))
                                }
                                return ids
                            }
                        }
                    }
                } else {
                    for n in 0..<200 {
                        group.addTask {
                            let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(body(n)))
                            #expect(response.status == .accepted)
                            return [response.json?["notification_id"] as? Int ?? -1]
                        }
                    }
                }
                var ids: [Int] = []
                for try await some in group { ids += some }
                return ids
            }
            #expect(Set(ids).count == 200)
            #expect(try await test.count("SELECT count(*) FROM notifications") == 200)
            #expect(try await test.count("SELECT count(*) FROM deliveries") == 200)
            // Each receipt points at its own notification.
            #expect(try await test.count("SELECT count(*) FROM notifications WHERE title = 't' || ticket_id") == 200)
            #expect(try await test.count("SELECT count(*) FROM devices") == 7)
        }
    }

    @Test("signed apps need a valid, fresh X-Zendesk-Webhook-Signature", arguments: WebhookPath.allCases)
    func signatures(mode: WebhookPath) async throws {
        let test = try await TestApp.make(signing: true)
        let bytes = Array(fixtureWebhook.utf8)
        @Sendable func headers(signature: String?, timestamp: String?) -> HTTPFields {
            var fields = Self.json
            if let signature { fields[HTTPField.Name("X-Zendesk-Webhook-Signature")!] = signature }
            if let timestamp { fields[HTTPField.Name("X-Zendesk-Webhook-Signature-Timestamp")!] = timestamp }
            return fields
        }
        let now = Date().formatted(.iso8601)
        let good = hmacSignature(secret: TestApp.signingSecret, timestamp: now, body: bytes)
        let stale = Date().addingTimeInterval(-3600).formatted(.iso8601)
        try await test.application().test(on: mode) { client in
            let missing = try await client.execute(
                uri: Self.url,
                method: .post,
                headers: headers(signature: nil, timestamp: nil),
                body: ByteBuffer(bytes: bytes)
            )
            #expect(missing.status == .unauthorized)
            #expect(missing.errorBody?.code == "invalid_signature")
            let wrong = try await client.execute(
                uri: Self.url,
                method: .post,
                headers: headers(signature: hmacSignature(secret: "another-secret-0123456789", timestamp: now, body: bytes), timestamp: now),
                body: ByteBuffer(bytes: bytes)
            )
            #expect(wrong.status == .unauthorized)
            let replayed = try await client.execute(
                uri: Self.url,
                method: .post,
                headers: headers(signature: hmacSignature(secret: TestApp.signingSecret, timestamp: stale, body: bytes), timestamp: stale),
                body: ByteBuffer(bytes: bytes)
            )
            #expect(replayed.status == .unauthorized)
            #expect(replayed.errorBody?.message.contains("window") == true)
            #expect(try await test.count("SELECT count(*) FROM notifications") == 0)
            let accepted = try await client.execute(
                uri: Self.url,
                method: .post,
                headers: headers(signature: good, timestamp: now),
                body: ByteBuffer(bytes: bytes)
            )
            #expect(accepted.status == .accepted)
        }
    }

    @Test(
        "while PostgreSQL is down a webhook gets 503 and nothing half-written; acknowledged webhooks survive a crash",
        arguments: WebhookPath.allCases
    )
    func databaseDown(mode: WebhookPath) async throws {
        let (cluster, conninfo) = try await TestDatabase.makeCluster(durable: true)
        let test = try await TestApp.make(conninfo: conninfo)
        try await test.application().test(on: mode) { client in
            var acknowledged: [Int] = []
            for n in 0..<20 {
                let body = #"{"devices":[{"identifier":"dev-\#(n)","type":"android"}],"notification":{"title":"t","body":"b","ticket_id":"\#(n)"}}"#
                let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(body))
                #expect(response.status == .accepted)
                acknowledged.append(try #require(response.json?["notification_id"] as? Int))
            }
            // A crash, not a clean shutdown: only what was committed may survive, and all of it must.
            try await cluster.stop(immediate: true)
            let during = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(fixtureWebhook))
            #expect(during.status == .serviceUnavailable)
            #expect(during.errorBody?.code == "database_unavailable")
            #expect(during.headers[.retryAfter] != nil)

            _ = try await cluster.start()
            let stored = try await test.client.query("SELECT id FROM notifications ORDER BY id").rows.map { try $0.decode(Int.self, at: 0) }
            #expect(stored == acknowledged.sorted())
            #expect(try await test.count("SELECT count(*) FROM deliveries") == 20)

            // The helpdesk's retry goes through once the database is back.
            let retried = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(fixtureWebhook))
            #expect(retried.status == .accepted)
            #expect(try await test.count("SELECT count(*) FROM notifications") == 21)
        }
        await test.client.close()
        try await cluster.stop()
    }
}

/// base64(HMAC-SHA256(secret, timestamp + body)), as Zendesk computes it.
func hmacSignature(secret: String, timestamp: String, body: [UInt8]) -> String {
    let mac = HMAC<SHA256>.authenticationCode(for: Array(timestamp.utf8) + body, using: SymmetricKey(data: Array(secret.utf8)))
    return Data(mac).base64EncodedString()
}
