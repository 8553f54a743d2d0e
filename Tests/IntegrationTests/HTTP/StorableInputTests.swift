import CurlHTTP2
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOPosix
import Postgres
import PushSandbox
import TestSupport
import Testing

@testable import PushRelay

@Suite("Hardening: input PostgreSQL and HTTP headers cannot carry")
struct StorableInputTests {
    static let url = "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)"
    static let json: HTTPFields = [.contentType: "application/json"]

    @Test("NUL in title, body or ticket_id is a 400 naming the field, and 40 concurrent valid webhooks all get 202")
    func nulRefusedNeighboursAccepted() async throws {
        let test = try await TestApp.make()
        try await test.application().testLive { client in
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
                            var title = "T"
                            var text = "B"
                            var ticket = "9"
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
        let writer = IntakeWriter(
            queue: DeliveryQueue(client: test.client),
            logger: TestDatabase.logger,
            settings: WebhookSettings(concurrentWrites: 1)
        )
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
                            return (
                                webhook.title == "ok",
                                .success(try await writer.submit(IntakeItem(appID: "support", notification: webhook, requestID: nil)))
                            )
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
            String(
                String.UnicodeScalarView(
                    (0..<Int.random(in: 1...80, using: &rng)).compactMap { _ in Unicode.Scalar(UInt32.random(in: 1...0x2FF, using: &rng)) }
                )
            )
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
        #expect(
            PushOutcome.transportFailure(CurlError(code: CurlError.invalidHeader, message: "bad"))
                == .unsendable(reason: "the relay could not build the request: bad")
        )
        #expect(PushOutcome.transportFailure(CurlError(code: 3, message: "URL")) == .unsendable(reason: "the relay could not build the request: URL"))
        #expect(
            PushOutcome.transportFailure(CurlError(code: 60, message: "verify"))
                == .credential(reason: "transport: curl 60: verify", refreshToken: false)
        )
        #expect(
            PushOutcome.transportFailure(CurlError(code: 58, message: "cert")) == .credential(reason: "transport: curl 58: cert", refreshToken: false)
        )
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
            let ios = apnsToken()
            let android = "android-\(UUID().uuidString)"
            try await harness.application().test(.router) { client in
                let response = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(ios, "ios"), (android, "android")]))
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
                #expect(
                    metricValue(metrics, "push_relay_push_outcomes_total", ["app": "support", "platform": "ios", "outcome": "credential"]) == nil
                )
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
                let response = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(ios, "ios")], ticket: ticket))
                )
                #expect(response.status == .accepted)
                #expect(try await eventually { try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 1 })
            }
            let apns = try #require(harness.state.requests(service: "apns").first)
            #expect(apns.headers["apns-collapse-id"] == TicketCollapseID.make(ticketID: ticket))
            #expect(apns.body.contains("Ticket / José #"))
        }
    }
}
