import Configuration
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Postgres
import PushSandbox
import TestSupport
import Testing

@testable import PushRelay

/// A relay whose apps deliver to a sandbox running in the test process, over TLS and HTTP/2, with
/// made-up APNs and FCM credentials that the sandbox checks.
struct DeliveryHarness: Sendable {
    let sandbox: SandboxServer
    var test: TestApp
    let directory: String

    var state: SandboxState { sandbox.state }
    var gateway: String { "https://localhost:\(sandbox.port)" }

    /// Generating the RSA service-account key takes seconds in a debug build; one set serves every
    /// test, made on a thread of its own so it never blocks the concurrency pool that the relay
    /// under test runs on.
    static func credentials() async throws -> SandboxCredentials { try await CredentialsCache.shared.get() }

    private actor CredentialsCache {
        static let shared = CredentialsCache()
        private var task: Task<SandboxCredentials, any Error>?

        func get() async throws -> SandboxCredentials {
            if let task { return try await task.value }
            let task = Task {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SandboxCredentials, any Error>) in
                    let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent(
                        "push-relay-credentials-\(UUID().uuidString.prefix(8))"
                    )
                    Thread { continuation.resume(with: Result { try SandboxCredentials.generate(directory: directory) }) }.start()
                }
            }
            self.task = task
            return try await task.value
        }
    }

    static let logger: Logger = {
        var logger = Logger(label: "push-relay.delivery-tests")
        logger.logLevel = .warning
        return logger
    }()

    /// Delivery settings fast enough for tests: quick polls and retries. The lease leaves a send
    /// (which must end within it) room for a slow first TLS set-up and OAuth exchange on a machine
    /// busy with other suites; tests of leases set their own.
    static let fastDelivery: [AbsoluteConfigKey: ConfigValue] = [
        "delivery.enabled": .init(.bool(true), isSecret: false),
        "delivery.poll_interval_ms": .init(.int(50), isSecret: false),
        "delivery.retry_base_ms": .init(.int(100), isSecret: false),
        "delivery.lease_seconds": .init(.int(20), isSecret: false),
        "delivery.request_timeout_seconds": .init(.int(10), isSecret: false),
    ]

    /// - Parameter apnsKeyEnvironment: ties the sandbox's APNs key to `production` or `sandbox` only.
    /// - Parameter moreAPNsKeys: more keys the sandbox accepts, by key id, beside the shared one.
    static func make(
        conninfo: String? = nil,
        apnsKeyEnvironment: String? = nil,
        moreAPNsKeys: [String: SandboxConfiguration.APNsKey] = [:]
    ) async throws -> DeliveryHarness {
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-delivery-\(UUID().uuidString.prefix(8))")
        let credentials = try await credentials()
        var keys = credentials.apnsKeys.mapValues { key in
            var key = key
            key.environment = apnsKeyEnvironment
            return key
        }
        keys.merge(moreAPNsKeys) { $1 }
        let sandbox = try await SandboxServer.start(
            configuration: .init(directory: directory, apnsKeys: keys, eventSigningSecret: eventSecret),
            logger: logger
        )
        var test = try await TestApp.make(conninfo: conninfo)
        let gateway = "https://localhost:\(sandbox.port)"
        let serviceAccount = try credentials.writeServiceAccount(sandboxURL: gateway)
        let zendeskToken = directory + "/zendesk-api-token"
        try "zendesk-api-token-0123456789".write(toFile: zendeskToken, atomically: true, encoding: .utf8)
        for index in test.apps.indices {
            test.apps[index].apns = APNsSettings(
                topic: "com.example.\(test.apps[index].id)",
                url: gateway,
                token: .init(keyFile: credentials.apnsKeyFile, keyID: SandboxCredentials.apnsKeyID, teamID: SandboxCredentials.apnsTeamID)
            )
            test.apps[index].fcm = FCMSettings(serviceAccountFile: serviceAccount, url: gateway)
            test.apps[index].zendesk = ZendeskSettings(url: gateway, email: "admin@example.com", apiTokenFile: zendeskToken)
        }
        return DeliveryHarness(sandbox: sandbox, test: test, directory: directory)
    }

    /// Makes a harness, runs `body` with it and shuts the sandbox down before returning or throwing.
    ///
    /// A test that changes the harness (its apps' settings) works on a copy: every copy shares the
    /// one sandbox that this shuts down.
    static func with<T: Sendable>(
        conninfo: String? = nil,
        apnsKeyEnvironment: String? = nil,
        moreAPNsKeys: [String: SandboxConfiguration.APNsKey] = [:],
        _ body: (DeliveryHarness) async throws -> T
    ) async throws -> T {
        let harness = try await make(conninfo: conninfo, apnsKeyEnvironment: apnsKeyEnvironment, moreAPNsKeys: moreAPNsKeys)
        do {
            let result = try await body(harness)
            await harness.shutdown()
            return result
        } catch {
            await harness.shutdown()
            throw error
        }
    }

    /// The relay with delivery on, trusting the sandbox's CA.
    /// The relay on these apps and the sandbox; `clock` times what waits (tests pass a
    /// `ManualTime` they move).
    func application(
        extra: [AbsoluteConfigKey: ConfigValue] = [:],
        logger: Logger = TestDatabase.logger,
        clock: RelayClock = .system
    ) async throws -> some ApplicationProtocol {
        var values = Self.fastDelivery
        values["tls.ca_file"] = .init(.string(sandbox.certificates.caFile), isSecret: false)
        values.merge(extra) { $1 }
        return try await test.application(extra: values, logger: logger, clock: clock)
    }

    func shutdown() async { await sandbox.shutdown() }

    /// The secret the sandbox's events receiver checks signatures with.
    static let eventSecret = "events-signing-secret-0123456789"

    /// This harness with app `app` sending its feedback events (`types`, or the default ones) to
    /// the sandbox's receiver at `/events/<app>`, signed with ``eventSecret``.
    func sendingEvents(app: String = "support", types: [String]? = nil, secret: String = eventSecret) throws -> DeliveryHarness {
        let file = directory + "/events-secret-\(app)"
        try secret.write(toFile: file, atomically: true, encoding: .utf8)
        var copy = self
        let index = try #require(copy.test.apps.firstIndex { $0.id == app })
        copy.test.apps[index].events = EventSettings(url: gateway + "/events/\(app)", signingSecretFile: file, types: types)
        return copy
    }

    /// The events the sandbox's receiver accepted (2xx), in the order they arrived, repeats included.
    func acceptedEvents() throws -> [[String: Any]] {
        try state.requests(service: "events").filter { $0.status == 200 }.flatMap { request in
            let object = try #require(try JSONSerialization.jsonObject(with: Data(request.body.utf8)) as? [String: Any])
            return try #require(object["events"] as? [[String: Any]])
        }
    }

    /// A `push-relay serve` configuration file's text for this harness: its database (4
    /// connections) and the sandbox's CA, deliveries polled and retried every 100 ms, `delivery`
    /// lines more (`lease_seconds: 2`), `sections` (whole top-level sections), and `apps` (entries
    /// such as ``appYAML(_:secrets:)`` makes).
    func serveYAML(apps: String, delivery: [String] = [], sections: String = "") -> String {
        let more = delivery.map { "\n  \($0)" }.joined()
        return """
            database:
              url: "\(test.conninfo)"
              max_connections: 4
            tls:
              ca_file: \(sandbox.certificates.caFile)
            delivery:
              poll_interval_ms: 100
              retry_base_ms: 100\(more)
            \(sections)
            apps:
            \(apps)
            """
    }

    /// One entry of a configuration file's `apps:` list for `app`, delivering to the sandbox (APNs,
    /// FCM and Zendesk), with `secrets` as its webhook secrets (the app's own by default).
    func appYAML(_ app: AppConfiguration, secrets: [String]? = nil) throws -> String {
        let apns = try #require(app.apns?.token)
        let fcm = try #require(app.fcm)
        let zendesk = try #require(app.zendesk)
        return """
              - id: \(app.id)
                webhook_secrets: [\((secrets ?? app.webhookSecrets).map { "\"\($0)\"" }.joined(separator: ", "))]
            \(app.userTokens.map { "    user_tokens: { secret_file: \($0.secretFile ?? "") }\n" } ?? "")\
            \(app.push?.content.map { "    push: { content: \($0.rawValue) }\n" } ?? "")\
                apns:
                  topic: com.example.\(app.id)
                  url: \(gateway)
                  token: { key_file: \(apns.keyFile ?? ""), key_id: \(apns.keyID), team_id: \(apns.teamID) }
                fcm:
                  service_account_file: \(fcm.serviceAccountFile ?? "")
                  url: \(gateway)
                zendesk:
                  url: \(gateway)
                  email: admin@example.com
                  api_token_file: \(zendesk.apiTokenFile ?? "")

            """
    }

    /// The requests the sandbox received for one device token.
    func requests(token: String) -> [SandboxRequest] {
        state.requests().filter { $0.path.hasSuffix("/\(token)") || $0.body.contains("\"token\":\"\(token)\"") }
    }

    /// Waits until the first attempt of each of `tokens` was answered with a retry and its outcome
    /// stored; returns, per token, when the retry is due, when the outcome was stored, and when the
    /// sandbox received the request. A retry's due time is the mechanism tests check: the wait
    /// itself is the clock's business, and ``makeDue(_:)`` stands in for it passing.
    func scheduledRetries(_ tokens: [String]) async throws -> [(token: String, due: Date, stored: Date, asked: Date)] {
        let answered = try await eventually {
            try await test.count(
                "SELECT count(*)::int FROM deliveries WHERE device_token = ANY($1) AND status = 'pending' AND attempts = 1 AND last_error IS NOT NULL",
                [tokens]
            ) == tokens.count
        }
        #expect(answered, "the first attempts of \(tokens) were not answered with a retry")
        var retries: [(token: String, due: Date, stored: Date, asked: Date)] = []
        for token in tokens {
            guard
                let row = try await test.client.query(
                    "SELECT next_attempt_at, updated_at FROM deliveries WHERE device_token = $1",
                    [token]
                ).rows.first,
                let asked = requests(token: token).first?.receivedAt
            else { continue }
            let (due, stored) = try row.decode((Date, Date).self)
            retries.append((token, due, stored, asked))
        }
        return retries
    }

    /// Makes the pending deliveries of `tokens` due now, as if their wait had passed: the
    /// dispatcher's poll claims them.
    func makeDue(_ tokens: [String]) async throws {
        _ = try await test.client.query(
            "UPDATE deliveries SET next_attempt_at = now() WHERE device_token = ANY($1) AND status = 'pending'",
            [tokens]
        )
    }

    /// The delivery rows of a token: status, attempts.
    func deliveries(token: String) async throws -> [(status: String, attempts: Int)] {
        try await test.client.query(
            "SELECT status, attempts FROM deliveries WHERE device_token = $1 ORDER BY id",
            [token]
        ).rows.map { try $0.decode((String, Int).self) }
    }
}

/// A random APNs-shaped token: 64 lower-case hex characters.
func apnsToken() -> String {
    (0..<4).map { _ in String(format: "%016llx", UInt64.random(in: 0...UInt64.max)) }.joined()
}

/// A Zendesk webhook body for `devices` (identifier, type).
func webhook(devices: [(String, String)], ticket: String = "5", title: String = "Agent replied", body: String = "Hello") -> String {
    let list = devices.map { #"{"identifier":"\#($0.0)","type":"\#($0.1)"}"# }.joined(separator: ",")
    return #"{"devices":[\#(list)],"notification":{"title":"\#(title)","body":"\#(body)","ticket_id":"\#(ticket)"}}"#
}
