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

@Suite("Admin: bulk-unregister jobs and Zendesk forwarding", .serialized)
struct AdminTests {
    static let url = "/v1/admin/apps/support/devices/bulk-unregister"

    static func text(_ key: String) -> HTTPFields { [.authorization: "Bearer \(key)", .contentType: "text/plain"] }

    /// Registers `count` devices `bulk-<offset+i>` directly (fast set-up for large counts).
    static func register(_ test: TestApp, count: Int, offset: Int = 0) async throws {
        try await test.client.query(
            "INSERT INTO devices (app_id, token, platform) SELECT 'support', 'bulk-' || i, 'android' FROM generate_series($1::int, $2::int) i",
            [offset, offset + count - 1]
        )
    }

    static func waitForJob(_ client: some TestClientProtocol, _ id: String, key: String, status: String = "succeeded") async throws -> [String: Any]?
    {
        var last: [String: Any]?
        _ = try await eventually {
            last = try await client.execute(uri: "/v1/admin/jobs/\(id)", method: .get, headers: bearer(key)).json
            return last?["status"] as? String == status
        }
        return last
    }

    @Test("10,000 tokens, half of them unknown: exact removed and not_found counts")
    func exactCounts() async throws {
        let test = try await TestApp.make()
        try await test.application(extra: ["jobs.batch_size": .init(.int(3000), isSecret: false)]).test(.router) { client in
            try await Self.register(test, count: 5000)
            let admin = try await test.key(app: nil)
            // Registered bulk-0…4999 and unknown bulk-5000…9999, interleaved, CRLF line ends, a blank line.
            let lines = (0..<5000).flatMap { ["bulk-\($0)", "bulk-\($0 + 5000)"] }.joined(separator: "\r\n") + "\r\n\r\n"
            let response = try await client.execute(uri: Self.url, method: .post, headers: Self.text(admin), body: ByteBuffer(string: lines))
            #expect(response.status == .accepted)
            #expect(response.json?["total"] as? Int == 10_000)
            let id = try #require(response.json?["job_id"] as? String)
            let job = try #require(try await Self.waitForJob(client, id, key: admin))
            #expect(job["status"] as? String == "succeeded")
            #expect(job["total"] as? Int == 10_000)
            #expect(job["processed"] as? Int == 10_000)
            #expect(job["removed"] as? Int == 5000)
            #expect(job["not_found"] as? Int == 5000)
            #expect(job["failed"] as? Int == 0)
            #expect(try await test.count("SELECT count(*) FROM devices WHERE app_id = 'support'") == 0)
            // The uploaded lines are dropped just after the job is marked succeeded.
            #expect(try await eventually { try await test.count("SELECT count(*) FROM job_tokens") == 0 })
            // Without propagate_to_zendesk nothing is queued for Zendesk.
            #expect(try await test.count("SELECT count(*) FROM zendesk_unregister_queue") == 0)
            let list = try await client.execute(uri: "/v1/admin/jobs", method: .get, headers: bearer(admin))
            #expect((list.json?["jobs"] as? [[String: Any]])?.first?["id"] as? String == id)
        }
    }

    @Test("a job interrupted by a restart resumes and ends with the same counts")
    func resumesAfterRestart() async throws {
        let test = try await TestApp.make()
        let first = try await test.application(extra: [
            "jobs.batch_size": .init(.int(100), isSecret: false), "jobs.lease_seconds": .init(.int(1), isSecret: false),
        ])
        try await Self.register(test, count: 4000)
        let admin = try await test.key(app: nil)
        let id: String = try await first.test(.router) { client in
            let lines = (0..<8000).map { "bulk-\($0)" }.joined(separator: "\n")
            let response = try await client.execute(uri: Self.url, method: .post, headers: Self.text(admin), body: ByteBuffer(string: lines))
            let id = try #require(response.json?["job_id"] as? String)
            // Stop the relay part-way through.
            #expect(try await eventually { try await test.count("SELECT processed FROM jobs") >= 500 })
            return id
        }
        let stopped = try await test.client.query("SELECT status, processed FROM jobs").first!.decode((String, Int).self)
        #expect(stopped.0 == "running")
        #expect(stopped.1 > 0 && stopped.1 < 8000, "processed \(stopped.1) when the relay stopped")
        try await test.application(extra: ["jobs.lease_seconds": .init(.int(1), isSecret: false)]).test(.router) { client in
            let job = try #require(try await Self.waitForJob(client, id, key: admin))
            #expect(job["processed"] as? Int == 8000)
            #expect(job["removed"] as? Int == 4000)
            #expect(job["not_found"] as? Int == 4000)
        }
    }

    @Test("propagated tokens reach Zendesk once each, in batches of at most 100, with a 429 retried after its Retry-After")
    func zendeskForwarding() async throws {
        try await DeliveryHarness.with { harness in
            harness.state.setBehaviour(SandboxBehaviour(status: 429, reason: "Too Many Requests", retryAfter: 1, times: 1), for: "zendesk")
            // The forwarder polls and pauses on this clock: the test moves it a poll at a time, each
            // time once the forwarder sleeps again (so it has looked at the time before).
            let time = ManualTime()
            let poll = Duration.milliseconds(70)
            @Sendable func asleep() async { _ = await eventually { time.deadlines.contains(time.now + poll) } }
            @Sendable func step() async {
                await asleep()
                time.advance(by: poll)
            }
            try await harness.application(
                extra: [
                    "zendesk.poll_interval_ms": .init(.int(Int(poll / .milliseconds(1))), isSecret: false),
                    "zendesk.retry_base_ms": .init(.int(100), isSecret: false),
                ],
                clock: RelayClock(time)
            ).test(.router) { client in
                try await Self.register(harness.test, count: 250)
                let admin = try await harness.test.key(app: nil)
                let tokens = (0..<250).map { "\"bulk-\($0)\"" }.joined(separator: ",") + ",\"never-registered\""
                let response = try await client.execute(
                    uri: Self.url,
                    method: .post,
                    headers: bearer(admin),
                    body: jsonBody(#"{"tokens":[\#(tokens)],"propagate_to_zendesk":true}"#)
                )
                #expect(response.status == .accepted)
                let id = try #require(response.json?["job_id"] as? String)
                _ = try await Self.waitForJob(client, id, key: admin)
                // The first batch is answered 429 with Retry-After: 1. The failure is counted just
                // after the pause is set, so the pause began at most a poll before this.
                #expect(
                    try await eventually {
                        await step()
                        let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                        return metricValue(metrics, "push_relay_zendesk_forward_failures_total", ["app": "support", "reason": "HTTP 429"]) == 1
                    }
                )
                let pausedAt = time.now
                var polls = 0
                while time.now + poll < pausedAt - poll + .seconds(1) {
                    await step()
                    polls += 1
                }
                await asleep()
                // Polled through that second without a call: the backoff alone (100 ms) would
                // have called again after two polls.
                #expect(polls >= 10)
                #expect(harness.state.requests(service: "zendesk").count == 1, "called again within the Retry-After")
                #expect(
                    try await eventually {
                        await step()
                        return try await client.execute(uri: "/v1/admin/jobs/\(id)", method: .get, headers: bearer(admin)).json?["forwarded"] as? Int
                            == 250
                    }
                )
                #expect(
                    try await eventually {
                        try await client.execute(uri: "/v1/admin/jobs/\(id)", method: .get, headers: bearer(admin)).json?["forwarded"] as? Int == 250
                    }
                )
                // The forwarder counts a batch just after recording it, so the last count may trail the job's.
                var metrics = ""
                #expect(
                    try await eventually {
                        metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                        return metricValue(metrics, "push_relay_zendesk_forwarded_tokens_total", ["app": "support"]) == 250
                    }
                )
                #expect(metricValue(metrics, "push_relay_zendesk_forward_failures_total", ["app": "support", "reason": "HTTP 429"]) == 1)
                #expect(metricValue(metrics, "push_relay_bulk_unregister_removed_total", ["app": "support"]) == 250)
                #expect(metricValue(metrics, "push_relay_bulk_unregister_not_found_total", ["app": "support"]) == 1)
            }
            let calls = harness.state.requests(service: "zendesk")
            #expect(calls.first?.status == 429)
            var forwarded: [String] = []
            for call in calls where call.status == 200 {
                let list = try #require(
                    (try JSONSerialization.jsonObject(with: Data(call.body.utf8)) as? [String: Any])?["push_notification_devices"] as? [String]
                )
                #expect(list.count <= 100)
                forwarded += list
            }
            #expect(forwarded.count == 250)
            #expect(Set(forwarded) == Set((0..<250).map { "bulk-\($0)" }))
        }
    }

    @Test("bad uploads get 400 (or 415) and create nothing; only admin keys may start jobs")
    func badUploadsAndAuth() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let admin = try await test.key(app: nil)
            let json = bearer(admin)
            let cases: [(HTTPFields, String, HTTPResponse.Status)] = [
                (json, "not json", .badRequest),
                (json, "[]", .badRequest),
                (json, #"{"propagate_to_zendesk":true}"#, .badRequest),
                (json, #"{"tokens":"abc"}"#, .badRequest),
                (json, #"{"tokens":[1,2]}"#, .badRequest),
                (json, #"{"tokens":[]}"#, .badRequest),
                (json, #"{"tokens":["has space"]}"#, .badRequest),
                (json, #"{"tokens":["a"],"propagate_to_zendesk":"yes"}"#, .badRequest),
                (Self.text(admin), "ok-token\nbad token\n", .badRequest),
                (Self.text(admin), "\n\n", .badRequest),
                // A "line" that never ends is refused once it outgrows any token, not buffered whole.
                (Self.text(admin), "ok-token\n" + String(repeating: "a", count: 200_000), .badRequest),
                (Self.text(admin), "\u{0}token\n", .badRequest),
                ([.authorization: "Bearer \(admin)", .contentType: "application/xml"], "<tokens/>", .unsupportedMediaType),
            ]
            for (headers, body, status) in cases {
                let response = try await client.execute(uri: Self.url, method: .post, headers: headers, body: ByteBuffer(string: body))
                #expect(response.status == status, "\(body)")
                #expect(response.errorBody != nil)
            }
            #expect(try await test.count("SELECT count(*) FROM jobs") == 0)
            // The uploaded lines are dropped just after the job is marked succeeded.
            #expect(try await eventually { try await test.count("SELECT count(*) FROM job_tokens") == 0 })

            let appKey = try await test.key(app: "support")
            let forbidden = try await client.execute(uri: Self.url, method: .post, headers: bearer(appKey), body: jsonBody(#"{"tokens":["a"]}"#))
            #expect(forbidden.status == .forbidden)
            #expect(try await client.execute(uri: "/v1/admin/jobs", method: .get, headers: bearer(appKey)).status == .forbidden)
            #expect(try await client.execute(uri: Self.url, method: .post, body: jsonBody(#"{"tokens":["a"]}"#)).status == .unauthorized)
            #expect(try await client.execute(uri: "/v1/admin/jobs/\(UUID())", method: .get, headers: bearer(admin)).status == .notFound)
            for type in ["application/json", "text/plain"] {
                let flagged = try await client.execute(
                    uri: Self.url + "?propagate_to_zendesk=maybe",
                    method: .post,
                    headers: [.authorization: "Bearer \(admin)", .contentType: type],
                    body: ByteBuffer(string: type == "text/plain" ? "abc\n" : #"{"tokens":["abc"]}"#)
                )
                #expect(flagged.status == .badRequest, "\(type)")
                #expect(flagged.errorBody?.message.hasPrefix("propagate_to_zendesk ") == true)
            }
            for limit in ["0", "501", "abc", "-1", "1e2"] {
                let list = try await client.execute(uri: "/v1/admin/jobs?limit=\(limit)", method: .get, headers: bearer(admin))
                #expect(list.status == .badRequest, "limit=\(limit)")
                #expect(list.errorBody?.message.hasPrefix("limit ") == true)
            }
            #expect(try await client.execute(uri: "/v1/admin/jobs?limit=500", method: .get, headers: bearer(admin)).status == .ok)
        }
    }

    @Test("a cancelled job stops and says so")
    func cancel() async throws {
        let test = try await TestApp.make()
        // No job runner picks it up quickly: a long poll and no NOTIFY reaction matters not; cancel at once.
        try await test.application(extra: ["jobs.batch_size": .init(.int(10), isSecret: false)]).test(.router) { client in
            try await Self.register(test, count: 3000)
            let admin = try await test.key(app: nil)
            let lines = (0..<3000).map { "bulk-\($0)" }.joined(separator: "\n")
            let response = try await client.execute(uri: Self.url, method: .post, headers: Self.text(admin), body: ByteBuffer(string: lines))
            let id = try #require(response.json?["job_id"] as? String)
            let cancelled = try await client.execute(uri: "/v1/admin/jobs/\(id)/cancel", method: .post, headers: bearer(admin))
            #expect(cancelled.status == .ok)
            #expect(cancelled.json?["status"] as? String == "cancelled")
            try await Task.sleep(for: .milliseconds(500))
            let after = try await client.execute(uri: "/v1/admin/jobs/\(id)", method: .get, headers: bearer(admin)).json
            #expect(after?["status"] as? String == "cancelled")
            #expect((after?["processed"] as? Int ?? 0) < 3000)
        }
    }
}
