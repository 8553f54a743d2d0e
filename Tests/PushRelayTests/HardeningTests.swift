import CurlHTTP2
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOPosix
import Postgres
@testable import PushRelay
import PushSandbox
import TestSupport
import Testing

@Suite("Hardening: input PostgreSQL and HTTP headers cannot carry")
struct StorableInputTests {
    static let url = "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)"
    static let json: HTTPFields = [.contentType: "application/json"]

    @Test("NUL in title, body or ticket_id is a 400 naming the field, and 40 concurrent valid webhooks all get 202")
    func nulRefusedNeighboursAccepted() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.live) { client in
            try await withThrowingTaskGroup(of: (Bool, String?, Int, String?).self) { group in
                for index in 0..<40 {
                    group.addTask {
                        let body = webhook(devices: [(apnsToken(), "ios")], ticket: "n\(index)")
                        let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(body))
                        return (true, nil, Int(response.status.code), response.errorBody?.message)
                    }
                }
                for field in ["title", "body", "ticket_id"] {
                    for _ in 0..<3 {
                        group.addTask {
                            var title = "T", text = "B", ticket = "9"
                            switch field {
                            case "title": title = #"a\u0000b"#
                            case "body": text = #"a\u0000b"#
                            default: ticket = #"a\u0000b"#
                            }
                            let body = webhook(devices: [(apnsToken(), "ios")], ticket: ticket, title: title, body: text)
                            let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(body))
                            return (false, field, Int(response.status.code), response.errorBody?.message)
                        }
                    }
                }
                for try await (valid, field, status, message) in group {
                    if valid {
                        #expect(status == 202, "\(message ?? "")")
                    } else {
                        #expect(status == 400)
                        #expect(message?.hasPrefix("notification.\(field!) ") == true, "\(message ?? "")")
                    }
                }
            }
        }
        #expect(try await test.count("SELECT count(*) FROM notifications") == 40)
        #expect(try await test.count("SELECT count(*) FROM notifications WHERE strpos(title || body || ticket_id, chr(1)) > 0") == 0)
    }

    @Test("a batch statement that fails on one webhook's data is split: the others commit, only that one fails")
    func groupCommitIsolatesTheMemberAtFault() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // applies the migrations
        let writer = IntakeWriter(queue: DeliveryQueue(client: test.client), logger: TestDatabase.logger, maxBatch: 500, maxConcurrentWrites: 1)
        let valid = (0..<40).map { index in
            PushNotification(title: "ok", body: "fine", ticketID: "g\(index)", devices: [.init(token: apnsToken(), platform: .ios)])
        }
        // NUL cannot be stored in a text array: skipped checks let it reach the statement.
        let bad = (0..<2).map { index in
            PushNotification(title: "bad\u{0}title", body: "x", ticketID: "b\(index)", devices: [.init(token: apnsToken(), platform: .ios)])
        }
        try await withThrowingTaskGroup(of: Void.self) { service in
            service.addTask { try await writer.run() }
            try await withThrowingTaskGroup(of: (Bool, Result<IntakeReceipt, any Error>).self) { group in
                for webhook in valid + bad {
                    group.addTask {
                        do {
                            return (webhook.title == "ok", .success(try await writer.submit(IntakeItem(appID: "support", notification: webhook, requestID: nil))))
                        } catch {
                            return (webhook.title == "ok", .failure(error))
                        }
                    }
                }
                for try await (isValid, result) in group {
                    switch result {
                    case .success: #expect(isValid)
                    case .failure(let error):
                        #expect(!isValid, "\(error)")
                        guard case .unstorable = error as? IntakeError else {
                            Issue.record("expected IntakeError.unstorable, got \(error)")
                            continue
                        }
                        #expect((error as! IntakeError).apiError.status == .badRequest)
                        #expect((error as! IntakeError).apiError.code == "unstorable_input")
                    }
                }
            }
            service.cancelAll()
        }
        #expect(try await test.count("SELECT count(*) FROM notifications") == 40)
        #expect(try await test.count("SELECT count(*) FROM deliveries") == 40)
    }

    @Test("a data exception's description withholds the server's message, which quotes the refused value")
    func dataExceptionDescription() async throws {
        let test = try await TestApp.make()
        let error = await #expect(throws: PostgresError.self) {
            _ = try await test.client.query("SELECT $1::text[]", ["{\"secret notification text\"" as String])
        }
        #expect(error?.isDataException == true)
        #expect(!"\(error!)".contains("secret notification text"))
    }

    @Test("apns-collapse-id is a header-safe value of at most 64 bytes for any ticket id, and distinct tickets get distinct ids")
    func collapseIDs() {
        var rng = SeededGenerator(state: 7)
        var seen: [String: String] = [:]
        let samples = ["5", "4711", "a b", "tab\there", "new\nline", "ü", String(repeating: "9", count: 49), String(repeating: "9", count: 50), "~x"]
        let random = (0..<5000).map { _ in
            String(String.UnicodeScalarView((0..<Int.random(in: 1...80, using: &rng)).compactMap { _ in Unicode.Scalar(UInt32.random(in: 1...0x2FF, using: &rng)) }))
        }
        for ticket in samples + random {
            let id = TicketCollapseID.make(ticketID: ticket)
            #expect(id.utf8.count <= 64)
            #expect(id.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "\(id)")
            if let other = seen[id] { #expect(other == ticket, "\(ticket) and \(other) share \(id)") }
            seen[id] = ticket
        }
        #expect(TicketCollapseID.make(ticketID: "4711") == "zendesk-ticket-4711")
        #expect(TicketCollapseID.make(ticketID: "a\tb").hasPrefix("zendesk-ticket~"))
        #expect(APNsHeaders.devicePath(token: "ab/c?d#e") == "/3/device/ab%2Fc%3Fd%23e")
    }

    @Test("below HTTP, only a TLS set-up that fails on configuration waits as credential; a request curl refuses is unsendable, the rest retry")
    func transportFailures() {
        #expect(PushOutcome.transportFailure(CurlError(code: CurlError.invalidHeader, message: "bad")) == .unsendable(reason: "the relay could not build the request: bad"))
        #expect(PushOutcome.transportFailure(CurlError(code: 3, message: "URL")) == .unsendable(reason: "the relay could not build the request: URL"))
        #expect(PushOutcome.transportFailure(CurlError(code: 60, message: "verify")) == .credential(reason: "transport: curl 60: verify", refreshToken: false))
        #expect(PushOutcome.transportFailure(CurlError(code: 58, message: "cert")) == .credential(reason: "transport: curl 58: cert", refreshToken: false))
        for code in [7, 8, 16, 28, 56, 92] {
            guard case .retry = PushOutcome.transportFailure(CurlError(code: code, message: "x")) else {
                Issue.record("curl \(code) should be retried")
                continue
            }
        }
    }

    @Test("a request the relay cannot build fails the delivery as unsendable, never as rejected credentials")
    func unsendableIsFailedNotCredential() async throws {
        try await DeliveryHarness.with { base in
            var made = base
            // A topic no HTTP header can carry: every APNs request of the app fails to build.
            made.test.apps[0].apns?.topic = "com.example.support\tbroken"
            let harness = made
            let ios = apnsToken(), android = "android-\(UUID().uuidString)"
            try await harness.application().test(.router) { client in
                let response = try await client.execute(
                    uri: Self.url, method: .post, headers: Self.json, body: jsonBody(webhook(devices: [(ios, "ios"), (android, "android")]))
                )
                #expect(response.status == .accepted)
                let done = try await eventually {
                    try await harness.test.count("SELECT count(*) FROM deliveries WHERE status IN ('failed', 'delivered')") == 2
                }
                let rows = try await harness.test.client.query("SELECT platform, status, attempts, last_error FROM deliveries ORDER BY platform").rows
                    .map { try $0.decode((String, String, Int, String?).self) }
                #expect(done, "\(rows)")
                #expect(rows.first { $0.0 == "ios" }?.1 == "failed")
                #expect(rows.first { $0.0 == "ios" }?.3?.contains("could not build the request") == true)
                #expect(rows.first { $0.0 == "android" }?.1 == "delivered")
                let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                #expect(metricValue(metrics, "push_relay_push_outcomes_total", ["app": "support", "platform": "ios", "outcome": "unsendable"]) == 1)
                #expect(metricValue(metrics, "push_relay_push_outcomes_total", ["app": "support", "platform": "ios", "outcome": "credential"]) == nil)
            }
            #expect(harness.state.requests(service: "apns").isEmpty)
        }
    }

    @Test("a ticket id with spaces, slashes and non-ASCII letters is delivered with a hashed collapse id the sandbox accepts")
    func oddTicketDelivered() async throws {
        try await DeliveryHarness.with { harness in
            let ios = apnsToken()
            let ticket = "Ticket / José #" + String(repeating: "x", count: 60)
            try await harness.application().test(.router) { client in
                let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(webhook(devices: [(ios, "ios")], ticket: ticket)))
                #expect(response.status == .accepted)
                #expect(try await eventually { try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 1 })
            }
            let apns = try #require(harness.state.requests(service: "apns").first)
            #expect(apns.headers["apns-collapse-id"] == TicketCollapseID.make(ticketID: ticket))
            #expect(apns.body.contains("Ticket / José #"))
        }
    }
}

@Suite("Hardening: strict JSON on every route")
struct StrictJSONRouteTests {
    /// Documents other parsers accept; each must be a 400 `invalid_json` naming the problem.
    static let notJSON: [(String, [UInt8])] = [
        ("trailing comma", Array(#"{"platform":"ios",}"#.utf8)),
        ("comment", Array(#"{"platform":"ios" /* c */}"#.utf8)),
        ("NaN", Array(#"{"platform":"ios","x":NaN}"#.utf8)),
        ("leading zero", Array(#"{"platform":"ios","x":01}"#.utf8)),
        ("invalid UTF-8", Array(#"{"platform":"ios","x":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8)),
        ("lone surrogate", Array(#"{"platform":"ios","x":"\ud800"}"#.utf8)),
        ("duplicate name", Array(#"{"platform":"ios","platform":"android"}"#.utf8)),
        ("byte order mark", [0xEF, 0xBB, 0xBF] + Array(#"{"platform":"ios"}"#.utf8)),
    ]

    @Test("the webhook, device registration, read and bulk-unregister bodies refuse non-JSON with 400 invalid_json and store nothing")
    func everyJSONBody() async throws {
        let test = try await TestApp.make()
        let app = try await test.application()
        let key = try await test.key(app: "support")
        let admin = try await test.key(app: nil)
        let valid = Array(webhook(devices: [(apnsToken(), "ios")]).utf8)
        try await app.test(.router) { client in
            for (problem, body) in Self.notJSON {
                // The webhook with the same defect: its own closing brace replaced by the defective object's members.
                let hook = problem == "byte order mark" ? [0xEF, 0xBB, 0xBF] + valid : Array(valid.dropLast()) + [UInt8(ascii: ",")] + Array(body.dropFirst())
                let requests: [(String, HTTPRequest.Method, HTTPFields, [UInt8])] = [
                    ("/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)", .post, [.contentType: "application/json"], hook),
                    ("/v1/apps/support/devices/\(apnsToken())", .put, bearer(key), body),
                    ("/v1/apps/support/users/alice/tickets/5/read", .post, bearer(key), body),
                    ("/v1/admin/apps/support/devices/bulk-unregister", .post, bearer(admin), body),
                ]
                for (uri, method, headers, bytes) in requests {
                    let response = try await client.execute(uri: uri, method: method, headers: headers, body: ByteBuffer(bytes: bytes))
                    #expect(response.status == .badRequest, "\(problem): \(method) \(uri)")
                    #expect(response.errorBody?.code == "invalid_json", "\(problem): \(method) \(uri): \(response.errorBody?.message ?? "")")
                }
            }
        }
        #expect(try await test.count("SELECT count(*) FROM notifications") == 0)
        #expect(try await test.count("SELECT count(*) FROM devices") == 0)
        #expect(try await test.count("SELECT count(*) FROM jobs") == 0)
    }
}

@Suite("Hardening: path parameters")
struct PathParameterTests {
    @Test("a user id with spaces, a slash and non-ASCII letters round-trips: register, list, unread, read, read-all")
    func userIDRoundTrip() async throws {
        let test = try await TestApp.make()
        let app = try await test.application()
        let key = try await test.key(app: "support")
        let user = "José Ünal / 42"
        let encoded = "Jos%C3%A9%20%C3%9Cnal%20%2F%2042"
        let token = apnsToken()
        try await app.test(.router) { client in
            let registered = try await client.execute(
                uri: "/v1/apps/support/devices/\(token)", method: .put, headers: bearer(key),
                body: jsonBody(#"{"platform":"ios","user_id":"\#(user)"}"#)
            )
            #expect(registered.status == .created)
            let list = try await client.execute(uri: "/v1/apps/support/users/\(encoded)/devices", method: .get, headers: bearer(key))
            #expect(list.status == .ok)
            #expect((list.json?["devices"] as? [[String: Any]])?.first?["user_id"] as? String == user)
            let hook = try await client.execute(
                uri: "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)", method: .post, headers: [.contentType: "application/json"],
                body: jsonBody(webhook(devices: [(token, "ios")], ticket: "T 1/é"))
            )
            #expect(hook.status == .accepted)
            let unread = try await client.execute(uri: "/v1/apps/support/users/\(encoded)/unread", method: .get, headers: bearer(key))
            #expect(unread.status == .ok)
            #expect(unread.json?["total"] as? Int == 1)
            let read = try await client.execute(uri: "/v1/apps/support/users/\(encoded)/tickets/T%201%2F%C3%A9/read", method: .post, headers: bearer(key))
            #expect(read.status == .ok)
            #expect(read.json?["total"] as? Int == 0)
            let readAll = try await client.execute(uri: "/v1/apps/support/users/\(encoded)/read-all", method: .post, headers: bearer(key))
            #expect(readAll.status == .ok)
            // Malformed encodings and control characters are a 400 naming the parameter, the same on every route.
            for path in ["/v1/apps/support/users/a%ZZ/devices", "/v1/apps/support/users/a%00b/unread", "/v1/apps/support/users/%C3%28/devices"] {
                let bad = try await client.execute(uri: path, method: .get, headers: bearer(key))
                #expect(bad.status == .badRequest, "\(path)")
                #expect(bad.errorBody?.message.hasPrefix("user ") == true, "\(path): \(bad.errorBody?.message ?? "")")
            }
        }
    }
}

@Suite("Hardening: logs")
struct LogRedactionTests {
    @Test("at log level trace, every path variant and a full delivery round leave no secret, full token, API key, provider token or notification text in the log")
    func nothingSecretLogged() async throws {
        try await DeliveryHarness.with { harness in
            let secret = HostileRelay.secret
            let relay = try await HostileRelay.start(
                logLevel: "trace",
                appYAML: try harness.appYAML(harness.test.apps[0], secrets: [secret]),
                extraYAML: """
                    tls:
                      ca_file: \(harness.sandbox.certificates.caFile)
                    zendesk:
                      poll_interval_ms: 100
                    """,
                delivery: true
            )
            let title = "Title-\(UUID().uuidString)", text = "Body-\(UUID().uuidString)"
            let ios = apnsToken(), android = "android-\(UUID().uuidString)-token", dead = apnsToken(), registered = apnsToken()
            harness.state.setBehaviour(SandboxBehaviour(status: 410, reason: "Unregistered"), for: dead)
            let body = Array(webhook(devices: [(ios, "ios"), (android, "android"), (dead, "ios")], title: title, body: text).utf8)
            let json = [("Content-Type", "application/json")]
            var accepted = 0
            for path in [
                "/v1/webhooks/zendesk/support/\(secret)", "//v1/webhooks/zendesk/support/\(secret)",
                "/v1//webhooks/zendesk/support/\(secret)", "/v1/webhooks/zendesk/support//\(secret)",
                "/v1/webhooks/zendesk/support/\(secret)/", "/V1/webhooks/zendesk/support/\(secret)",
                "/./v1/webhooks/zendesk/support/\(secret)", "/v1/webhooks/zendesk/\(secret)",
                "/v1/webhooks/zendesk/support/\(secret)/x", "/v1/webhooks/zendesk/support/\(secret)?q=\(secret)",
            ] {
                let answer = try #require(try await relay.send(RawHTTP.request("POST", path, headers: json, body: body)))
                #expect(answer.status < 500)
                if answer.status == 202 { accepted += 1 }
            }
            #expect(accepted >= 5)
            let auth = [("Authorization", "Bearer \(relay.apiKey)")]
            for path in [
                "/v1/apps/support/devices/\(registered)", "//v1/apps/support/devices/\(registered)",
                "/v1/apps/support//devices/\(registered)", "/V1/apps/support/devices/\(registered)",
                "/v1/apps/support/users/\(registered)/unread", "//v1/apps/support/users/\(ios)/unread",
            ] {
                for method in ["PUT", "GET", "DELETE"] {
                    let answer = try await relay.send(
                        RawHTTP.request(
                            method, path, headers: json + auth, body: method == "PUT" ? Array(#"{"platform":"ios"}"#.utf8) : nil
                        )
                    )
                    #expect((answer?.status ?? 0) < 500)
                }
            }
            // The whole round: every accepted delivery ends, the dead token reaches Zendesk.
            let done = try await eventually(timeout: .seconds(30)) {
                try await relay.test.count("SELECT count(*) FROM deliveries WHERE status IN ('pending', 'sending')") == 0
                    && harness.state.requests(service: "zendesk").count >= 1
            }
            relay.relay.stop()
            let log = relay.log
            #expect(done, "\(log.suffix(3000))")
            #expect(log.contains("http.route"))
            #expect(log.contains("trace") || log.contains("TRACE"))
            var secrets: [(String, String)] = [
                ("webhook secret", secret), ("API key", relay.apiKey), ("API key secret", String(relay.apiKey.split(separator: "_").last!)),
                ("iOS token", ios), ("Android token", android), ("dead token", dead), ("registered token", registered),
                ("title", title), ("body", text), ("Zendesk API token", "zendesk-api-token-0123456789"),
            ]
            let credentials = harness.state.presentedCredentials()
            // An APNs provider token, an OAuth assertion, an FCM access token, Zendesk's Basic credential.
            #expect(credentials.count >= 4, "the sandbox saw \(credentials.count) credentials")
            secrets += credentials.map { ("provider credential", $0) }
            for (name, value) in secrets {
                // The lines themselves, not the whole log, so a failure says where it leaked.
                let leaking = log.split(separator: "\n").filter { $0.contains(value) }
                #expect(leaking.isEmpty, "the log holds the \(name): \(leaking.prefix(3).map { $0.replacingOccurrences(of: value, with: "<\(name)>") })")
            }
        }
    }
}

@Suite("Hardening: slow clients")
struct SlowClientTests {
    /// Opens a connection and sends `bytes` one at a time, `interval` apart, until the server closes
    /// it or `limit` passes; returns how long the connection lived.
    static func trickle(port: Int, _ bytes: [UInt8], interval: Duration, limit: Duration, wait: Duration = .zero) async throws -> Duration {
        let start = ContinuousClock.now
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port).get()
        try await Task.sleep(for: wait)
        var index = 0
        while channel.isActive, ContinuousClock.now - start < limit {
            if index < bytes.count {
                try? await channel.writeAndFlush(ByteBuffer(bytes: [bytes[index]])).get()
                index += 1
            }
            try await Task.sleep(for: interval)
        }
        let lived = ContinuousClock.now - start
        try? await channel.close()
        return lived
    }

    @Test("a head trickled on a connection that was idle is cut at the header timeout, not at the longer idle timeout")
    func headerTimeoutShorterThanIdle() async throws {
        let relay = try await HostileRelay.start(extraYAML: "http:\n  header_timeout_seconds: 2\n  idle_timeout_seconds: 60")
        defer { relay.relay.stop() }
        let head = Array("GET /health HTTP/1.1\r\nHost: x\r\n".utf8) + Array(String(repeating: "X-Pad: 1\r\n", count: 100).utf8)
        // Idle for a second first: the idle timeout's timer is armed by then.
        let lived = try await Self.trickle(port: relay.port, head, interval: .milliseconds(100), limit: .seconds(20), wait: .seconds(1))
        // About 3 s (1 s idle, then the 2 s header timeout); the bound leaves room for a loaded machine
        // and stays far below the idle timeout (60 s) and the trickle's own limit (20 s).
        #expect(lived < .seconds(10), "the connection lived \(lived)")
    }

    @Test("slow headers, a trickled body and idle connections are cut off, and a valid webhook is served meanwhile")
    func slowlorisCutOff() async throws {
        let relay = try await HostileRelay.start(
            extraYAML: """
                http:
                  header_timeout_seconds: 2
                  body_timeout_seconds: 2
                  idle_timeout_seconds: 3
                  max_connections: 40
                """
        )
        defer { relay.relay.stop() }
        let head = Array("POST /v1/webhooks/zendesk/support/\(HostileRelay.secret) HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".utf8)
        let port = relay.port
        let limit = Duration.seconds(15)
        let result = try await withThrowingTaskGroup(of: (String, Duration).self) { group in
            for _ in 0..<60 {
                group.addTask { ("header", try await Self.trickle(port: port, head + Array(String(repeating: "X-Pad: 1\r\n", count: 200).utf8), interval: .milliseconds(200), limit: limit)) }
            }
            for _ in 0..<5 {
                group.addTask {
                    ("body", try await Self.trickle(port: port, head + Array("Content-Length: 500\r\n\r\n".utf8) + Array(repeating: 0x20, count: 500), interval: .milliseconds(20), limit: limit))
                }
                group.addTask { ("idle", try await Self.trickle(port: port, [], interval: .milliseconds(100), limit: limit)) }
            }
            group.addTask {
                try await Task.sleep(for: .seconds(1))
                let start = ContinuousClock.now
                let answer = try await relay.send(Fuzz.post(Fuzz.hookPath, Array(webhook(devices: [(apnsToken(), "ios")]).utf8)), timeout: .seconds(14))
                return ("valid \(answer?.status ?? 0)", ContinuousClock.now - start)
            }
            var all: [(String, Duration)] = []
            for try await entry in group { all.append(entry) }
            return all
        }
        let valid = try #require(result.first { $0.0.hasPrefix("valid") })
        #expect(valid.0 == "valid 202", "\(valid)")
        #expect(valid.1 < .seconds(10), "\(valid)")
        for (kind, lived) in result where !kind.hasPrefix("valid") {
            #expect(lived < .seconds(12), "a \(kind) connection lived \(lived)")
        }
        // The first 40 connections were cut at about their timeout (2-3 s), not at the test's limit.
        let cut = result.filter { !$0.0.hasPrefix("valid") }.map(\.1).sorted()
        #expect(cut[cut.count / 2] < .seconds(8), "median lifetime \(cut[cut.count / 2])")
        #expect(relay.relay.process.isRunning)
    }
}
