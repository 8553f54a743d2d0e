import Crypto
import Foundation
import Postgres
import PushRelay
import PushSandbox
import Synchronization
import TestSupport
import Testing

/// A `push-relay serve` process whose configuration file is rewritten and reloaded (SIGHUP or
/// `POST /v1/admin/reload`) while webhooks flow, against the sandbox.
@Suite("Reload and credential rotation")
struct ReloadTests {
    /// What the configuration file says of the app `support`, and of any other app.
    struct Setup: Sendable {
        var webhookSecrets: [String]
        var signingSecrets: [String]
        var apnsKeyFile: String
        var apnsKeyID: String
        var serviceAccountFile: String
        var zendeskTokenFile: String
        var eventsSecretFile: String
        var moreApps = ""
        var extra = ""
    }

    static func yaml(_ setup: Setup, harness: DeliveryHarness) -> String {
        func list(_ values: [String]) -> String { "[" + values.map { "\"\($0)\"" }.joined(separator: ", ") + "]" }
        // The request timeout and the lease only bound a hang: a send that times out or outlives its
        // lease is sent again, as it should be, and the exactly-once check would call that a
        // duplicate (two pushes were sent twice under four busy loops with 10 s and 20 s).
        return """
            database:
              url: "\(harness.test.conninfo)"
              max_connections: 8
            delivery:
              enabled: true
              poll_interval_ms: 50
              retry_base_ms: 100
              lease_seconds: 1200
              request_timeout_seconds: 300
              credential_retry_seconds: 1
            tls:
              ca_file: \(harness.sandbox.certificates.caFile)
            zendesk:
              poll_interval_ms: 100
            events:
              poll_interval_ms: 100
              retry_base_ms: 200
              retry_max_seconds: 1
            \(setup.extra)
            apps:
              - id: support
                webhook_secrets: \(list(setup.webhookSecrets))
                webhook_signing_secret: \(list(setup.signingSecrets))
                apns:
                  topic: com.example.support
                  url: \(harness.gateway)
                  token: {key_file: \(setup.apnsKeyFile), key_id: \(setup.apnsKeyID), team_id: \(SandboxCredentials.apnsTeamID)}
                fcm:
                  service_account_file: \(setup.serviceAccountFile)
                  url: \(harness.gateway)
                zendesk:
                  url: \(harness.gateway)
                  email: admin@example.com
                  api_token_file: \(setup.zendeskTokenFile)
                events:
                  url: \(harness.gateway)/events/support
                  signing_secret_file: \(setup.eventsSecretFile)
            \(setup.moreApps)
            """
    }

    /// The webhook secret and signing secret a sender uses now.
    final class Sender: Sendable {
        struct Sent: Sendable {
            var status: Int
            var tokens: [String]
        }

        private let current: Mutex<(secret: String, signing: String, generation: Int)>
        /// The generation of the values the last completed webhook was sent with.
        private let completedGeneration = Atomic<Int>(0)
        private let sent = Mutex<[Sent]>([])
        private let dead = Mutex<[String]>([])
        let port: Int

        init(port: Int, secret: String, signing: String) {
            self.port = port
            current = Mutex((secret, signing, 0))
        }

        /// Switches to new values and waits until a webhook sent with them has been answered, so
        /// no webhook with the old ones is still on its way when the caller moves on.
        func use(secret: String? = nil, signing: String? = nil) async {
            let generation = current.withLock { current in
                if let secret { current.secret = secret }
                if let signing { current.signing = signing }
                current.generation += 1
                return current.generation
            }
            _ = await eventually { self.completedGeneration.load(ordering: .acquiring) >= generation }
        }

        /// Waits until `count` more webhooks were answered (and at least `minimum`), so every phase
        /// of the test sees webhooks flowing, however slow the machine.
        func flow(count: Int = 3, minimum: Duration = .milliseconds(300)) async throws {
            let target = results.count + count
            try await Task.sleep(for: minimum)
            _ = await eventually { self.results.count >= target }
        }

        /// The next webhook carries this token too (the sandbox answers it 410: a dead token).
        func addDead(_ token: String) { dead.withLock { $0.append(token) } }

        var results: [Sent] { sent.withLock { $0 } }

        /// One signed webhook for a new iOS and a new Android token (and any dead token queued).
        func send() async {
            let (secret, signing, generation) = current.withLock { $0 }
            let extra = dead.withLock { dead in
                defer { dead = [] }
                return dead
            }
            let tokens = [apnsToken(), "android-\(UUID().uuidString)"] + extra
            let body = Array(webhook(devices: tokens.map { ($0, $0.hasPrefix("android") ? "android" : "ios") }).utf8)
            let timestamp = String(Int(Date().timeIntervalSince1970))
            let headers = [
                ("Content-Type", "application/json"), ("X-Zendesk-Webhook-Signature-Timestamp", timestamp),
                ("X-Zendesk-Webhook-Signature", hmacSignature(secret: signing, timestamp: timestamp, body: body)),
            ]
            let answer = try? await RawHTTP.send(
                port: port,
                RawHTTP.request("POST", "/v1/webhooks/zendesk/support/\(secret)", headers: headers, body: body)
            )
            sent.withLock { $0.append(Sent(status: answer?.status ?? 0, tokens: tokens)) }
            completedGeneration.store(generation, ordering: .releasing)
        }
    }

    /// The `kid` of each APNs provider token the sandbox was shown.
    static func providerKeyIDs(_ state: SandboxState) -> Set<String> {
        Set(
            state.presentedCredentials().compactMap { credential -> String? in
                let parts = credential.split(separator: ".")
                guard parts.count == 3 else { return nil }
                var base64 = parts[0].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
                while base64.count % 4 != 0 { base64 += "=" }
                guard let data = Data(base64Encoded: base64),
                    let header = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
                else { return nil }
                return header["kid"] as? String
            }
        )
    }

    @Test(
        "every credential is rotated by reloads while webhooks flow: no webhook refused, every push sent exactly once with the new credential"
    )
    func rotation() async throws {
        let keys = (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-rotation-\(UUID().uuidString.prefix(8))")
        let (newKeyFile, newKey) = try SandboxCredentials.generateAPNsKey(keyID: "SANDBOXKY2", teamID: SandboxCredentials.apnsTeamID, directory: keys)
        try await DeliveryHarness.with(moreAPNsKeys: ["SANDBOXKY2": newKey]) { harness in
            let credentials = try await DeliveryHarness.credentials()
            let directory = harness.directory
            func write(_ text: String, _ name: String) throws -> String {
                let path = directory + "/" + name
                try text.write(toFile: path, atomically: true, encoding: .utf8)
                return path
            }
            let zendeskToken = try write("zendesk-token-old-0123456789", "zendesk-token")
            let eventsSecret = try write(DeliveryHarness.eventSecret, "events-secret")
            // Another service account: the same kind of key, another account name.
            let oldAccount = try credentials.writeServiceAccount(sandboxURL: harness.gateway)
            var account = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: oldAccount))) as? [String: String]
            )
            account["client_email"] = "rotated@push-relay-sandbox.iam.gserviceaccount.com"
            let newAccount = try write(
                String(decoding: try JSONSerialization.data(withJSONObject: account, options: [.sortedKeys]), as: UTF8.self),
                "service-account-rotated.json"
            )
            let (s1, s2) = ("webhook-secret-one-0123456789", "webhook-secret-two-0123456789")
            let (g1, g2) = ("signing-secret-one-0123456789", "signing-secret-two-0123456789")
            var setup = Setup(
                webhookSecrets: [s1],
                signingSecrets: [g1],
                apnsKeyFile: credentials.apnsKeyFile,
                apnsKeyID: SandboxCredentials.apnsKeyID,
                serviceAccountFile: oldAccount,
                zendeskTokenFile: zendeskToken,
                eventsSecretFile: eventsSecret
            )
            let configFile = try write(Self.yaml(setup, harness: harness), "push-relay.yaml")
            let relay = try await RelayProcess.start(
                configFile: configFile,
                port: try EmbeddedPostgres.freePort(),
                log: directory + "/relay.log",
                logLevel: "info"
            )
            defer { relay.stop() }
            let admin = try await harness.test.key(app: nil)
            func log() -> String { (try? String(contentsOfFile: relay.log, encoding: .utf8)) ?? "" }
            func count(_ text: String) -> Int { log().components(separatedBy: text).count - 1 }
            var reloads = 0
            /// Writes the file and reloads, by SIGHUP or the admin API in turn; waits until it is in use.
            func reload(_ setup: Setup) async throws {
                try Self.yaml(setup, harness: harness).write(toFile: configFile, atomically: true, encoding: .utf8)
                reloads += 1
                if reloads % 3 == 0 {
                    // The units' ExecReload=: it answers, and says what changed.
                    let asked = try await Self.askReload(relay)
                    #expect(asked.status == 0, "push-relay reload: \(asked.output)\(asked.error)")
                    #expect(asked.output.hasPrefix("configuration reloaded: apps "), "\(asked.output)")
                    #expect(count("configuration reloaded") >= reloads, "answered before the reload was done:\n\(log())")
                } else if reloads % 3 == 1 {
                    relay.process.signal(SIGHUP)
                    let done = await eventually { count("configuration reloaded") >= reloads }
                    #expect(done, "reload \(reloads) by SIGHUP did not happen:\n\(log())")
                    // Every field on every line, empty when nothing was added or removed.
                    let line = log().split(separator: "\n").last { $0.contains("configuration reloaded") } ?? ""
                    #expect(line.contains(" added=") && line.contains(" removed=") && line.contains(" restart_needed="), "\(line)")
                } else {
                    let answer = try await relay.request("POST", "/v1/admin/reload", bearer: admin)
                    #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
                }
            }

            let sender = Sender(port: relay.port, secret: s1, signing: g1)
            let flowing = Task {
                while !Task.isCancelled {
                    await sender.send()
                    try? await Task.sleep(for: .milliseconds(40))
                }
            }
            func flow() async throws { try await sender.flow() }
            try await flow()

            // Webhook secret: add the new one, move the sender to it, drop the old one.
            setup.webhookSecrets = [s1, s2]
            try await reload(setup)
            await sender.use(secret: s2)
            try await flow()
            setup.webhookSecrets = [s2]
            try await reload(setup)
            try await flow()

            // Webhook signing secret: accept both, sign with the new one, drop the old one.
            setup.signingSecrets = [g2, g1]
            try await reload(setup)
            await sender.use(signing: g2)
            try await flow()
            setup.signingSecrets = [g2]
            try await reload(setup)
            try await flow()

            // APNs key: another key id and .p8 file.
            setup.apnsKeyFile = newKeyFile
            setup.apnsKeyID = "SANDBOXKY2"
            try await reload(setup)
            try await flow()

            // FCM service account.
            setup.serviceAccountFile = newAccount
            try await reload(setup)
            try await flow()

            // Zendesk API token: the file's content changes, a dead token is then forwarded with it.
            _ = try write("zendesk-token-new-0123456789", "zendesk-token")
            try await reload(setup)
            let dead = apnsToken()
            harness.state.setBehaviour(SandboxBehaviour(status: 410, reason: "Unregistered"), for: dead)
            sender.addDead(dead)
            try await flow()

            // Feedback events signing secret.
            let rotatedEvents = "events-signing-secret-rotated-0123"
            _ = try write(rotatedEvents, "events-secret")
            try await reload(setup)
            let eventsRotatedAt = Date()
            try await flow()

            // API keys: a new key works at once, the revoked old one stops.
            let probe = "/v1/apps/support/tickets/5/notifications"
            let oldKey = try await harness.test.key(app: "support")
            #expect(try await relay.request("GET", probe, bearer: oldKey).status == 200)
            let newKey = try await harness.test.key(app: "support")
            #expect(try await relay.request("GET", probe, bearer: newKey).status == 200)
            #expect(try await APIKeyStore(client: harness.test.client).revoke(try #require(APIKey(presented: oldKey)).prefix))

            // An app added, then removed.
            setup.moreApps = """
                  - id: added
                    webhook_secrets: ["added-secret-0123456789"]
                """
            try await reload(setup)
            let addedHook = Array(webhook(devices: [("android-added", "android")]).utf8)
            let added = try await RawHTTP.send(
                port: relay.port,
                RawHTTP.request(
                    "POST",
                    "/v1/webhooks/zendesk/added/added-secret-0123456789",
                    headers: [("Content-Type", "application/json")],
                    body: addedHook
                )
            )
            #expect(added?.status == 202)
            setup.moreApps = ""
            try await reload(setup)
            let removed = try await RawHTTP.send(
                port: relay.port,
                RawHTTP.request(
                    "POST",
                    "/v1/webhooks/zendesk/added/added-secret-0123456789",
                    headers: [("Content-Type", "application/json")],
                    body: addedHook
                )
            )
            #expect(removed?.status == 404)

            // A bad file is refused whole, with one error line, and the configuration in use serves on.
            let refusedBefore = count("configuration reload refused")
            try (Self.yaml(setup, harness: harness) + "\nhttp:\n  prot: 9999\n").write(toFile: configFile, atomically: true, encoding: .utf8)
            relay.process.signal(SIGHUP)
            #expect(await eventually { count("configuration reload refused") == refusedBefore + 1 })
            let refusedLines = log().split(separator: "\n").filter { $0.contains("configuration reload refused") }
            #expect(refusedLines.last?.contains("http.prot") == true && refusedLines.last?.contains("http.port") == true, "\(refusedLines)")
            // push-relay reload fails with the reason, so `systemctl reload` does.
            let asked = try await Self.askReload(relay)
            #expect(asked.status == 78, "\(asked.output)\(asked.error)")
            #expect(asked.error.contains("configuration reload refused") && asked.error.contains("http.prot"), "\(asked.error)")
            #expect(asked.output.isEmpty)
            let viaAPI = try await relay.request("POST", "/v1/admin/reload", bearer: admin)
            #expect(viaAPI.status == 422)
            #expect(String(decoding: viaAPI.body, as: UTF8.self).contains("configuration_invalid"))
            try await flow()
            flowing.cancel()
            _ = await flowing.value

            // Webhook limits change with a reload; other settings are named as needing a restart.
            setup.extra = "webhooks:\n  max_devices: 1\nhttp:\n  idle_timeout_seconds: 30"
            try Self.yaml(setup, harness: harness).write(toFile: configFile, atomically: true, encoding: .utf8)
            let limited = try await relay.request("POST", "/v1/admin/reload", bearer: admin)
            #expect(limited.status == 200)
            let outcome = try JSONSerialization.jsonObject(with: limited.body) as? [String: Any]
            #expect(outcome?["restart_needed"] as? [String] == ["http.idle_timeout_seconds"], "\(String(decoding: limited.body, as: UTF8.self))")
            let timestamp = String(Int(Date().timeIntervalSince1970))
            let twoDevices = Array(webhook(devices: [(apnsToken(), "ios"), (apnsToken(), "ios")]).utf8)
            let tooMany = try await RawHTTP.send(
                port: relay.port,
                RawHTTP.request(
                    "POST",
                    "/v1/webhooks/zendesk/support/\(s2)",
                    headers: [
                        ("Content-Type", "application/json"), ("X-Zendesk-Webhook-Signature-Timestamp", timestamp),
                        ("X-Zendesk-Webhook-Signature", hmacSignature(secret: g2, timestamp: timestamp, body: twoDevices)),
                    ],
                    body: twoDevices
                )
            )
            #expect(tooMany?.status == 400)

            // Every webhook was accepted, whichever configuration was in use.
            let results = sender.results
            #expect(results.count >= 30)
            #expect(results.filter { $0.status != 202 }.map(\.status) == [], "refused webhooks")
            // Revoked keys are refused (the key cache checks for changes once a second).
            let refused = try await eventually {
                try await relay.request("GET", probe, bearer: oldKey).status == 401
            }
            #expect(refused, "the revoked key is still accepted")
            #expect(try await relay.request("GET", probe, bearer: newKey).status == 200)

            // Every push reached the sandbox exactly once, and nothing is left to send.
            let tokens = results.flatMap(\.tokens)
            let settled = try await eventually {
                try await harness.test.count("SELECT count(*) FROM deliveries WHERE app_id = 'support' AND status IN ('pending', 'sending')") == 0
            }
            #expect(settled)
            #expect(try await harness.test.count("SELECT count(*) FROM deliveries WHERE app_id = 'support'") == tokens.count)
            #expect(
                try await harness.test.count("SELECT count(*) FROM deliveries WHERE app_id = 'support' AND status NOT IN ('delivered', 'dead_token')")
                    == 0
            )
            let repeated = tokens.filter { harness.requests(token: $0).filter { $0.service != "zendesk" }.count != 1 }
            #expect(repeated == [], "tokens not sent exactly once; the relay's log:\n\(log())")

            // Each new credential was the one used after its reload.
            #expect(Self.providerKeyIDs(harness.state).contains("SANDBOXKY2"))
            let assertions = harness.state.presentedCredentials().filter { $0.split(separator: ".").count == 3 }
            #expect(
                assertions.contains { credential in
                    let payload = credential.split(separator: ".")[1]
                    var base64 = payload.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
                    while base64.count % 4 != 0 { base64 += "=" }
                    return Data(base64Encoded: base64).map { String(decoding: $0, as: UTF8.self).contains("rotated@push-relay-sandbox") } ?? false
                }
            )
            let zendeskBasic = Data("admin@example.com/token:zendesk-token-new-0123456789".utf8).base64EncodedString()
            let forwarded = await eventually { harness.state.presentedCredentials().contains(zendeskBasic) }
            #expect(forwarded, "the dead token was not forwarded with the new Zendesk token")
            // The sandbox's receiver keeps the first secret, so it answers the rotated signature 401 and
            // the relay tries again after a backoff (at most a second here): wait for a try that
            // started after the rotation, past a batch that may have been in flight at the reload.
            func signedAfter() -> [SandboxRequest] {
                harness.state.requests(service: "events").filter { $0.receivedAt > eventsRotatedAt.addingTimeInterval(1) }
            }
            let retried = await eventually { !signedAfter().isEmpty }
            #expect(retried, "no events request after the rotation: \(harness.state.requests(service: "events").suffix(3).map(\.receivedAt))")
            for request in signedAfter() {
                let timestamp = request.headers["x-pushrelay-timestamp"] ?? ""
                #expect(
                    request.headers["x-pushrelay-signature"]
                        == hmacSignature(secret: rotatedEvents, timestamp: timestamp, body: Array(request.body.utf8))
                )
            }
        }
    }

    /// `push-relay reload --pid` for `relay`, as the units' ExecReload= runs it.
    static func askReload(_ relay: RelayProcess) async throws -> (status: Int32, output: String, error: String) {
        try await ChildProcess.run(
            try RelayProcess.executable,
            ["reload", "--pid", String(relay.process.processIdentifier)],
            environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"],
            directory: NSTemporaryDirectory()
        )
    }
}
