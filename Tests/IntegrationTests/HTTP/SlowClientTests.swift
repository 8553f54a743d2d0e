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

@Suite("Hardening: slow clients")
struct SlowClientTests {
    /// Opens a connection and sends `bytes` one at a time, `interval` apart, until the server closes
    /// it or the hang ceiling passes. Returns whether the server closed it, and whether every byte
    /// had been sent by then: a connection cut by a timeout is closed by the server with bytes
    /// still to send (the trickles are far longer than the ceiling).
    static func trickle(port: Int, _ bytes: [UInt8], interval: Duration, wait: Duration = .zero) async throws -> (cut: Bool, sentAll: Bool) {
        let start = ContinuousClock.now
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port).get()
        try await Task.sleep(for: wait)
        var index = 0
        while channel.isActive, ContinuousClock.now - start < hangCeiling {
            if index < bytes.count {
                try? await channel.writeAndFlush(ByteBuffer(bytes: [bytes[index]])).get()
                index += 1
            }
            try await Task.sleep(for: interval)
        }
        let cut = !channel.isActive
        try? await channel.close()
        return (cut, index >= bytes.count)
    }

    /// The TCP options of this process's socket serving `port` to the client at `peerPort`
    /// (the live test server runs in this process): TCP_USER_TIMEOUT, SO_KEEPALIVE, TCP_KEEPIDLE.
    static func serverSocketOptions(port: Int, peerPort: Int) -> (userTimeout: Int32, keepalive: Int32, keepIdle: Int32)? {
        func portNumber(of address: sockaddr_storage) -> Int? {
            guard address.ss_family == sa_family_t(AF_INET) else { return nil }
            var copy = address
            return withUnsafePointer(to: &copy) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
            }
        }
        func address(_ fd: Int32, _ call: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) -> sockaddr_storage? {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let result = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, &length) }
            }
            return result == 0 ? storage : nil
        }
        func option(_ fd: Int32, _ level: Int32, _ name: Int32) -> Int32 {
            var value: Int32 = -1
            var length = socklen_t(MemoryLayout<Int32>.size)
            return getsockopt(fd, level, name, &value, &length) == 0 ? value : -1
        }
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
            guard let fd = Int32(entry), let local = address(fd, getsockname), portNumber(of: local) == port,
                let peer = address(fd, getpeername), portNumber(of: peer) == peerPort
            else { continue }
            return (
                option(fd, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT), option(fd, SOL_SOCKET, SO_KEEPALIVE),
                option(fd, Int32(IPPROTO_TCP), TCP_KEEPIDLE)
            )
        }
        return nil
    }

    @Test("an accepted connection has TCP_USER_TIMEOUT and keepalive, so a client that vanished frees it in seconds, not TCP's 15 minutes")
    func acceptedSocketOptions() async throws {
        let test = try await TestApp.make()
        let app = try await test.application(extra: ["http.tcp_user_timeout_seconds": .init(.int(24), isSecret: false)])
        try await app.testLive { client in
            let port = try #require(client.port)
            // Once a request is answered the connection is set up: its options are read then.
            let options = try await RawConnection.with(port: port) { connection in
                try await connection.send(RawConnection.request("GET", "/health"))
                #expect(try await connection.next()?.status == 200)
                return Self.serverSocketOptions(port: port, peerPort: try #require(connection.localPort))
            }
            #expect(options?.userTimeout == 24_000, "\(String(describing: options))")
            #expect(options?.keepalive == 1)
            #expect(options?.keepIdle == 12)
        }
    }

    @Test("a refused request (401, 403, 429 too_many_streams) is answered with Connection: close and its connection closed; a 404 keeps it")
    func refusalsCloseTheConnection() async throws {
        let test = try await TestApp.make()
        let app = try await test.application(extra: ["unread.max_streams_per_owner": .init(.int(1), isSecret: false)])
        try await app.testLive { client in
            let port = try #require(client.port)
            let key = try await test.key(app: "support", scopes: [.unreadRead])
            let user = try await TestApp.userToken("alice")
            let health = RawConnection.request("GET", "/health")
            /// The refusal's answer, and the answer to a useful request sent after it on the same connection.
            func refused(_ request: [UInt8]) async throws -> (RawHTTP.Answer?, RawHTTP.Answer?) {
                try await RawConnection.with(port: port) { connection in
                    try await connection.send(request)
                    let first = try await connection.next()
                    try? await connection.send(health)
                    return (first, try? await connection.next())
                }
            }
            let cases: [(String, [UInt8], Int)] = [
                ("401", RawConnection.request("GET", "/v1/apps/support/devices/x", headers: [("Authorization", "Bearer not-a-credential")]), 401),
                ("403", RawConnection.request("GET", "/v1/apps/support/devices/x", headers: [("Authorization", "Bearer \(key)")]), 403),
            ]
            for (label, request, status) in cases {
                let (answer, after) = try await refused(request)
                #expect(answer?.status == status, "\(label)")
                #expect(answer?.header("Connection")?.lowercased() == "close", "\(label)")
                #expect(after == nil, "\(label): the connection served another request after the refusal")
            }
            // One stream open for alice (her limit); the next is 429 and its connection closed.
            let open = try SSEReader(port: port, path: "/v1/apps/support/users/alice/unread/stream", bearer: user)
            defer { open.hangUp() }
            #expect(try await open.nextEvent() != nil)
            let (tooMany, afterTooMany) = try await refused(
                RawConnection.request("GET", "/v1/apps/support/users/alice/unread/stream", headers: [("Authorization", "Bearer \(user)")])
            )
            #expect(tooMany?.status == 429)
            #expect(afterTooMany == nil, "the connection served another request after the 429")
            // An answer that is no refusal keeps the connection for the next request.
            let (missing, afterMissing) = try await refused(RawConnection.request("GET", "/no-such-path"))
            #expect(missing?.status == 404)
            #expect(afterMissing?.status == 200)
        }
    }

    @Test("a head trickled on a connection that was idle is cut by the header timeout, not the idle timeout")
    func headerTimeoutShorterThanIdle() async throws {
        // The idle timeout is an hour: only the header timeout can cut the trickle before the hang
        // ceiling. (ConnectionDeadlineTests checks each timeout to the millisecond on a loop's clock.)
        let relay = try await HostileRelay.start(extraYAML: "http:\n  header_timeout_seconds: 2\n  idle_timeout_seconds: 3600")
        defer { relay.relay.stop() }
        let head = Array("GET /health HTTP/1.1\r\nHost: x\r\n".utf8) + Array(String(repeating: "X-Pad: 1\r\n", count: 1000).utf8)
        // Idle for a second first: the idle timeout's timer is armed by then.
        let trickle = try await Self.trickle(port: relay.port, head, interval: .milliseconds(100), wait: .seconds(1))
        #expect(trickle.cut && !trickle.sentAll, "\(trickle)")
    }

    @Test("slow headers, a trickled body and idle connections are cut off, and a valid webhook is served meanwhile")
    func slowlorisCutOff() async throws {
        let relay = try await HostileRelay.start(
            logLevel: "info",
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
        // Each trickle would take minutes to send: cut before it ends, it was cut by the server.
        let result = try await withThrowingTaskGroup(of: (String, (cut: Bool, sentAll: Bool)).self) { group in
            for _ in 0..<60 {
                group.addTask {
                    (
                        "header",
                        try await Self.trickle(
                            port: port,
                            head + Array(String(repeating: "X-Pad: 1\r\n", count: 200).utf8),
                            interval: .milliseconds(200)
                        )
                    )
                }
            }
            for _ in 0..<5 {
                group.addTask {
                    (
                        "body",
                        try await Self.trickle(
                            port: port,
                            head + Array("Content-Length: 5000\r\n\r\n".utf8) + Array(repeating: 0x20, count: 5000),
                            interval: .milliseconds(20)
                        )
                    )
                }
                group.addTask { ("idle", try await Self.trickle(port: port, [], interval: .milliseconds(100))) }
            }
            group.addTask {
                try await Task.sleep(for: .seconds(1))
                let answer = try await relay.send(
                    Fuzz.post(Fuzz.hookPath, Array(webhook(devices: [(apnsToken(), "ios")]).utf8)),
                    timeout: hangCeiling
                )
                return ("valid \(answer?.status ?? 0)", (false, true))
            }
            var all: [(String, (cut: Bool, sentAll: Bool))] = []
            for try await entry in group { all.append(entry) }
            return all
        }
        let valid = try #require(result.first { $0.0.hasPrefix("valid") })
        #expect(
            valid.0 == "valid 202",
            "\(valid); the relay's log:\n\(relay.log.split(separator: "\n").filter { !$0.contains("closing a slow") }.suffix(40).joined(separator: "\n"))"
        )
        // Every slow connection was closed by the server: a head or body still trickling (cut by its
        // timeout, none could have been answered) or an idle one. Those past max_connections wait
        // in the backlog until earlier ones are cut.
        for (kind, trickle) in result where !kind.hasPrefix("valid") {
            #expect(trickle.cut, "a \(kind) connection was not closed by the server")
            if kind != "idle" { #expect(!trickle.sentAll, "a \(kind) connection sent its whole request") }
        }
        #expect(relay.relay.process.isRunning)
    }
}
