import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Postgres
import PushSandbox
import TestSupport
import Testing

@testable import PushRelay

@Suite("Delivery to APNs and FCM through the sandbox", .serialized)
struct DeliveryTests {
    static let url = "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)"
    static let otherURL = "/v1/webhooks/zendesk/other/\(TestApp.otherSecret)"
    static let json: HTTPFields = [.contentType: "application/json"]

    @Test("the fixture webhook becomes one correct APNs request and one correct FCM request, both delivered")
    func fixtureDelivered() async throws {
        try await DeliveryHarness.with { harness in
            // The fixture's shape, with an APNs-shaped iOS token (the guide's sample is not one).
            let ios = apnsToken()
            let body = fixtureWebhook.replacingOccurrences(of: "oiuytrdsdfghjk", with: ios)
            let started = Date()
            try await harness.application().test(.router) { client in
                let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(body))
                #expect(response.status == .accepted)
                let done = try await eventually {
                    try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 2
                }
                let rows = try await harness.test.client.query("SELECT platform, status, attempts, last_error FROM deliveries ORDER BY platform").rows
                    .map { try $0.decode((String, String, Int, String?).self) }
                #expect(done, "deliveries: \(rows); sandbox: \(harness.state.requests().map { "\($0.service) \($0.status)" })")
                let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                #expect(metricValue(metrics, "push_relay_webhooks_accepted_total", ["app": "support"]) == 1)
                #expect(metricValue(metrics, "push_relay_deliveries_queued_total", ["app": "support"]) == 2)
                for platform in ["ios", "android"] {
                    #expect(
                        metricValue(metrics, "push_relay_push_outcomes_total", ["app": "support", "platform": platform, "outcome": "delivered"]) == 1
                    )
                }
                // Both pushes' time from the webhook's commit to the provider's answer, observed once each.
                #expect(metricValue(metrics, "push_relay_delivery_latency_seconds_count", ["app": "support"]) == 2)
                #expect(metricValue(metrics, "push_relay_delivery_latency_seconds_bucket", ["app": "support", "le": "+Inf"]) == 2)
            }
            let apns = try #require(harness.state.requests(service: "apns").first)
            #expect(harness.state.requests(service: "apns").count == 1)
            #expect(apns.path == "/3/device/\(ios)")
            #expect(apns.status == 200)
            #expect(apns.headers["apns-push-type"] == "alert")
            #expect(apns.headers["apns-topic"] == "com.example.support")
            #expect(apns.headers["apns-priority"] == "10")
            #expect(apns.headers["apns-collapse-id"] == "zendesk-ticket-5")
            #expect(UUID(uuidString: apns.headers["apns-id"] ?? "") != nil)
            let expiration = try #require(apns.headers["apns-expiration"].flatMap(Double.init))
            #expect(expiration > started.timeIntervalSince1970 + 3600)
            let payload = try #require(try JSONSerialization.jsonObject(with: Data(apns.body.utf8)) as? [String: Any])
            #expect(payload["zendesk_sdk_request_id"] as? String == "5")
            let notificationID = try await harness.test.count("SELECT max(id) FROM notifications")
            #expect(payload["push_relay_notification_id"] as? Int == notificationID)
            let aps = try #require(payload["aps"] as? [String: Any])
            #expect(aps["sound"] as? String == "default")
            #expect(aps["badge"] as? Int == 1)
            #expect(aps["alert"] as? [String: String] == ["title": "Agent replied", "body": "Agent replied something something"])

            let fcm = try #require(harness.state.requests(service: "fcm").first)
            #expect(harness.state.requests(service: "fcm").count == 1)
            #expect(fcm.path == "/v1/projects/\(SandboxCredentials.fcmProjectID)/messages:send")
            #expect(fcm.status == 200)
            let message = try #require((try JSONSerialization.jsonObject(with: Data(fcm.body.utf8)) as? [String: Any])?["message"] as? [String: Any])
            #expect(message["token"] as? String == "iuytfrdcvbnmkl")
            // Each device has its own owner (no user linked): one unread reply each.
            #expect(
                message["data"] as? [String: String]
                    == [
                        "zendesk_sdk_request_id": "5", "title": "Agent replied", "body": "Agent replied something something", "unread_count": "1",
                        "push_relay_notification_id": String(notificationID), "thread_id": "5",
                    ]
            )
            let android = try #require(message["android"] as? [String: Any])
            #expect(android["priority"] as? String == "HIGH")
            #expect(android["collapse_key"] as? String == "zendesk-ticket-5")
            // One OAuth exchange; the sandbox only accepts access tokens it issued.
            #expect(harness.state.requests(service: "oauth").count == 1)
            let ids = try await harness.test.client.query("SELECT provider_id FROM deliveries ORDER BY platform").rows.map {
                try $0.decode(String?.self, at: 0)
            }
            #expect(ids[0]?.hasPrefix("projects/\(SandboxCredentials.fcmProjectID)/messages/") == true)
            #expect(ids[1] == apns.headers["apns-id"])
        }
    }

    @Test(
        "410 Unregistered or ExpiredToken marks the device invalid, queues it for Zendesk, and later webhooks skip it",
        arguments: ["Unregistered", "ExpiredToken"]
    )
    func deadToken(reason: String) async throws {
        try await DeliveryHarness.with { harness in
            let dead = apnsToken()
            let alive = apnsToken()
            harness.state.setBehaviour(SandboxBehaviour(status: 410, reason: reason), for: dead)
            try await harness.application().test(.router) { client in
                let first = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(dead, "ios"), (alive, "ios")]))
                )
                #expect(first.status == .accepted)
                #expect(try await eventually { try await harness.deliveries(token: dead).first?.status == "dead_token" })
                #expect(try await eventually { try await harness.deliveries(token: alive).first?.status == "delivered" })
                let device = try #require(
                    try await harness.test.client.query(
                        "SELECT status, invalid_reason FROM devices WHERE app_id = 'support' AND token = $1",
                        [dead]
                    ).first
                ).decode((String, String?).self)
                #expect(device.0 == "invalid")
                #expect(device.1 == reason)
                let queued = try await harness.test.client.query(
                    "SELECT token, platform, reason FROM zendesk_unregister_queue WHERE app_id = 'support'"
                ).rows.map { try $0.decode((String, String, String).self) }
                #expect(queued.count == 1)
                #expect(queued.first?.0 == dead)
                #expect(queued.first?.2 == reason)

                let second = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(dead, "ios"), (alive, "ios")], ticket: "6"))
                )
                #expect(second.json?["skipped"] as? Int == 1)
                // The forwarder hands the dead token to the app's Zendesk (destroy_many), once.
                #expect(
                    await eventually {
                        harness.state.requests(service: "zendesk").contains { $0.status == 200 && $0.body.contains(dead) }
                    }
                )
                // Recorded once Zendesk's answer is back (the sandbox logs the call before answering).
                #expect(
                    try await eventually {
                        try await harness.test.count("SELECT count(*) FROM zendesk_unregister_queue WHERE forwarded_at IS NOT NULL") == 1
                    }
                )
                #expect(
                    try await eventually {
                        let rows = try await harness.deliveries(token: alive)
                        return rows.count == 2 && rows.allSatisfy { $0.status == "delivered" }
                    }
                )
            }
            // The dead token was sent to once only.
            #expect(harness.requests(token: dead).count == 1)
        }
    }

    @Test("410 whose timestamp is older than the device's registration leaves the device registered")
    func deadTokenRegisteredAgain() async throws {
        try await DeliveryHarness.with { harness in
            let token = apnsToken()
            // APNs says the token died a minute ago; the webhook below registers it now.
            let minuteAgo = Int64((Date().timeIntervalSince1970 - 60) * 1000)
            harness.state.setBehaviour(
                SandboxBehaviour(status: 410, reason: "Unregistered", times: 1, invalidSinceMilliseconds: minuteAgo),
                for: token
            )
            try await harness.application().test(.router) { client in
                _ = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(webhook(devices: [(token, "ios")])))
                #expect(try await eventually { try await harness.deliveries(token: token).first?.status == "dead_token" })
                #expect(try await harness.test.count("SELECT count(*) FROM devices WHERE token = $1 AND status = 'active'", [token]) == 1)
                #expect(try await harness.test.count("SELECT count(*) FROM zendesk_unregister_queue WHERE token = $1", [token]) == 0)
                // The next webhook is sent to it.
                let next = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(token, "ios")], ticket: "6"))
                )
                #expect(next.json?["skipped"] as? Int == 0)
                #expect(try await eventually { try await harness.deliveries(token: token).last?.status == "delivered" })
            }
            #expect(harness.requests(token: token).map(\.status) == [410, 200])
        }
    }

    @Test("BadDeviceToken for a device of unknown environment is checked on the other APNs environment, which is then remembered")
    func otherEnvironment() async throws {
        try await DeliveryHarness.with { base in
            // Each environment on its own path of the sandbox, as production_url / sandbox_url would name Apple's two hosts.
            var test = base.test
            let index = try #require(test.apps.firstIndex { $0.id == "support" })
            test.apps[index].apns = APNsSettings(
                topic: "com.example.support",
                productionURL: base.gateway,
                sandboxURL: base.gateway + "/apns-sandbox",
                token: test.apps[index].apns?.token
            )
            let harness = DeliveryHarness(sandbox: base.sandbox, test: test, directory: base.directory)
            let development = apnsToken()
            let production = apnsToken()
            let bad = apnsToken()
            harness.state.setBehaviour(SandboxBehaviour(status: 0, environment: "sandbox"), for: development)
            harness.state.setBehaviour(SandboxBehaviour(status: 400, reason: "BadDeviceToken"), for: bad)
            try await harness.application().test(.router) { client in
                let first = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(development, "ios"), (production, "ios"), (bad, "ios")]))
                )
                #expect(first.status == .accepted)
                #expect(try await eventually { try await harness.deliveries(token: development).first?.status == "delivered" })
                #expect(try await eventually { try await harness.deliveries(token: production).first?.status == "delivered" })
                #expect(try await eventually { try await harness.deliveries(token: bad).first?.status == "dead_token" })
                // Remembered, still registered, not forwarded to Zendesk.
                #expect(
                    try await eventually {
                        try await harness.test.count(
                            "SELECT count(*) FROM devices WHERE token = $1 AND environment = 'sandbox' AND status = 'active'",
                            [development]
                        ) == 1
                    }
                )
                #expect(try await harness.test.count("SELECT count(*) FROM zendesk_unregister_queue WHERE token = $1", [development]) == 0)
                // A token bad on both hosts is dead.
                #expect(try await harness.test.count("SELECT count(*) FROM devices WHERE token = $1 AND status = 'invalid'", [bad]) == 1)
                // The next push goes straight to the development environment.
                _ = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(development, "ios")], ticket: "6"))
                )
                #expect(try await eventually { try await harness.deliveries(token: development).last?.status == "delivered" })
            }
            let sent = harness.requests(token: development).map {
                ($0.path.hasPrefix("/apns-sandbox/") ? "sandbox" : "production", $0.status)
            }
            #expect(sent.map(\.0) == ["production", "sandbox", "sandbox"])
            #expect(sent.map(\.1) == [400, 200, 200])
            #expect(harness.requests(token: production).map(\.path).allSatisfy { !$0.hasPrefix("/apns-sandbox/") })
            #expect(harness.requests(token: bad).map(\.status) == [400, 400])
        }
    }

    @Test("the guide's sample iOS identifier gets BadDeviceToken from APNs and is treated as dead")
    func badDeviceToken() async throws {
        try await DeliveryHarness.with { harness in
            try await harness.application().test(.router) { client in
                let response = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(fixtureWebhook))
                #expect(response.status == .accepted)
                #expect(try await eventually { try await harness.deliveries(token: "oiuytrdsdfghjk").first?.status == "dead_token" })
            }
            #expect(harness.state.requests(service: "apns").first?.reason == "BadDeviceToken")
            #expect(try await harness.test.count("SELECT count(*) FROM zendesk_unregister_queue WHERE token = 'oiuytrdsdfghjk'") == 1)
            #expect(try await harness.test.count("SELECT count(*) FROM devices WHERE token = 'oiuytrdsdfghjk' AND status = 'invalid'") == 1)
        }
    }

    @Test("503 then 200: the delivery is retried and delivered on the second attempt")
    func retryAfterUnavailable() async throws {
        try await DeliveryHarness.with { harness in
            let ios = apnsToken()
            harness.state.setBehaviour(SandboxBehaviour(status: 503, reason: "ServiceUnavailable", times: 1), for: ios)
            harness.state.setBehaviour(SandboxBehaviour(status: 503, reason: "UNAVAILABLE", times: 1), for: "android-retry")
            try await harness.application().test(.router) { client in
                let response = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(ios, "ios"), ("android-retry", "android")]))
                )
                #expect(response.status == .accepted)
                #expect(try await eventually { try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 2 })
            }
            for token in [ios, "android-retry"] {
                #expect(harness.requests(token: token).map(\.status) == [503, 200])
                #expect(try await harness.deliveries(token: token).map(\.attempts) == [2])
            }
        }
    }

    @Test("429 with Retry-After: the next attempt is due that long after the answer, not after the backoff")
    func retryAfterHonoured() async throws {
        try await DeliveryHarness.with { harness in
            let ios = apnsToken()
            harness.state.setBehaviour(SandboxBehaviour(status: 429, reason: "TooManyRequests", retryAfter: 60, times: 1), for: ios)
            try await harness.application().test(.router) { client in
                _ = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(ios, "ios")]))
                )
                // Without Retry-After the retry would be due after 50-100 ms (retry_base_ms 100).
                let retries = try await harness.scheduledRetries([ios])
                #expect(retries.count == 1)
                for retry in retries { Self.expectDue(retry, after: 60) }
                try await harness.makeDue([ios])
                #expect(try await eventually { try await harness.deliveries(token: ios).first?.status == "delivered" })
            }
            #expect(harness.requests(token: ios).map(\.status) == [429, 200])
        }
    }

    /// A retry is due `seconds` after its answer was read: after the sandbox received the request
    /// and before the outcome was stored (bounds the run itself gives).
    static func expectDue(_ retry: (token: String, due: Date, stored: Date, asked: Date), after seconds: Double) {
        #expect(retry.due >= retry.asked.addingTimeInterval(seconds - 0.001), "\(retry.token): due \(retry.due), asked \(retry.asked)")
        #expect(retry.due <= retry.stored.addingTimeInterval(seconds + 0.001), "\(retry.token): due \(retry.due), stored \(retry.stored)")
    }

    @Test("Retry-After: 10000000000000000 from APNs and FCM: the relay keeps running and retries at delivery.max_retry_after_seconds")
    func hugeRetryAfterIsCapped() async throws {
        try await DeliveryHarness.with { harness in
            let ios = apnsToken()
            let huge = 10_000_000_000_000_000
            harness.state.setBehaviour(SandboxBehaviour(status: 429, reason: "TooManyRequests", retryAfter: huge, times: 1), for: ios)
            harness.state.setBehaviour(SandboxBehaviour(status: 503, reason: "UNAVAILABLE", retryAfter: huge, times: 1), for: "android-huge")
            let extra: [AbsoluteConfigKey: ConfigValue] = ["delivery.max_retry_after_seconds": .init(.int(30), isSecret: false)]
            try await harness.application(extra: extra).test(.router) { client in
                let response = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(ios, "ios"), ("android-huge", "android")]))
                )
                #expect(response.status == .accepted)
                // At the cap: not the 50-100 ms of the backoff alone, nor the 317 million years asked for.
                let retries = try await harness.scheduledRetries([ios, "android-huge"])
                #expect(retries.count == 2)
                for retry in retries { Self.expectDue(retry, after: 30) }
                try await harness.makeDue([ios, "android-huge"])
                #expect(try await eventually { try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 2 })
                #expect(try await client.execute(uri: "/health", method: .get).status == .ok)
            }
            for token in [ios, "android-huge"] {
                let requests = harness.requests(token: token)
                #expect(requests.map(\.status) == [requests.first?.status ?? 0, 200])
                #expect(try await harness.deliveries(token: token).map(\.attempts) == [2])
            }
        }
    }

    @Test("Retry-After as an HTTP-date (IMF-fixdate) from APNs and FCM: the retry is due at that time")
    func retryAfterHTTPDate() async throws {
        try await DeliveryHarness.with { harness in
            let ios = apnsToken()
            // A minute ahead, to the second. The mechanism is checked, not a wait: the retry is due at
            // that date (without the date understood it would be due after 50-100 ms, retry_base_ms 100).
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let text = formatter.string(from: Date().addingTimeInterval(60))
            let date = try #require(formatter.date(from: text))
            harness.state.setBehaviour(SandboxBehaviour(status: 429, reason: "TooManyRequests", times: 1, retryAfterText: text), for: ios)
            harness.state.setBehaviour(SandboxBehaviour(status: 503, reason: "UNAVAILABLE", times: 1, retryAfterText: text), for: "android-date")
            try await harness.application().test(.router) { client in
                let response = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(ios, "ios"), ("android-date", "android")]))
                )
                #expect(response.status == .accepted)
                let answered = try await eventually {
                    try await harness.test.count(
                        "SELECT count(*)::int FROM deliveries WHERE status = 'pending' AND attempts = 1 AND last_error IS NOT NULL"
                    ) == 2
                }
                #expect(answered, "the first attempts were not answered with Retry-After")
                let due = try await harness.test.client.query(
                    "SELECT device_token, next_attempt_at, updated_at FROM deliveries ORDER BY device_token"
                ).rows.map { try $0.decode((String, Date, Date).self) }
                #expect(due.count == 2)
                for (token, next, stored) in due {
                    // The wait is counted in whole seconds, rounded up, from when the answer was read:
                    // after the sandbox got the request and before the outcome was stored. So the
                    // retry is due no earlier than the date, and no later than a second past it plus
                    // however long that took here (a bound the run itself gives, not a guess).
                    let asked = try #require(harness.requests(token: token).first?.receivedAt)
                    #expect(next >= date.addingTimeInterval(-0.001), "\(token): due \(next), Retry-After \(text)")
                    #expect(
                        next <= date.addingTimeInterval(stored.timeIntervalSince(asked) + 1.001),
                        "\(token): due \(next), Retry-After \(text), asked \(asked), stored \(stored)"
                    )
                }
            }
            for token in [ios, "android-date"] { #expect(harness.requests(token: token).count == 1) }
        }
    }

    @Test("a send ends within its lease: a slow 401 leaves no time for the retry with a new token, so no claim sends while another is in flight")
    func sendBoundedByLease() async throws {
        try await DeliveryHarness.with { harness in
            let token = "android-slow-401"
            // Each of the first two requests takes 2.5 s and is refused as UNAUTHENTICATED; a 4 s lease
            // cannot hold a request, a token fetch and a second request of up to 3 s.
            harness.state.setBehaviour(
                SandboxBehaviour(status: 401, reason: "UNAUTHENTICATED", delayMilliseconds: 2500, times: 2),
                for: token
            )
            let extra: [AbsoluteConfigKey: ConfigValue] = [
                "delivery.lease_seconds": .init(.int(4), isSecret: false),
                "delivery.request_timeout_seconds": .init(.int(3), isSecret: false),
                "delivery.credential_retry_seconds": .init(.int(1), isSecret: false),
            ]
            try await harness.application(extra: extra).test(.router) { client in
                let response = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(token, "android")]))
                )
                #expect(response.status == .accepted)
                #expect(try await eventually { try await harness.deliveries(token: token).first?.status == "delivered" })
            }
            let requests = harness.requests(token: token).sorted { $0.receivedAt < $1.receivedAt }
            #expect(requests.map(\.status) == [401, 401, 200])
            // The sandbox held each 401 for its 2.5 s: two held at once would mean a second claim sent
            // the push while the first send went on.
            #expect(harness.state.heldPeak == 1, "a request started while another was in flight")
        }
    }

    @Test("a retry for a device unregistered meanwhile is skipped, not sent")
    func retryAfterUnregisterIsSkipped() async throws {
        try await DeliveryHarness.with { harness in
            let ios = apnsToken()
            harness.state.setBehaviour(SandboxBehaviour(status: 429, reason: "TooManyRequests", retryAfter: 2, times: 1), for: ios)
            try await harness.application().test(.router) { client in
                _ = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(ios, "ios")]))
                )
                #expect(await eventually { harness.requests(token: ios).count == 1 })
                // What a bulk unregister does to a device row.
                #expect(
                    try await harness.test.count("WITH gone AS (DELETE FROM devices WHERE token = $1 RETURNING 1) SELECT count(*) FROM gone", [ios])
                        == 1
                )
                #expect(try await eventually { try await harness.deliveries(token: ios).first?.status == "skipped" })
            }
            #expect(harness.requests(token: ios).map(\.status) == [429])
        }
    }

    @Test("one app's sends held by its provider do not hold back another app's deliveries")
    func appsAreIsolated() async throws {
        try await DeliveryHarness.with { harness in
            // The failing app's requests are held until the test releases them, then answered 500:
            // without its share the failing app would hold every stream, and support's deliveries
            // could never go out. So the check does not depend on how fast anything runs.
            let failing = (0..<60).map { _ in apnsToken() }
            for token in failing {
                harness.state.setBehaviour(SandboxBehaviour(status: 500, reason: "InternalServerError", delayMilliseconds: 600_000), for: token)
            }
            let healthy = (0..<20).map { _ in apnsToken() }
            // Ten streams in all: without its share the failing app would hold every one of them.
            try await harness.application(extra: [
                "delivery.max_in_flight_per_app": .init(.int(8), isSecret: false),
                "delivery.connections_per_host": .init(.int(1), isSecret: false),
                "delivery.streams_per_connection": .init(.int(10), isSecret: false),
            ]).test(.router) { client in
                for chunk in stride(from: 0, to: failing.count, by: 10) {
                    let devices = failing[chunk..<(chunk + 10)].map { ($0, "ios") }
                    let response = try await client.execute(
                        uri: Self.otherURL,
                        method: .post,
                        headers: Self.json,
                        body: jsonBody(webhook(devices: devices))
                    )
                    #expect(response.status == .accepted)
                }
                // The failing app fills its share of sends, and they are held.
                #expect(await eventually { harness.state.heldNow >= 8 })
                _ = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: healthy.map { ($0, "ios") }))
                )
                #expect(
                    try await eventually {
                        try await harness.test.count("SELECT count(*) FROM deliveries WHERE app_id = 'support' AND status = 'delivered'")
                            == healthy.count
                    }
                )
                // The failing app is still at it: none of its sends has been answered.
                #expect(harness.state.heldNow >= 8)
                #expect(harness.state.requests(service: "apns").filter { $0.status == 500 }.isEmpty)
                #expect(
                    try await harness.test.count("SELECT count(*) FROM deliveries WHERE app_id = 'other' AND status = 'delivered'") == 0
                )
                harness.state.releaseDelays()
            }
        }
    }

    @Test("claims that wait past their lease are handed back, not sent late: every push arrives once, without extra attempts")
    func lapsedClaimsAreClaimedAgain() async throws {
        try await DeliveryHarness.with { harness in
            // One connection with one stream, so one sender, and 1 s per answer. With a 6 s lease
            // and a 2 s request timeout a delivery may be sent up to 3.4 s after its claim: of eight
            // pushes claimed together, the first four are sent, the last four wait longer and are
            // handed back, then claimed again when their lease ends. Sent late, the seventh and
            // eighth would still be in flight or waiting when their lease ended, and the poll would
            // claim and send them a second time.
            let warmUp = apnsToken()
            let tokens = (0..<8).map { _ in apnsToken() }
            for token in tokens {
                harness.state.setBehaviour(SandboxBehaviour(status: 0, delayMilliseconds: 1000), for: token)
            }
            try await harness.application(extra: [
                "delivery.connections_per_host": .init(.int(1), isSecret: false),
                "delivery.streams_per_connection": .init(.int(1), isSecret: false),
                "delivery.lease_seconds": .init(.int(6), isSecret: false),
                "delivery.request_timeout_seconds": .init(.int(2), isSecret: false),
                "delivery.poll_interval_ms": .init(.int(100), isSecret: false),
            ]).test(.router) { client in
                // The connection and the provider token first, so the timed sends are only answers.
                _ = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(warmUp, "ios")], ticket: "1"))
                )
                #expect(try await eventually { try await harness.deliveries(token: warmUp).first?.status == "delivered" })
                let response = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: tokens.map { ($0, "ios") }))
                )
                #expect(response.status == .accepted)
                let delivered = try await eventually {
                    try await harness.test.count("SELECT count(*) FROM deliveries WHERE app_id = 'support' AND status = 'delivered'") == tokens.count
                        + 1
                }
                #expect(delivered)
                // Outlasting the last send: a duplicate would have arrived by now.
                try await Task.sleep(for: .seconds(1.5))
                let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                #expect((metricValue(metrics, "push_relay_push_outcomes_total", ["app": "support", "outcome": "lapsed"]) ?? 0) >= 1)
            }
            for (index, token) in tokens.enumerated() {
                #expect(harness.requests(token: token).map(\.status) == [200], "push \(index)")
            }
            // A hand-back does not count as an attempt.
            #expect(try await harness.test.count("SELECT count(*) FROM deliveries WHERE attempts <> 1") == 0)
        }
    }

    @Test("credentials the provider rejects do not use up attempts")
    func rejectedCredentials() async throws {
        try await DeliveryHarness.with { harness in
            let ios = apnsToken()
            harness.state.setBehaviour(SandboxBehaviour(status: 403, reason: "InvalidProviderToken"), for: ios)
            try await harness.application(extra: ["delivery.credential_retry_seconds": .init(.int(60), isSecret: false)]).test(.router) { client in
                _ = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(ios, "ios")]))
                )
                #expect(
                    try await eventually {
                        let rows = try await harness.deliveries(token: ios)
                        return rows.first?.status == "pending" && harness.requests(token: ios).count == 1
                    }
                )
                // The console's Apps page (GET /v1/apps) shows the rejection with its reason.
                let admin = try await harness.test.key(app: nil)
                #expect(
                    try await eventually {
                        let apps = try await client.execute(uri: "/v1/apps", method: .get, headers: bearer(admin)).json?["apps"] as? [[String: Any]]
                        let credentials = apps?.first { $0["id"] as? String == "support" }?["credentials"] as? [[String: Any]]
                        let rejection = credentials?.first { $0["platform"] as? String == "ios" }?["last_rejection"] as? [String: Any]
                        return rejection?["reason"] as? String == "InvalidProviderToken"
                    }
                )
                try await Task.sleep(for: .milliseconds(300))
            }
            let row = try #require(
                try await harness.test.client.query(
                    "SELECT status, attempts, last_error, next_attempt_at > now() + interval '50 seconds' FROM deliveries WHERE device_token = $1",
                    [ios]
                ).first
            ).decode((String, Int, String?, Bool).self)
            #expect(row.0 == "pending")
            #expect(row.1 == 0)
            #expect(row.2 == "InvalidProviderToken")
            #expect(row.3)
            #expect(harness.requests(token: ios).count == 1)
        }
    }

    @Test("a key tied to the other environment (403 BadEnvironmentKeyInToken, answered by the sandbox) waits as a credential problem")
    func keyOfTheOtherEnvironment() async throws {
        // The app sends to the production host; its key is for the development environment only.
        try await DeliveryHarness.with(apnsKeyEnvironment: "sandbox") { harness in
            let ios = apnsToken()
            try await harness.application(extra: ["delivery.credential_retry_seconds": .init(.int(60), isSecret: false)]).test(.router) { client in
                _ = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(ios, "ios")]))
                )
                #expect(
                    try await eventually {
                        try await harness.deliveries(token: ios).first?.status == "pending" && !harness.requests(token: ios).isEmpty
                    }
                )
            }
            let row = try #require(
                try await harness.test.client.query(
                    "SELECT status, attempts, last_error FROM deliveries WHERE device_token = $1",
                    [ios]
                ).first
            ).decode((String, Int, String?).self)
            #expect(row.0 == "pending")
            #expect(row.1 == 0)
            #expect(row.2 == "BadEnvironmentKeyInToken")
            #expect(harness.requests(token: ios).allSatisfy { $0.status == 403 && $0.reason == "BadEnvironmentKeyInToken" })
        }
    }

    @Test("a delivery that keeps failing expires after max_attempts")
    func expiresAfterMaxAttempts() async throws {
        try await DeliveryHarness.with { harness in
            let ios = apnsToken()
            harness.state.setBehaviour(SandboxBehaviour(status: 500, reason: "InternalServerError"), for: ios)
            try await harness.application(extra: [
                "delivery.max_attempts": .init(.int(3), isSecret: false), "delivery.retry_base_ms": .init(.int(20), isSecret: false),
            ]).test(.router) { client in
                _ = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(ios, "ios")]))
                )
                #expect(try await eventually { try await harness.deliveries(token: ios).first?.status == "expired" })
            }
            #expect(try await harness.deliveries(token: ios).map(\.attempts) == [3])
            #expect(harness.requests(token: ios).count == 3)
        }
    }

    @Test("a dropped connection is retried on a new one and the push is delivered")
    func droppedConnection() async throws {
        try await DeliveryHarness.with { harness in
            let ios = apnsToken()
            harness.state.setBehaviour(SandboxBehaviour(status: -1, times: 1), for: ios)
            try await harness.application().test(.router) { client in
                _ = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(ios, "ios")]))
                )
                #expect(try await eventually { try await harness.deliveries(token: ios).first?.status == "delivered" })
            }
            #expect(harness.requests(token: ios).map(\.status) == [0, 200])
            #expect(try await harness.deliveries(token: ios).map(\.attempts) == [2])
        }
    }

    @Test(
        "intake pacing: while more deliveries than pace_waiting_deliveries wait for a sender, the next webhook is held back until the clock passes pace_max_wait_ms, then stored",
        arguments: [true, false]
    )
    func intakePacing(paced: Bool) async throws {
        try await DeliveryHarness.with { harness in
            // One stream, so one sender: the sandbox holds the first of these, the other five wait.
            let slow = (0..<6).map { _ in apnsToken() }
            for token in slow { harness.state.setBehaviour(SandboxBehaviour(status: 200, delayMilliseconds: 600_000, times: 1), for: token) }
            let next = apnsToken()
            let maxWait = Duration.seconds(3)
            // The relay waits on this clock: the test moves it, so "held back" and "for at most
            // pace_max_wait_ms" do not depend on how fast the machine is.
            let time = ManualTime()
            try await harness.application(
                extra: [
                    "delivery.connections_per_host": .init(.int(1), isSecret: false),
                    "delivery.streams_per_connection": .init(.int(1), isSecret: false),
                    "webhooks.pace_waiting_deliveries": .init(.int(paced ? 2 : 0), isSecret: false),
                    "webhooks.pace_max_wait_ms": .init(.int(Int(maxWait / .milliseconds(1))), isSecret: false),
                ],
                clock: RelayClock(time)
            ).test(.router) { client in
                let first = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: slow.map { ($0, "ios") }))
                )
                #expect(first.status == .accepted)
                // All six were handed to the dispatcher at once, so one held by the sandbox means
                // five wait for the sender.
                #expect(await eventually { harness.state.heldNow == 1 })
                let second = Task {
                    try await client.execute(
                        uri: Self.url,
                        method: .post,
                        headers: Self.json,
                        body: jsonBody(webhook(devices: [(next, "ios")], ticket: "6"))
                    ).status
                }
                if paced {
                    // The pacer looks again each millisecond of the clock, until pace_max_wait_ms.
                    let pacing = { time.deadlines.contains(time.now + .milliseconds(1)) }
                    #expect(await eventually(pacing), "the next batch waits on the clock")
                    time.advance(by: maxWait - .milliseconds(1))
                    #expect(await eventually(pacing), "still held a millisecond before pace_max_wait_ms")
                    #expect(try await harness.deliveries(token: next).isEmpty, "not stored while held back")
                    time.advance(by: .milliseconds(1))
                }
                // Without pacing it is stored with the clock standing still.
                #expect(try await second.value == .accepted)
                #expect(try await harness.deliveries(token: next).count == 1, "held back, never dropped")
                harness.state.releaseDelays()
            }
        }
    }

    @Test("the Overview counts what this instance is sending from its own report, not from the deliveries' rows")
    func overviewCountsSending() async throws {
        try await DeliveryHarness.with { harness in
            // Stored claimed at intake and held by the sandbox: not due, so the depth query cannot
            // find them among the rows; only the instance's report says they are being sent.
            let slow = (0..<3).map { _ in apnsToken() }
            for token in slow { harness.state.setBehaviour(SandboxBehaviour(status: 200, delayMilliseconds: 600_000, times: 1), for: token) }
            try await harness.application().test(.router) { client in
                let accepted = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: slow.map { ($0, "ios") }))
                )
                #expect(accepted.status == .accepted)
                #expect(await eventually { harness.state.heldNow == 3 })
                #expect(try await harness.test.count("SELECT count(*) FROM deliveries WHERE NOT due AND status = 'sending'") == 3)
                let admin = try await harness.test.key(app: nil)
                var queue: [String: Any]?
                let counted = try await eventually {
                    let overview = try await client.execute(uri: "/v1/overview", method: .get, headers: bearer(admin))
                    let apps = overview.json?["apps"] as? [[String: Any]]
                    queue = apps?.first { $0["app"] as? String == "support" }?["queue"] as? [String: Any]
                    return queue?["sending"] as? Int == 3
                }
                #expect(counted, "\(String(describing: queue))")
                #expect(queue?["pending"] as? Int == 0 && queue?["retrying"] as? Int == 0)
                harness.state.releaseDelays()
            }
        }
    }

    @Test("graceful shutdown waits for the sends in flight, stores their outcomes and hands back the deliveries still waiting")
    func shutdownDrainsSends() async throws {
        try await DeliveryHarness.with { harness in
            let ios = apnsToken()
            // Held until the relay is shutting down: answered before, it would free the one sender
            // for the deliveries that must still be waiting when shutdown begins.
            harness.state.setBehaviour(SandboxBehaviour(status: 0, delayMilliseconds: Int(hangCeiling / .milliseconds(1))), for: ios)
            // One stream, so one sender: these wait behind the slow one.
            let waiting = (0..<4).map { _ in apnsToken() }
            let lines = OutageLogTests.Lines()
            var logger = Logger(label: "push-relay") { RelayLogHandler(label: $0, stream: lines, format: .text) }
            logger.logLevel = .info
            // Released once the dispatcher's shutdown has begun, which it logs.
            let release = Task {
                _ = await eventually { lines.lines.withLock { $0.contains { $0.contains("shutting down: the sends in flight finish") } } }
                harness.state.releaseDelays()
            }
            try await harness.application(
                extra: [
                    "delivery.connections_per_host": .init(.int(1), isSecret: false),
                    "delivery.streams_per_connection": .init(.int(1), isSecret: false),
                ],
                logger: logger
            ).test(.router) { client in
                _ = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(ios, "ios")]))
                )
                // In flight: held by the sandbox, so a sender took it, and not yet answered. Leaving the
                // closure shuts the relay down. (Its row says `sending` from intake's commit on, before
                // the dispatcher has started a sender for it: a shutdown then hands it back.)
                #expect(await eventually { harness.state.heldNow == 1 })
                #expect(try await harness.deliveries(token: ios).first?.status == "sending")
                _ = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: waiting.map { ($0, "ios") }, ticket: "6"))
                )
                #expect(harness.requests(token: ios).isEmpty)
            }
            await release.value
            // Shutdown waited for the answer (the sandbox sent it once shutdown had begun) and stored it.
            #expect(harness.requests(token: ios).map(\.status) == [200])
            #expect(try await harness.deliveries(token: ios).map(\.status) == ["delivered"])
            // Not sent at shutdown, and back in the queue for whichever instance comes next: due now,
            // no lease, the attempt not counted.
            for token in waiting {
                #expect(harness.requests(token: token).isEmpty)
                #expect(try await harness.deliveries(token: token).map { "\($0.status) \($0.attempts)" } == ["pending 0"])
            }
            #expect(
                try await harness.test.count(
                    "SELECT count(*) FROM deliveries WHERE status = 'pending' AND lease_owner IS NULL AND next_attempt_at <= now()"
                ) == waiting.count
            )
        }
    }

    @Test(
        "outcomes: the first after a quiet time is written at once; those answered while the writer waits outcome_write_interval_ms share one statement"
    )
    func outcomeWriteInterval() async throws {
        try await DeliveryHarness.with { harness in
            let first = apnsToken()
            let later = (0..<3).map { _ in apnsToken() }
            // The writer waits on this clock; the test moves it.
            let time = ManualTime()
            // No other part of the relay sleeps this long (the poll sleeps 1 s), so a sleeper with
            // this deadline is the writer.
            let interval = Duration.milliseconds(900)
            try await harness.application(
                extra: ["delivery.outcome_write_interval_ms": .init(.int(Int(interval / .milliseconds(1))), isSecret: false)],
                clock: RelayClock(time)
            ).test(.router) { client in
                _ = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(webhook(devices: [(first, "ios")])))
                // At once: written with the clock standing still.
                #expect(try await eventually { try await harness.deliveries(token: first).first?.status == "delivered" })
                // The writer now waits out the interval on the clock; these three webhooks, each
                // stored and sent on its own, are answered meanwhile, and their outcomes wait.
                #expect(await eventually { time.deadlines.contains(time.now + interval) }, "the writer waits for the interval")
                for (index, token) in later.enumerated() {
                    let response = try await client.execute(
                        uri: Self.url,
                        method: .post,
                        headers: Self.json,
                        body: jsonBody(webhook(devices: [(token, "ios")], ticket: "\(10 + index)"))
                    )
                    #expect(response.status == .accepted)
                }
                #expect(await eventually { later.allSatisfy { harness.requests(token: $0).map(\.status) == [200] } })
                // The relay has taken all four answers (the sandbox's record comes before): the
                // outcomes metric counts one only once it waits for the writer.
                #expect(
                    try await eventually {
                        let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                        return metricValue(metrics, "push_relay_push_outcomes_total", ["app": "support", "outcome": "delivered"]) == 4
                    }
                )
                #expect(
                    try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 1,
                    "written before the interval"
                )
                time.advance(by: interval)
                #expect(try await eventually { try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 4 })
            }
            // Each row's version is the one its outcome wrote: `xmin` names that transaction.
            func written(_ token: String) async throws -> String {
                try #require(
                    try await harness.test.client.query("SELECT xmin::text FROM deliveries WHERE device_token = $1", [token]).rows.first
                ).decode(String.self)
            }
            let firstWrite = try await written(first)
            var laterWrites: [String] = []
            for token in later { laterWrites.append(try await written(token)) }
            #expect(Set(laterWrites).count == 1)
            #expect(!laterWrites.contains(firstWrite))
        }
    }

    @Test("APNs certificate authentication: a PEM and a .p12 client certificate deliver; one for another topic is refused")
    func certificateAuthentication() async throws {
        try await DeliveryHarness.with { made in
            var harness = made
            let certificates = harness.sandbox.certificates
            let pem = try certificates.issueAPNsClientCertificate(
                topic: "com.example.support",
                directory: harness.directory,
                name: "support"
            )
            let elsewhere = try certificates.issueAPNsClientCertificate(
                topic: "com.example.elsewhere",
                directory: harness.directory,
                name: "elsewhere"
            )
            // The .p12 form, as Apple's Keychain exports it, with its password in a file.
            let p12 = harness.directory + "/other.p12"
            let passwordFile = harness.directory + "/other.p12.password"
            try "p12-password-42\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
            let other = try certificates.issueAPNsClientCertificate(topic: "com.example.other", directory: harness.directory, name: "other")
            let openssl = try await ChildProcess.run(
                "/usr/bin/env",
                [
                    "openssl", "pkcs12", "-export", "-in", other.certificateFile, "-inkey", other.keyFile, "-out", p12, "-passout",
                    "pass:p12-password-42",
                ]
            )
            try #require(openssl.status == 0, "\(openssl.error)")

            let gateway = harness.gateway
            for index in harness.test.apps.indices {
                let id = harness.test.apps[index].id
                let certificate: APNsSettings.Certificate =
                    switch id {
                    case "support": .init(file: pem.certificateFile, type: "PEM", keyFile: pem.keyFile)
                    case "other": .init(file: p12, passwordFile: passwordFile)
                    default: .init(file: elsewhere.certificateFile, keyFile: elsewhere.keyFile)
                    }
                harness.test.apps[index].apns = APNsSettings(topic: "com.example.\(id)", url: gateway, certificate: certificate)
            }
            let (support, otherToken) = (apnsToken(), apnsToken())
            let configured = harness
            try await configured.application().test(.router) { client in
                for (url, token) in [(Self.url, support), (Self.otherURL, otherToken)] {
                    let response = try await client.execute(
                        uri: url,
                        method: .post,
                        headers: Self.json,
                        body: jsonBody(webhook(devices: [(token, "ios")]))
                    )
                    #expect(response.status == .accepted)
                }
                #expect(try await eventually { try await configured.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 2 })
            }
            for token in [support, otherToken] {
                let request = try #require(harness.requests(token: token).first)
                #expect(request.status == 200)
                #expect(request.headers["authorization"] == nil)
            }
            #expect(harness.requests(token: otherToken).first?.headers["apns-topic"] == "com.example.other")

            // A certificate for another bundle id: APNs answers TopicDisallowed, a permanent failure.
            let wrong = apnsToken()
            for index in harness.test.apps.indices where harness.test.apps[index].id == "support" {
                harness.test.apps[index].apns = APNsSettings(
                    topic: "com.example.support",
                    url: gateway,
                    certificate: .init(file: elsewhere.certificateFile, keyFile: elsewhere.keyFile)
                )
            }
            let misconfigured = harness
            try await misconfigured.application().test(.router) { client in
                _ = try await client.execute(uri: Self.url, method: .post, headers: Self.json, body: jsonBody(webhook(devices: [(wrong, "ios")])))
                #expect(try await eventually { try await misconfigured.deliveries(token: wrong).first?.status == "failed" })
            }
            #expect(harness.requests(token: wrong).map(\.reason) == ["TopicDisallowed"])
        }
    }
}
