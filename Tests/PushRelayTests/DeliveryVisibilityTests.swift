import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Postgres
@testable import PushRelay
import PushSandbox
import TestSupport
import Testing

@Suite("Delivery visibility: the status API, feedback events and retention", .serialized)
struct DeliveryVisibilityTests {
    static let url = "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)"
    static let json: HTTPFields = [.contentType: "application/json"]

    static func object(_ response: TestResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(String(buffer: response.body).utf8)) as? [String: Any])
    }

    static func accept(_ client: some TestClientProtocol, _ body: String) async throws -> Int64 {
        let response = try await client.execute(uri: url, method: .post, headers: json, body: jsonBody(body))
        #expect(response.status == .accepted)
        return try #require((try object(response)["notification_id"] as? NSNumber)?.int64Value)
    }

    @Test("a notification's status shows each delivery: delivered with its apns-id, dead_token with the provider's reason; tokens shortened")
    func notificationStatus() async throws {
        try await DeliveryHarness.with { harness in
            let dead = apnsToken(), alive = apnsToken(), android = "android-\(UUID().uuidString)"
            harness.state.setBehaviour(SandboxBehaviour(status: 410, reason: "Unregistered"), for: dead)
            try await harness.application().test(.router) { client in
                let reader = try await harness.test.key(app: "support", scopes: [.notificationsRead])
                let id = try await Self.accept(client, webhook(devices: [(dead, "ios"), (alive, "ios"), (android, "android")], ticket: "4711"))
                #expect(try await eventually {
                    try await harness.test.count("SELECT count(*) FROM deliveries WHERE status IN ('delivered', 'dead_token')") == 3
                })
                let response = try await client.execute(uri: "/v1/apps/support/notifications/\(id)", method: .get, headers: bearer(reader))
                #expect(response.status == .ok)
                let body = try Self.object(response)
                #expect((body["id"] as? NSNumber)?.int64Value == id)
                #expect(body["ticket_id"] as? String == "4711")
                #expect(body["title"] as? String == "Agent replied")
                let counts = try #require(body["counts"] as? [String: Int])
                #expect(counts["delivered"] == 2 && counts["dead_token"] == 1 && counts["pending"] == 0 && counts["failed"] == 0)
                let deliveries = try #require(body["deliveries"] as? [[String: Any]])
                #expect(deliveries.count == 3)
                let byToken = Dictionary(uniqueKeysWithValues: deliveries.map { ($0["token"] as? String ?? "", $0) })
                let deadRow = try #require(byToken["\(dead.prefix(6))…\(dead.suffix(4))"])
                #expect(deadRow["status"] as? String == "dead_token")
                #expect(deadRow["last_reason"] as? String == "Unregistered")
                #expect(deadRow["kind"] as? String == "alert")
                #expect(deadRow["delivered_at"] is NSNull)
                let aliveRow = try #require(byToken["\(alive.prefix(6))…\(alive.suffix(4))"])
                #expect(aliveRow["status"] as? String == "delivered")
                #expect(UUID(uuidString: aliveRow["provider_id"] as? String ?? "") != nil)
                #expect(aliveRow["delivered_at"] is String)
                #expect((aliveRow["attempts"] as? Int) == 1)
                let androidRow = try #require(byToken["\(android.prefix(6))…\(android.suffix(4))"])
                #expect((androidRow["provider_id"] as? String)?.hasPrefix("projects/") == true)
                // No full token anywhere in the answer.
                let text = String(buffer: response.body)
                #expect(!text.contains(dead) && !text.contains(alive) && !text.contains(android))

                // Full tokens: refused to a key without devices:read, shown to an admin.
                let refused = try await client.execute(uri: "/v1/apps/support/notifications/\(id)?tokens=full", method: .get, headers: bearer(reader))
                #expect(refused.status == .forbidden)
                let admin = try await harness.test.key(app: nil)
                let full = try await client.execute(uri: "/v1/apps/support/notifications/\(id)?tokens=full", method: .get, headers: bearer(admin))
                #expect(full.status == .ok)
                #expect(String(buffer: full.body).contains(dead))

                // Another app's key, a key without the scope, a user token, an unknown id, another app's path.
                let other = try await harness.test.key(app: "other")
                #expect(try await client.execute(uri: "/v1/apps/support/notifications/\(id)", method: .get, headers: bearer(other)).status == .forbidden)
                let devicesOnly = try await harness.test.key(app: "support", scopes: [.devicesRead])
                #expect(try await client.execute(uri: "/v1/apps/support/notifications/\(id)", method: .get, headers: bearer(devicesOnly)).status == .forbidden)
                let user = try await TestApp.userToken("alice")
                #expect(try await client.execute(uri: "/v1/apps/support/notifications/\(id)", method: .get, headers: bearer(user)).status == .forbidden)
                let missing = try await client.execute(uri: "/v1/apps/support/notifications/\(id + 1000)", method: .get, headers: bearer(reader))
                #expect(missing.status == .notFound)
                #expect(String(buffer: missing.body).contains("notification_not_found"))
                #expect(try await client.execute(uri: "/v1/apps/other/notifications/\(id)", method: .get, headers: bearer(admin)).status == .notFound)
                #expect(try await client.execute(uri: "/v1/apps/support/notifications/abc", method: .get, headers: bearer(reader)).status == .notFound)
            }
        }
    }

    @Test("a ticket's notifications and a device's deliveries come newest first, a page at a time")
    func listsArePaginated() async throws {
        try await DeliveryHarness.with { harness in
            let token = apnsToken(), bystander = apnsToken()
            try await harness.application().test(.router) { client in
                let reader = try await harness.test.key(app: "support", scopes: [.notificationsRead])
                var ids: [Int64] = []
                for _ in 0..<5 { ids.append(try await Self.accept(client, webhook(devices: [(token, "ios")], ticket: "77"))) }
                _ = try await Self.accept(client, webhook(devices: [(bystander, "ios")], ticket: "78"))
                #expect(try await eventually { try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 6 })

                var seen: [Int64] = []
                var cursor: String?
                var pages = 0
                repeat {
                    let uri = "/v1/apps/support/tickets/77/notifications?limit=2" + (cursor.map { "&cursor=\($0)" } ?? "")
                    let response = try await client.execute(uri: uri, method: .get, headers: bearer(reader))
                    #expect(response.status == .ok)
                    let body = try Self.object(response)
                    let page = try #require(body["notifications"] as? [[String: Any]])
                    #expect(page.count <= 2)
                    for item in page {
                        seen.append(try #require((item["id"] as? NSNumber)?.int64Value))
                        #expect((item["counts"] as? [String: Int])?["delivered"] == 1)
                        #expect(item["deliveries"] == nil)
                    }
                    cursor = body["next"] as? String
                    pages += 1
                } while cursor != nil && pages < 10
                #expect(seen == ids.reversed())
                #expect(pages == 3)

                let response = try await client.execute(uri: "/v1/apps/support/devices/\(token.uppercased())/deliveries?limit=4", method: .get, headers: bearer(reader))
                #expect(response.status == .ok)
                let body = try Self.object(response)
                let page = try #require(body["deliveries"] as? [[String: Any]])
                #expect(page.map { ($0["notification_id"] as? NSNumber)?.int64Value } == ids.reversed().prefix(4).map { $0 })
                #expect(page.allSatisfy { $0["ticket_id"] as? String == "77" && $0["status"] as? String == "delivered" })
                let next = try #require(body["next"] as? String)
                let rest = try Self.object(
                    try await client.execute(uri: "/v1/apps/support/devices/\(token)/deliveries?limit=4&cursor=\(next)", method: .get, headers: bearer(reader))
                )
                #expect((rest["deliveries"] as? [[String: Any]])?.compactMap { ($0["notification_id"] as? NSNumber)?.int64Value } == [ids[0]])
                #expect(rest["next"] is NSNull)

                for bad in ["limit=0", "limit=501", "cursor=abc", "cursor=-4"] {
                    let response = try await client.execute(uri: "/v1/apps/support/tickets/77/notifications?\(bad)", method: .get, headers: bearer(reader))
                    #expect(response.status == .badRequest, "\(bad)")
                }
                let badTokens = try await client.execute(uri: "/v1/apps/support/devices/\(token)/deliveries?tokens=all", method: .get, headers: bearer(reader))
                #expect(badTokens.status == .badRequest)
            }
        }
    }

    @Test("a dead token makes a dead_token event; events are signed, and carry no token or text")
    func deadTokenEvent() async throws {
        try await DeliveryHarness.with { base in
            let harness = try base.sendingEvents()
            let dead = apnsToken(), alive = apnsToken()
            harness.state.setBehaviour(SandboxBehaviour(status: 410, reason: "Unregistered"), for: dead)
            try await harness.application(extra: ["events.poll_interval_ms": .init(.int(50), isSecret: false)]).test(.router) { client in
                let id = try await Self.accept(client, webhook(devices: [(dead, "ios"), (alive, "ios")], ticket: "4711", title: "Secret title"))
                #expect(try await eventually { try harness.acceptedEvents().count == 2 })
                let events = try harness.acceptedEvents()
                let deadEvent = try #require(events.first { $0["type"] as? String == "dead_token" })
                #expect((deadEvent["notification_id"] as? NSNumber)?.int64Value == id)
                #expect(deadEvent["ticket_id"] as? String == "4711")
                #expect(deadEvent["platform"] as? String == "ios")
                #expect(deadEvent["token_hint"] as? String == "\(dead.prefix(6))…\(dead.suffix(4))")
                #expect(deadEvent["reason"] as? String == "Unregistered")
                #expect(deadEvent["at"] is String)
                #expect(events.contains { $0["type"] as? String == "delivered" && $0["reason"] is NSNull })
                for request in harness.state.requests(service: "events") {
                    #expect(request.status == 200, "\(request.reason ?? "")")
                    #expect(request.path == "/events/support")
                    #expect(!request.body.contains(dead) && !request.body.contains(alive) && !request.body.contains("Secret title"))
                }
                #expect(try await eventually { try await harness.test.count("SELECT count(*) FROM delivery_events") == 0 })
                let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                #expect(metricValue(metrics, "push_relay_events_sent_total", ["app": "support"]) == 2)
            }
            // The other app has no events section: its outcomes wrote none.
            #expect(try await harness.test.count("SELECT count(*) FROM delivery_events WHERE app_id = 'other'") == 0)
        }
    }

    @Test("a receiver that answers 500 three times still gets every event, in order, once it recovers")
    func receiverRecovers() async throws {
        try await DeliveryHarness.with { base in
            let harness = try base.sendingEvents()
            harness.state.setBehaviour(SandboxBehaviour(status: 500, reason: "receiver down", times: 3), for: "events")
            let extra: [AbsoluteConfigKey: ConfigValue] = [
                "events.poll_interval_ms": .init(.int(50), isSecret: false),
                "events.retry_base_ms": .init(.int(100), isSecret: false),
                "events.batch_size": .init(.int(4), isSecret: false),
            ]
            try await harness.application(extra: extra).test(.router) { client in
                var ids: [Int64] = []
                for ticket in 0..<10 { ids.append(try await Self.accept(client, webhook(devices: [(apnsToken(), "ios")], ticket: "t\(ticket)"))) }
                #expect(try await eventually { try harness.acceptedEvents().count >= 10 })
                let failures = harness.state.requests(service: "events").filter { $0.status == 500 }
                #expect(failures.count == 3)
                let events = try harness.acceptedEvents()
                // Each event once, every notification's, in id order.
                let eventIDs = events.compactMap { ($0["id"] as? NSNumber)?.int64Value }
                #expect(eventIDs == eventIDs.sorted())
                #expect(Set(eventIDs).count == eventIDs.count)
                #expect(Set(events.compactMap { ($0["notification_id"] as? NSNumber)?.int64Value }) == Set(ids))
                let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                #expect(metricValue(metrics, "push_relay_event_send_failures_total", ["app": "support", "reason": "HTTP 500"]) == 3)
            }
        }
    }

    @Test("a failing, slow receiver holds back its own app's events only, and its instance keeps the app's lease while it waits")
    func failingReceiverIsolated() async throws {
        try await DeliveryHarness.with { base in
            let harness = try base.sendingEvents(app: "support").sendingEvents(app: "other")
            // support's receiver answers 503 after a second and a half, asking for 30 seconds' rest.
            harness.state.setBehaviour(SandboxBehaviour(status: 503, reason: "down", retryAfter: 30, delayMilliseconds: 1500), for: "events:support")
            // A short lease (6 s: three request timeouts), so one not renewed while waiting would lapse within the test.
            let extra: [AbsoluteConfigKey: ConfigValue] = [
                "events.poll_interval_ms": .init(.int(50), isSecret: false),
                "events.request_timeout_seconds": .init(.int(2), isSecret: false),
                "events.lease_seconds": .init(.int(5), isSecret: false),
            ]
            try await harness.application(extra: extra).test(.router) { client in
                _ = try await Self.accept(client, webhook(devices: [(apnsToken(), "ios")]))
                #expect(await eventually { harness.state.requests(service: "events").contains { $0.path == "/events/support" } })
                // While support's receiver hangs and then fails, other's events go through at once.
                let started = ContinuousClock.now
                let other = try await client.execute(
                    uri: "/v1/webhooks/zendesk/other/\(TestApp.otherSecret)", method: .post, headers: Self.json,
                    body: jsonBody(webhook(devices: [(apnsToken(), "ios")]))
                )
                #expect(other.status == .accepted)
                #expect(await eventually(timeout: .seconds(10)) {
                    harness.state.requests(service: "events").contains { $0.path == "/events/other" && $0.status == 200 }
                })
                #expect(ContinuousClock.now - started < .seconds(2))
                // support waits out its Retry-After holding the lease (past its 6 s): one try so far, the event kept.
                try await Task.sleep(for: .seconds(8))
                #expect(harness.state.requests(service: "events").filter { $0.path == "/events/support" }.count == 1)
                #expect(try await harness.test.count("SELECT count(*) FROM delivery_events WHERE app_id = 'support'") == 1)
                #expect(try await harness.test.count("SELECT count(*) FROM leases WHERE name = 'events:support' AND expires_at > now()") == 1)
            }
        }
    }

    @Test("a receiver that speaks HTTP/1.1 only gets the events too")
    func http1Receiver() async throws {
        try await DeliveryHarness.with { base in
            let directory = base.directory + "/http1"
            let receiver = try await SandboxServer.start(
                configuration: .init(directory: directory, eventSigningSecret: DeliveryHarness.eventSecret, http1Only: true), logger: DeliveryHarness.logger
            )
            var configured = try base.sendingEvents()
            configured.test.apps[0].events?.url = "https://localhost:\(receiver.port)/events/support"
            let harness = configured
            // The relay trusts one extra CA (tls.ca_file): this receiver's, while the providers stay on the harness' sandbox.
            let bundle = directory + "/both-ca.pem"
            try (String(contentsOfFile: base.sandbox.certificates.caFile, encoding: .utf8) + "\n" + String(contentsOfFile: receiver.certificates.caFile, encoding: .utf8))
                .write(toFile: bundle, atomically: true, encoding: .utf8)
            let extra: [AbsoluteConfigKey: ConfigValue] = [
                "events.poll_interval_ms": .init(.int(50), isSecret: false), "tls.ca_file": .init(.string(bundle), isSecret: false),
            ]
            do {
                try await harness.application(extra: extra).test(.router) { client in
                    _ = try await Self.accept(client, webhook(devices: [(apnsToken(), "ios")]))
                    #expect(await eventually { receiver.state.requests(service: "events").contains { $0.status == 200 } })
                    #expect(try await eventually { try await harness.test.count("SELECT count(*) FROM delivery_events") == 0 })
                }
            } catch {
                await receiver.shutdown()
                throw error
            }
            await receiver.shutdown()
        }
    }

    @Test("an events receiver refuses a wrong signature; the events stay queued")
    func wrongSecretKeepsEvents() async throws {
        try await DeliveryHarness.with { base in
            let harness = try base.sendingEvents(secret: "not-the-receivers-secret-42")
            try await harness.application(extra: ["events.poll_interval_ms": .init(.int(50), isSecret: false)]).test(.router) { client in
                _ = try await Self.accept(client, webhook(devices: [(apnsToken(), "ios")]))
                #expect(await eventually { harness.state.requests(service: "events").contains { $0.status == 401 } })
                #expect(harness.state.requests(service: "events").first?.reason == "signature mismatch")
                #expect(try await harness.test.count("SELECT count(*) FROM delivery_events") == 1)
            }
        }
    }

    @Test("retention deletes old finished deliveries and their notifications, keeps recent and unfinished rows and unread counts")
    func retentionPrunes() async throws {
        try await DeliveryHarness.with { harness in
            let token = apnsToken()
            let sql = harness.test.client
            // The relay's own retention service stays off: this test runs it by hand.
            try await harness.application(extra: ["retention.enabled": .init(.bool(false), isSecret: false)]).test(.router) { client in
                // Ids grow with time, which the pruning walk relies on: the old rows come first.
                _ = try await Self.accept(client, webhook(devices: [(token, "ios")], ticket: "old"))
                #expect(try await eventually { try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 1 })
                _ = try await sql.query(
                    """
                    UPDATE deliveries SET created_at = now() - interval '40 days', updated_at = now() - interval '40 days';
                    """
                )
                _ = try await sql.query("UPDATE notifications SET received_at = now() - interval '40 days'")
                // Badge syncs (no notification) finished or waiting long ago.
                _ = try await sql.query(
                    """
                    INSERT INTO deliveries (app_id, device_token, platform, kind, status, created_at, updated_at, next_attempt_at)
                    SELECT 'support', $1, 'ios', 'badge_sync', s.status, now() - s.age, now() - s.age, now() + interval '1 day'
                    FROM (VALUES (1, 'failed', interval '40 days'), (2, 'dead_token', interval '100 days'), (3, 'pending', interval '40 days'))
                        AS s(ord, status, age)
                    ORDER BY s.ord
                    """,
                    [token]
                )
                _ = try await Self.accept(client, webhook(devices: [(token, "ios")], ticket: "new"))
                #expect(try await eventually { try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 2 })
            }
            let unreadBefore = try await harness.test.count("SELECT coalesce(sum(unread), 0)::int FROM unread_counters")
            #expect(unreadBefore == 2)

            let settings = RetentionSettings(config: ConfigReader(provider: InMemoryProvider(values: ["batch_size": .init(.int(1), isSecret: false)])))
            let service = RetentionService(client: sql, settings: settings, metrics: RelayMetrics(), logger: DeliveryHarness.logger)
            let report = try #require(try await service.runOnce())
            // Gone: the old delivered row and the 100-day dead_token row, and the old notification
            // (it has no delivery left). Kept: the new delivered row, the 40-day failed row (90 days
            // for failures), the pending row, the new notification.
            #expect(report.deliveries == 2)
            #expect(report.notifications == 1)
            let left = try await sql.query("SELECT status FROM deliveries ORDER BY status").rows.map { try $0.decode(String.self) }
            #expect(left == ["delivered", "failed", "pending"])
            #expect(try await harness.test.count("SELECT count(*) FROM notifications") == 1)
            #expect(try await harness.test.count("SELECT coalesce(sum(unread), 0)::int FROM unread_counters") == unreadBefore)
            // A second run finds nothing more; a run while another instance holds the lease does nothing.
            #expect(report.complete)
            let again = try #require(try await service.runOnce())
            #expect(again.deliveries == 0 && again.notifications == 0 && again.events == 0 && again.complete)
            // The complete run keeps the lease for the interval: another instance does not run before then.
            let neighbour = RetentionService(client: sql, settings: settings, metrics: RelayMetrics(), logger: DeliveryHarness.logger)
            #expect(try await neighbour.runOnce() == nil)
            #expect(try await harness.test.count("SELECT count(*) FROM leases WHERE name = 'retention' AND expires_at > now() + interval '50 minutes'") == 1)
        }
    }
}
