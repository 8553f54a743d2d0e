import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Postgres
import TestSupport
import Testing

@testable import PushRelay

/// Bulk-unregister uploads are bounded and do not hold the database while they arrive; what jobs
/// and the Zendesk queue leave behind is deleted.
@Suite("Jobs: bounded uploads, cancelled and old jobs, the Zendesk queue", .serialized)
struct JobUploadTests {
    static let url = AdminTests.url

    @Test("a text upload over jobs.max_upload_bytes is 413 with a JSON error, and nothing is stored")
    func uploadBound() async throws {
        let test = try await TestApp.make()
        try await test.application(extra: ["jobs.max_upload_bytes": .init(.int(1000), isSecret: false)]).testLive { client in
            let admin = try await test.key(app: nil)
            let small = (0..<50).map { "tok-\($0)" }.joined(separator: "\n")
            let accepted = try await client.execute(uri: Self.url, method: .post, headers: AdminTests.text(admin), body: ByteBuffer(string: small))
            #expect(accepted.status == .accepted)
            #expect(accepted.json?["total"] as? Int == 50)
            let jobs = try await test.count("SELECT count(*) FROM jobs")
            let large = (0..<300).map { "tok-\($0)" }.joined(separator: "\n")
            let refused = try await client.execute(uri: Self.url, method: .post, headers: AdminTests.text(admin), body: ByteBuffer(string: large))
            #expect(refused.status == .contentTooLarge)
            #expect(refused.errorBody?.code == "payload_too_large")
            #expect(refused.errorBody?.message.contains("1000 bytes") == true)
            #expect(try await test.count("SELECT count(*) FROM jobs") == jobs)
            #expect(try await test.count("SELECT count(*) FROM job_tokens WHERE token = 'tok-299'") == 0)
        }
        // Streamed without a Content-Length: counted as it arrives.
        try await test.application(extra: ["jobs.max_upload_bytes": .init(.int(1000), isSecret: false)]).testLive { client in
            let admin = try await test.key(app: nil)
            let jobs = try await test.count("SELECT count(*) FROM jobs")
            var chunked = "POST \(Self.url) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(admin)\r\nContent-Type: text/plain\r\n"
            chunked += "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            for index in 0..<40 {
                let part = (0..<10).map { "tok-\(index)-\($0)\n" }.joined()
                chunked += String(part.utf8.count, radix: 16) + "\r\n" + part + "\r\n"
            }
            chunked += "0\r\n\r\n"
            let answer = try #require(try await RawHTTP.send(port: client.port!, Array(chunked.utf8)))
            #expect(answer.status == 413)
            #expect(answer.text.contains("payload_too_large"))
            #expect(try await test.count("SELECT count(*) FROM jobs") == jobs)
        }
    }

    @Test("while an upload trickles in, no connection is in a transaction or a COPY for it; then the job is stored whole")
    func uploadHoldsNoConnection() async throws {
        let test = try await TestApp.make()
        try await test.application().testLive { client in
            let admin = try await test.key(app: nil)
            let lines = (0..<2000).map { "trickle-\($0)\n" }.joined()
            let body = Array(lines.utf8)
            let half = body.count / 2
            let answer = try await RawConnection.with(port: client.port!) { connection in
                try await connection.send(
                    RawConnection.request(
                        "POST",
                        Self.url,
                        headers: [("Authorization", "Bearer \(admin)"), ("Content-Type", "text/plain"), ("Content-Length", "\(body.count)")]
                    ) + body[..<half]
                )
                // The relay has read half the upload and waits for the rest.
                try await Task.sleep(for: .milliseconds(1500))
                let holding = try await test.count(
                    """
                    SELECT count(*) FROM pg_stat_activity
                    WHERE datname = current_database() AND pid <> pg_backend_pid()
                      AND (state LIKE 'idle in transaction%' OR (query LIKE 'COPY job_tokens%' AND state <> 'idle'))
                    """
                )
                #expect(holding == 0, "a connection is held in a transaction while the client sends")
                #expect(try await test.count("SELECT count(*) FROM jobs") == 0)
                try await connection.send(Array(body[half...]))
                return try await connection.next()
            }
            #expect(answer?.status == 202)
            #expect(try await test.count("SELECT count(*) FROM jobs WHERE total = 2000") == 1)
            // Every line was stored: the job runner (running in this relay) finds each one, none of
            // them registered. It may finish before this looks, and drops the job's tokens then.
            #expect(
                await eventually {
                    (try? await test.count("SELECT count(*) FROM jobs WHERE status = 'succeeded' AND processed = 2000 AND not_found = 2000")) == 1
                }
            )
        }
    }

    @Test("the spool hands every token back, in order, across chunks")
    func spoolRoundTrip() throws {
        let sink = try JobTokenSink()
        let tokens = (0..<200_000).map { $0 % 7 == 0 ? "ABCDEF\($0)" : "tok\\\($0)-\(String(repeating: "x", count: $0 % 50))" }
        for token in tokens {
            #expect(sink.add(token.utf8))
            try sink.flushIfFull()
        }
        #expect(!sink.add("has space".utf8))
        try sink.rewind()
        var lines: [String] = []
        while let chunk = try sink.nextLines() {
            lines += chunk.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        }
        #expect(lines.count == tokens.count)
        // Hex-only tokens are lower-cased, backslashes escaped for COPY.
        #expect(lines[0] == "abcdef0")
        #expect(lines[1] == "tok\\\\1-x")
        #expect(lines.last == "tok\\\\199999-" + String(repeating: "x", count: 199_999 % 50))
    }

    @Test("a cancelled job's uploaded tokens are deleted with the cancellation")
    func cancelledTokens() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let admin = try await test.key(app: nil)
            // A queued job with its upload, held by a lease no runner may take meanwhile.
            let id = UUID()
            try await test.client.query(
                """
                INSERT INTO jobs (id, app_id, kind, status, total, lease_expires_at)
                VALUES ($1, 'support', 'bulk_unregister', 'queued', 5000, now() + interval '1 hour')
                """,
                [id]
            )
            try await test.client.query(
                "INSERT INTO job_tokens (job_id, line, token) SELECT $1::uuid, i, 'never-' || i FROM generate_series(1, 5000) i",
                [id]
            )
            try await test.client.query("INSERT INTO job_batches (job_id, first_line, last_line, removed, not_found) VALUES ($1, 1, 10, 0, 10)", [id])
            let cancelled = try await client.execute(
                uri: "/v1/admin/jobs/\(id.uuidString.lowercased())/cancel",
                method: .post,
                headers: bearer(admin)
            )
            #expect(cancelled.json?["status"] as? String == "cancelled")
            #expect(try await test.count("SELECT count(*) FROM job_tokens WHERE job_id = $1", [id]) == 0)
            #expect(try await test.count("SELECT count(*) FROM job_batches WHERE job_id = $1", [id]) == 0)
            // Cancelling again changes nothing and finds the job as it is.
            let again = try await client.execute(uri: "/v1/admin/jobs/\(id.uuidString.lowercased())/cancel", method: .post, headers: bearer(admin))
            #expect(again.json?["status"] as? String == "cancelled")
        }
    }

    @Test("retention deletes old finished jobs, tokens finished jobs left, and tokens forwarded to Zendesk long ago")
    func retention() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()
        let sql = test.client
        let old = UUID()
        let recent = UUID()
        let leftover = UUID()
        let running = UUID()
        for (id, status, age) in [(old, "succeeded", 40), (recent, "cancelled", 2), (leftover, "cancelled", 1), (running, "running", 40)] {
            try await sql.query(
                """
                INSERT INTO jobs (id, app_id, kind, status, created_at, finished_at)
                VALUES ($1, 'support', 'bulk_unregister', $2, now() - make_interval(days => $3),
                        CASE WHEN $2 <> 'running' THEN now() - make_interval(days => $3) END)
                """,
                [id, status, age]
            )
            try await sql.query("INSERT INTO job_tokens (job_id, line, token) SELECT $1::uuid, i, 't' || i FROM generate_series(1, 5) i", [id])
        }
        try await sql.query(
            """
            INSERT INTO zendesk_unregister_queue (app_id, token, platform, reason, forwarded_at)
            VALUES ('support', 'forwarded-old', 'ios', 'Unregistered', now() - interval '40 days'),
                   ('support', 'forwarded-new', 'ios', 'Unregistered', now() - interval '2 days'),
                   ('support', 'waiting', 'ios', 'Unregistered', NULL)
            """
        )
        var settings = RetentionSettings()
        settings.batchSize = 3
        let service = RetentionService(client: sql, settings: settings, metrics: RelayMetrics(), logger: TestDatabase.logger)
        let report = try #require(try await service.runOnce())
        #expect(report.complete)
        #expect(report.jobs == 1)
        #expect(report.zendeskForwarded == 1)
        #expect(try await test.count("SELECT count(*) FROM jobs WHERE id = $1", [old]) == 0)
        #expect(try await test.count("SELECT count(*) FROM jobs WHERE id IN ($1, $2, $3)", [recent, leftover, running]) == 3)
        // Tokens stay only for the job still running.
        #expect(try await test.count("SELECT count(*) FROM job_tokens WHERE job_id <> $1", [running]) == 0)
        #expect(try await test.count("SELECT count(*) FROM job_tokens WHERE job_id = $1", [running]) == 5)
        let left = try await sql.query("SELECT token FROM zendesk_unregister_queue ORDER BY token").rows.map { try $0.decode(String.self, at: 0) }
        #expect(left == ["forwarded-new", "waiting"])
    }

    @Test("a token forwarded to Zendesk, registered again and removed again is queued again")
    func requeuedAfterForwarding() async throws {
        let test = try await TestApp.make()
        try await test.application(extra: ["jobs.poll_interval_ms": .init(.int(50), isSecret: false)]).test(.router) { client in
            let admin = try await test.key(app: nil)
            func removeJob() async throws {
                let response = try await client.execute(
                    uri: Self.url + "?propagate_to_zendesk=true",
                    method: .post,
                    headers: AdminTests.text(admin),
                    body: ByteBuffer(string: "again-1\nagain-2\n")
                )
                let id = try #require(response.json?["job_id"] as? String)
                #expect(try await AdminTests.waitForJob(client, id, key: admin)?["removed"] as? Int == 2)
            }
            let register = "INSERT INTO devices (app_id, token, platform) VALUES ('support', 'again-1', 'android'), ('support', 'again-2', 'ios')"
            try await test.client.query(register)
            try await removeJob()
            #expect(try await test.count("SELECT count(*) FROM zendesk_unregister_queue WHERE forwarded_at IS NULL") == 2)
            // Zendesk accepted them (what the forwarder records) ...
            try await test.client.query("UPDATE zendesk_unregister_queue SET forwarded_at = now() - interval '1 hour', attempts = 1")
            // ... the app registers them again, and they are removed again; one is still waiting from before.
            try await test.client.query(register)
            try await test.client.query("UPDATE zendesk_unregister_queue SET forwarded_at = NULL, attempts = 7 WHERE token = 'again-2'")
            try await removeJob()
            let rows = try await test.client.query(
                "SELECT token, forwarded_at IS NULL, attempts FROM zendesk_unregister_queue ORDER BY token"
            ).rows.map { try $0.decode((String, Bool, Int).self) }
            #expect(rows.map(\.0) == ["again-1", "again-2"])
            #expect(rows[0].1 && rows[0].2 == 0, "the forwarded token is due again, its attempts counted afresh")
            #expect(rows[1].1 && rows[1].2 == 7, "a token still waiting is left as it was")
        }
    }
}
