import Foundation
import Postgres
import PushRelay
import PushSandbox
import TestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An executable SwiftPM built beside the test bundle.
func builtExecutable(_ name: String) throws -> String {
    let candidates = [
        ((CommandLine.arguments.first ?? "") as NSString).deletingLastPathComponent + "/" + name,
        packageRoot(from: #filePath).appendingPathComponent(".build/debug/" + name).path,
    ]
    guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw ConfigurationError("\(name) is not built (looked at \(candidates)); run swift build --build-tests")
    }
    return found
}

/// The `push-relay` executable, run as a separate process so it can be killed with SIGKILL.
struct RelayProcess {
    let process: ChildProcess
    let port: Int
    let log: String

    /// The executable SwiftPM built beside the test bundle.
    static var executable: String {
        get throws { try builtExecutable("push-relay") }
    }

    /// Starts `push-relay serve` with `configFile`, logging at `logLevel` to `log`, and waits until
    /// `/health` answers.
    static func start(configFile: String, port: Int, log: String, logLevel: String = "warning") async throws -> RelayProcess {
        let process = try ChildProcess(
            try executable,
            ["serve", "--config", configFile, "--port", String(port), "--log-level", logLevel],
            output: log
        )
        let relay = RelayProcess(process: process, port: port, log: log)
        let healthy = await process.eventuallyWhileRunning {
            (try? await relay.request("GET", "/health").status) == 200
        }
        guard healthy else {
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            let ending = process.terminationStatus.map { "exited with status \($0)" } ?? "did not answer /health"
            process.kill()
            await process.waitUntilExit()
            throw ConfigurationError("push-relay \(ending) before it was healthy; its output:\n\(output)")
        }
        return relay
    }

    func request(_ method: String, _ path: String, body: String? = nil, bearer: String? = nil) async throws -> (status: Int, body: Data) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        request.timeoutInterval = TimeInterval(hangCeiling.components.seconds)  // bounds a hang only
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    func kill() async {
        process.kill()
        await process.waitUntilExit()
    }

    func stop() async {
        if process.isRunning {
            process.interrupt()
            await process.waitUntilExit()
        }
    }

    /// ``stop()`` for a `defer`, holding the thread until the relay has exited (moments after SIGINT).
    func stop() {
        if process.isRunning {
            process.interrupt()
            process.waitUntilExit()
        }
    }
}

@Suite("Crash recovery of the relay process")
struct CrashRecoveryTests {
    @Test("kill -9 mid-batch, restart: every accepted delivery arrives at least once")
    func killMidBatch() async throws {
        let harness = try await DeliveryHarness.make()
        let configFile = harness.directory + "/push-relay.yaml"
        let app = harness.test.apps[0]
        let apns = try #require(app.apns?.token)
        let apps = """
              - id: support
                webhook_secrets: ["\(TestApp.webhookSecret)"]
                apns:
                  topic: com.example.support
                  url: \(harness.gateway)
                  token: { key_file: \(apns.keyFile ?? ""), key_id: \(apns.keyID), team_id: \(apns.teamID) }
            """
        try harness.serveYAML(apps: apps, delivery: ["lease_seconds: 2"]).write(toFile: configFile, atomically: true, encoding: .utf8)

        // Every token's first request is slow, so sends are in flight when the relay is killed. Slow
        // enough that a test task starved for a while on a busy machine still kills the relay before
        // any answer (at 1.5 s, one run in a parallel suite found every push delivered already).
        let tokens = (0..<30).map { _ in apnsToken() }
        for token in tokens { harness.state.setBehaviour(SandboxBehaviour(status: 200, delayMilliseconds: 6000, times: 1), for: token) }

        let log = harness.directory + "/relay.log"
        let first = try await RelayProcess.start(configFile: configFile, port: try EmbeddedPostgres.freePort(), log: log)
        var accepted = 0
        for chunk in stride(from: 0, to: tokens.count, by: 3) {
            let devices = tokens[chunk..<(chunk + 3)].map { ($0, "ios") }
            let response = try await first.request(
                "POST",
                "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)",
                body: webhook(devices: devices, ticket: "\(chunk)")
            )
            if response.status == 202 { accepted += 1 }
        }
        #expect(accepted == 10)
        #expect(await eventually { harness.state.requests(service: "apns").count >= 10 })
        await first.kill()
        // The killed relay left claimed rows behind.
        let sending = try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'sending'")
        #expect(sending > 0)

        let second = try await RelayProcess.start(configFile: configFile, port: try EmbeddedPostgres.freePort(), log: log)
        let done = try await eventually {
            try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == tokens.count
        }
        await second.stop()
        await harness.shutdown()
        #expect(done, "log: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        let answered = Set(
            harness.state.requests(service: "apns").filter { $0.status == 200 }.compactMap { $0.path.split(separator: "/").last.map(String.init) }
        )
        #expect(Set(tokens).subtracting(answered).isEmpty)
        #expect(try await harness.test.count("SELECT count(*) FROM notifications") == 10)
    }
}
