import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Postgres
import PushSandbox
import TestSupport
import Testing

@testable import PushRelay

extension DeliveryVisibilityTests {
    @Test("a dead token makes a dead_token event; events are signed, and carry no token or text")
    func deadTokenEvent() async throws {
        try await DeliveryHarness.with { base in
            let harness = try base.sendingEvents()
            let dead = apnsToken()
            let alive = apnsToken()
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
            // support's receiver holds its answer until the test releases it, then answers 503
            // asking for an hour's rest. The request timeout (10 min) is far beyond the test.
            harness.state.setBehaviour(
                SandboxBehaviour(status: 503, reason: "down", retryAfter: 3600, delayMilliseconds: 600_000),
                for: "events:support"
            )
            let extra: [AbsoluteConfigKey: ConfigValue] = [
                "events.poll_interval_ms": .init(.int(50), isSecret: false),
                "events.request_timeout_seconds": .init(.int(600), isSecret: false),
            ]
            // The forwarder polls, waits and renews its leases on this clock; the test moves it.
            let time = ManualTime()
            let start = time.now
            let lease = Duration.seconds(1800)  // three request timeouts
            try await harness.application(extra: extra, clock: RelayClock(time)).test(.router) { client in
                func polled(_ condition: @escaping () -> Bool) async -> Bool {
                    await eventually {
                        time.advance(by: .milliseconds(50))
                        return condition()
                    }
                }
                let events = { harness.state.requests(service: "events") }
                _ = try await Self.accept(client, webhook(devices: [(apnsToken(), "ios")]))
                #expect(await polled { harness.state.heldNow == 1 }, "support's receiver holds the first batch")
                // While support's receiver hangs, other's events go through.
                let other = try await client.execute(
                    uri: "/v1/webhooks/zendesk/other/\(TestApp.otherSecret)",
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(apnsToken(), "ios")]))
                )
                #expect(other.status == .accepted)
                #expect(await polled { events().contains { $0.path == "/events/other" && $0.status == 200 } })
                #expect(harness.state.heldNow == 1, "support's batch is still held")
                // The 503 with Retry-After: 3600. The relay read it (a timeout would show as
                // "transport" and retry after the backoff).
                harness.state.releaseDelays()
                var metrics = ""
                #expect(
                    try await eventually {
                        metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                        return metricValue(metrics, "push_relay_event_send_failures_total", ["app": "support", "reason": "HTTP 503"]) == 1
                    }
                )
                #expect(metricValue(metrics, "push_relay_event_send_failures_total", ["app": "support", "reason": "transport"]) == nil)
                // support waits out its hour holding the lease: it renews it once half has passed.
                let expiry = "SELECT extract(epoch FROM expires_at)::float8 FROM leases WHERE name = 'events:support'"
                let before = try #require(try await harness.test.client.query(expiry).rows.first?.decode(Double.self, at: 0))
                #expect(
                    try await eventually {
                        // Its wait wakes every quarter of the lease to renew it.
                        if time.deadlines.contains(time.now + lease / 4) { time.advance(by: lease / 4) }
                        return try await harness.test.client.query(expiry).rows.first?.decode(Double.self, at: 0) ?? 0 > before
                    },
                    "the lease was not renewed while support waited"
                )
                #expect(time.now - start < .seconds(3600), "the test's clock reached the end of the rest")
                // One try so far, the event kept.
                #expect(events().filter { $0.path == "/events/support" }.count == 1)
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
                configuration: .init(directory: directory, eventSigningSecret: DeliveryHarness.eventSecret, http1Only: true),
                logger: DeliveryHarness.logger
            )
            var configured = try base.sendingEvents()
            configured.test.apps[0].events?.url = "https://localhost:\(receiver.port)/events/support"
            let harness = configured
            // The relay trusts one extra CA (tls.ca_file): this receiver's, while the providers stay on the harness' sandbox.
            let bundle = directory + "/both-ca.pem"
            try
                (String(contentsOfFile: base.sandbox.certificates.caFile, encoding: .utf8) + "\n"
                + String(contentsOfFile: receiver.certificates.caFile, encoding: .utf8))
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
}
