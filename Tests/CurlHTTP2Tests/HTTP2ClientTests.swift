import CurlHTTP2
import Foundation
import PushSandbox
import TestSupport
import Testing

@Suite("libcurl HTTP/2 client against the TLS sandbox")
struct HTTP2ClientTests {
    static let token = String(repeating: "ab", count: 32)

    static func apnsHeaders(topic: String? = "com.example.app") -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [
            ("authorization", "bearer test"), ("apns-push-type", "alert"), ("apns-priority", "10"),
        ]
        if let topic { headers.append(("apns-topic", topic)) }
        return headers
    }

    static let payload = Array(#"{"aps":{"alert":{"title":"Agent replied","body":"Hello"}},"zendesk_sdk_request_id":"5"}"#.utf8)

    @Test("a request goes over HTTP/2 with TLS verified against the sandbox CA")
    func http2OverTLS() async throws {
        try await SandboxHarness.with { sandbox in
            let client = try HTTP2Client(configuration: .init(caFile: sandbox.caFile, connectTimeout: hangCeiling))
            let response = try await client.send(
                HTTP2Request(url: "\(sandbox.base)/3/device/\(Self.token)", headers: Self.apnsHeaders(), body: Self.payload, timeout: hangCeiling)
            )
            #expect(response.status == 200)
            #expect(response.httpVersion == 2)
            #expect(UUID(uuidString: response.header("apns-id") ?? "") != nil)
            let received = sandbox.state.requests(service: "apns")
            #expect(received.count == 1)
            #expect(received.first?.headers["apns-topic"] == "com.example.app")
            #expect(received.first?.body == String(decoding: Self.payload, as: UTF8.self))
            await client.shutdown()
        }
    }

    @Test("each event thread is named push-relay-curl in the kernel, so profiles and top -H tell libcurl's work apart")
    func eventThreadsAreNamed() async throws {
        let client = try HTTP2Client(configuration: .init(connectTimeout: hangCeiling, eventThreads: 2))
        // The threads name themselves as they start.
        let named = await eventually { Self.threadNames().filter { $0 == "push-relay-curl" }.count >= 2 }
        #expect(named, "thread names: \(Self.threadNames().sorted())")
        await client.shutdown()
    }

    /// The kernel's names of this process's threads.
    static func threadNames() -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { task in
            (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    @Test("without the sandbox CA the certificate is refused")
    func untrustedCertificate() async throws {
        try await SandboxHarness.with { sandbox in
            let client = try HTTP2Client()
            let error = await #expect(throws: CurlError.self) {
                try await client.send(HTTP2Request(url: "\(sandbox.base)/sink", body: [1], timeout: hangCeiling))
            }
            #expect(error?.code == 60)  // CURLE_PEER_FAILED_VERIFICATION
            #expect(sandbox.state.sinkRequests == 0)
            await client.shutdown()
        }
    }

    @Test("error answers come back with status, headers and body")
    func errorAnswers() async throws {
        try await SandboxHarness.with { sandbox in
            let client = try HTTP2Client(configuration: .init(caFile: sandbox.caFile, connectTimeout: hangCeiling))
            let missingTopic = try await client.send(
                HTTP2Request(
                    url: "\(sandbox.base)/3/device/\(Self.token)",
                    headers: Self.apnsHeaders(topic: nil),
                    body: Self.payload,
                    timeout: hangCeiling
                )
            )
            #expect(missingTopic.status == 400)
            #expect(String(decoding: missingTopic.body, as: UTF8.self).contains("MissingTopic"))

            sandbox.state.setBehaviour(SandboxBehaviour(status: 429, reason: "TooManyRequests", retryAfter: 7, times: 1), for: Self.token)
            let limited = try await client.send(
                HTTP2Request(url: "\(sandbox.base)/3/device/\(Self.token)", headers: Self.apnsHeaders(), body: Self.payload, timeout: hangCeiling)
            )
            #expect(limited.status == 429)
            #expect(limited.header("retry-after") == "7")
            let again = try await client.send(
                HTTP2Request(url: "\(sandbox.base)/3/device/\(Self.token)", headers: Self.apnsHeaders(), body: Self.payload, timeout: hangCeiling)
            )
            #expect(again.status == 200)
            await client.shutdown()
        }
    }

    @Test("response headers are found whatever the case of the name; all are listed lower-cased")
    func responseHeaders() async throws {
        try await SandboxHarness.with { sandbox in
            let client = try HTTP2Client(configuration: .init(caFile: sandbox.caFile, connectTimeout: hangCeiling))
            sandbox.state.setBehaviour(SandboxBehaviour(status: 429, reason: "TooManyRequests", retryAfter: 12, times: 1), for: Self.token)
            let response = try await client.send(
                HTTP2Request(
                    url: "\(sandbox.base)/3/device/\(Self.token)",
                    headers: Self.apnsHeaders() + [("apns-id", "0f3a2b9c-1d2e-4f50-8a6b-7c8d9e0f1a2b")],
                    body: Self.payload,
                    timeout: hangCeiling
                )
            )
            #expect(response.header("Retry-After") == "12")
            #expect(response.header("APNS-ID") == "0f3a2b9c-1d2e-4f50-8a6b-7c8d9e0f1a2b")
            #expect(response.header("retry") == nil)
            let names = response.headers.map(\.name)
            #expect(names.contains("retry-after") && names.contains("apns-id") && names.contains("content-type"))
            #expect(response.headers.first { $0.name == "content-type" }?.value == "application/json")
            await client.shutdown()
        }
    }

    @Test("a header name or value holding a control character (CR, LF, NUL, tab, DEL) fails the request as invalid before anything is sent")
    func headerInjection() async throws {
        try await SandboxHarness.with { sandbox in
            let client = try HTTP2Client(configuration: .init(caFile: sandbox.caFile, connectTimeout: hangCeiling))
            for bad in [
                ("apns-topic", "com.example.app\r\napns-priority: 5"), ("apns-topic", "a\u{0}b"), ("x-bad\nname", "1"),
                ("apns-collapse-id", "zendesk-ticket-\t5"), ("apns-collapse-id", "a\u{7F}b"),
            ] {
                let error = await #expect(throws: CurlError.self) {
                    try await client.send(
                        HTTP2Request(
                            url: "\(sandbox.base)/3/device/\(Self.token)",
                            headers: Self.apnsHeaders(topic: nil) + [bad],
                            body: Self.payload,
                            timeout: hangCeiling
                        )
                    )
                }
                #expect(error?.isRetryable == false)
                #expect(error?.isRequestInvalid == true)
            }
            #expect(sandbox.state.requests(service: "apns").isEmpty)
            // The client still works afterwards.
            let response = try await client.send(
                HTTP2Request(url: "\(sandbox.base)/3/device/\(Self.token)", headers: Self.apnsHeaders(), body: Self.payload, timeout: hangCeiling)
            )
            #expect(response.status == 200)
            await client.shutdown()
        }
    }

    /// More requests than the client's stream cap, so transfers queue and reuse one long-lived
    /// connection: every one must be answered and reach the server exactly once.
    @Test("concurrent requests are multiplexed over one connection, each answered and received once")
    func multiplexing() async throws {
        try await SandboxHarness.with { sandbox in
            let client = try HTTP2Client(configuration: .init(maxConnectionsPerHost: 1, caFile: sandbox.caFile, connectTimeout: hangCeiling))
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for n in 0..<2000 {
                    group.addTask {
                        try await client.send(HTTP2Request(url: "\(sandbox.base)/sink", body: Array("push \(n)".utf8), timeout: hangCeiling)).status
                    }
                }
                var statuses: [Int] = []
                for try await status in group { statuses.append(status) }
                return statuses
            }
            #expect(statuses.count == 2000)
            #expect(statuses.allSatisfy { $0 == 200 })
            #expect(sandbox.state.sinkRequests == 2000)
            #expect(sandbox.state.sinkConnections == 1)
            await client.shutdown()
        }
    }

    @Test("with two event threads, requests are spread over two connections (one per thread), each answered once")
    func eventThreads() async throws {
        try await SandboxHarness.with { sandbox in
            let client = try HTTP2Client(
                configuration: .init(maxConnectionsPerHost: 1, caFile: sandbox.caFile, connectTimeout: hangCeiling, eventThreads: 2)
            )
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for n in 0..<400 {
                    group.addTask {
                        try await client.send(HTTP2Request(url: "\(sandbox.base)/sink", body: Array("push \(n)".utf8), timeout: hangCeiling)).status
                    }
                }
                var statuses: [Int] = []
                for try await status in group { statuses.append(status) }
                return statuses
            }
            #expect(statuses.count == 400)
            #expect(statuses.allSatisfy { $0 == 200 })
            #expect(sandbox.state.sinkRequests == 400)
            #expect(sandbox.state.sinkConnections == 2)
            await client.shutdown()
            // Both threads are stopped: a request after shutdown fails at once, whichever lane it takes.
            for _ in 0..<2 {
                await #expect(throws: CurlError.self) { try await client.send(HTTP2Request(url: "\(sandbox.base)/sink", timeout: hangCeiling)) }
            }
        }
    }

    /// OpenSSL reads ahead on curl's connections, and the event thread tracks each such connection
    /// (it asks whether one holds bytes curl has not taken before it sleeps). A connection must
    /// leave that set when OpenSSL frees it, or the thread would ask a freed object. With a libcurl
    /// that does not read what OpenSSL holds (7.88), no connection reads ahead, and every request
    /// is still answered.
    @Test("TLS connections read ahead (with libcurl 8.14 or later) and are tracked while open, none once the client has shut down")
    func readAhead() async throws {
        try await SandboxHarness.with { sandbox in
            let client = try HTTP2Client(
                configuration: .init(maxConnectionsPerHost: 1, caFile: sandbox.caFile, connectTimeout: hangCeiling, eventThreads: 2)
            )
            #expect(client.readAheadConnections == 0)
            // Enough concurrent requests that both threads open a connection; answers arrive
            // several to a read, so the check for bytes held back is exercised too.
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for n in 0..<400 {
                    group.addTask {
                        try await client.send(HTTP2Request(url: "\(sandbox.base)/sink", body: Array("push \(n)".utf8), timeout: hangCeiling)).status
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.count == 400 && statuses.allSatisfy { $0 == 200 })
            // The count is published after each pass; the pass that answered the last request
            // publishes it right after answering.
            let expected = CurlLibrary.readsAhead ? 2 : 0
            #expect(await eventually { client.readAheadConnections == expected }, "\(client.readAheadConnections) read-ahead connections")
            #expect(sandbox.state.sinkConnections == 2)
            await client.shutdown()
            #expect(client.readAheadConnections == 0)
        }
    }

    @Test("a refused connection is a retryable CurlError")
    func connectionRefused() async throws {
        let client = try HTTP2Client()
        let error = await #expect(throws: CurlError.self) {
            try await client.send(HTTP2Request(url: "https://127.0.0.1:1/sink", body: [1], timeout: hangCeiling))
        }
        #expect(error?.isRetryable == true)
        await client.shutdown()
    }

    @Test("a request whose task is already cancelled is not sent: CancellationError, and the server sees nothing")
    func cancelledBeforeSending() async throws {
        try await SandboxHarness.with { sandbox in
            let client = try HTTP2Client(configuration: .init(caFile: sandbox.caFile, connectTimeout: hangCeiling))
            // The client works: this one arrives.
            let answered = try await client.send(
                HTTP2Request(url: "\(sandbox.base)/3/device/\(Self.token)", headers: Self.apnsHeaders(), body: Self.payload, timeout: hangCeiling)
            )
            #expect(answered.status == 200)
            for _ in 0..<20 {
                let task = Task { () async throws -> HTTP2Response in
                    withUnsafeCurrentTask { $0?.cancel() }
                    return try await client.send(
                        HTTP2Request(
                            url: "\(sandbox.base)/3/device/\(Self.token)",
                            headers: Self.apnsHeaders(),
                            body: Self.payload,
                            timeout: hangCeiling
                        )
                    )
                }
                await #expect(throws: CancellationError.self) { try await task.value }
            }
            // Anything queued would have been answered by now.
            try await Task.sleep(for: .milliseconds(500))
            #expect(sandbox.state.requests(service: "apns").count == 1)
            await client.shutdown()
        }
    }

    @Test("cancelling the task ends a transfer the server holds: the cancel, not an answer, ends it")
    func cancellation() async throws {
        try await SandboxHarness.with { sandbox in
            let client = try HTTP2Client(configuration: .init(caFile: sandbox.caFile, connectTimeout: hangCeiling))
            // The server holds its answer until released: only the cancel, reaching libcurl, can
            // end the send while the request is still held.
            sandbox.state.setBehaviour(SandboxBehaviour(status: 0, delayMilliseconds: 600_000), for: Self.token)
            let task = Task {
                try await client.send(
                    HTTP2Request(url: "\(sandbox.base)/3/device/\(Self.token)", headers: Self.apnsHeaders(), body: Self.payload, timeout: hangCeiling)
                )
            }
            #expect(await eventually { sandbox.state.heldNow == 1 }, "the request reached the server")
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(sandbox.state.heldNow == 1, "the send ended while the server still held its answer")
            sandbox.state.releaseDelays()
            await client.shutdown()
            // After shutdown, requests fail instead of hanging.
            await #expect(throws: CurlError.self) { try await client.send(HTTP2Request(url: "\(sandbox.base)/sink", timeout: hangCeiling)) }
        }
    }
}
