import Configuration
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Postgres
import PushRelayKit
import PushSandbox
import TestSupport
import Testing

@testable import PushRelay

/// `apps[].push.content`: what reaches APNs and FCM in each mode, what the relay stores, and the
/// end-to-end encryption PushRelayKit's decryptor reads.
@Suite("Private pushes: full, generic and encrypted content", .serialized)
struct PrivatePushTests {
    static let title = "Lab results QXZ-title"
    static let body = "Your biopsy came back KWV-body benign"
    /// Pieces of the reply's text that must not leave the relay (nor any prefix of them).
    static let secrets = [title, body, String(title.prefix(8)), String(body.prefix(8)), "QXZ-title", "KWV-body"]

    /// The apps-store key file, so device keys are sealed at rest.
    static func storeKey() throws -> [AbsoluteConfigKey: ConfigValue] {
        let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("apps-store-\(UUID().uuidString).key")
        try (SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }.base64EncodedString() + "\n").write(
            toFile: path,
            atomically: true,
            encoding: .utf8
        )
        return ["apps_store.key_file": .init(.string(path), isSecret: false)]
    }

    /// The harness with app `support`'s push settings replaced.
    static func with(_ base: DeliveryHarness, push: PushSettings) -> DeliveryHarness {
        var copy = base
        copy.test.apps[0].push = push
        return copy
    }

    static func register(
        _ client: some TestClientProtocol,
        key: String,
        token: String,
        platform: String,
        pushKey: PushKey? = nil
    ) async throws -> TestResponse {
        var body: [String: Any] = ["platform": platform]
        if let pushKey {
            body["push_key"] = pushKey.base64
            body["push_key_id"] = pushKey.id
        }
        return try await client.execute(
            uri: "/v1/apps/support/devices/\(token)",
            method: .put,
            headers: bearer(key),
            body: ByteBuffer(data: try JSONSerialization.data(withJSONObject: body))
        )
    }

    /// Sends the reply to `devices` and waits until every delivery of it ended.
    static func send(
        _ client: some TestClientProtocol,
        harness: DeliveryHarness,
        devices: [(String, String)],
        ticket: String = "77"
    ) async throws -> Int64 {
        let response = try await client.execute(
            uri: DeliveryTests.url,
            method: .post,
            headers: DeliveryTests.json,
            body: jsonBody(webhook(devices: devices, ticket: ticket, title: title, body: body))
        )
        #expect(response.status == .accepted)
        let id = try #require(response.json?["notification_id"] as? Int)
        let done = try await eventually {
            try await harness.test.count(
                "SELECT count(*) FROM deliveries WHERE notification_id = $1 AND status IN ('pending', 'sending')",
                [Int64(id)]
            ) == 0
        }
        #expect(done, "the deliveries of notification \(id) did not end")
        return Int64(id)
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    /// The APNs payload the sandbox recorded for `token`, newest last.
    static func apns(_ harness: DeliveryHarness, _ token: String) throws -> [[String: Any]] {
        try harness.state.requests(service: "apns").filter { $0.path.hasSuffix(token) }.map { try json($0.body) }
    }

    /// The FCM data map the sandbox recorded for `token`, newest last.
    static func fcm(_ harness: DeliveryHarness, _ token: String) throws -> [[String: String]] {
        try harness.state.requests(service: "fcm").compactMap { request in
            let message = try json(request.body)["message"] as? [String: Any]
            guard message?["token"] as? String == token else { return nil }
            return message?["data"] as? [String: String]
        }
    }

    /// Every request the sandbox recorded, whole: path, headers and body.
    static func everythingSent(_ harness: DeliveryHarness) -> String {
        harness.state.requests().map { "\($0.path)\n\($0.headers)\n\($0.body)" }.joined(separator: "\n")
    }

    /// Every text-like column of every table, searched for `needle` (the reply's text must be
    /// nowhere in the database).
    static func columnsHolding(_ needle: String, test: TestApp) async throws -> [String] {
        let columns = try await test.client.query(
            """
            SELECT table_name, column_name FROM information_schema.columns
            WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'json', 'jsonb', 'bytea', 'ARRAY', 'USER-DEFINED')
            """
        ).rows.map { try $0.decode((String, String).self) }
        #expect(columns.contains { $0 == ("notifications", "title") })
        var found: [String] = []
        for (table, column) in columns {
            let hits = try await test.count(
                "SELECT count(*)::int FROM \"\(table)\" WHERE position($1 in \"\(column)\"::text) > 0",
                [needle]
            )
            if hits > 0 { found.append("\(table).\(column)") }
        }
        return found
    }

    @Test("full: the reply in clear, grouped by ticket (thread-id), with the app's sound and category")
    func full() async throws {
        try await DeliveryHarness.with { base in
            let harness = Self.with(base, push: PushSettings(category: "TICKET_REPLY", sound: "reply.caf"))
            let ios = apnsToken()
            try await harness.application().test(.router) { client in
                _ = try await Self.send(client, harness: harness, devices: [(ios, "ios"), ("fcm-full", "android")])
            }
            let payload = try #require(try Self.apns(harness, ios).last)
            let aps = try #require(payload["aps"] as? [String: Any])
            #expect(aps["alert"] as? [String: String] == ["title": Self.title, "body": Self.body])
            #expect(aps["thread-id"] as? String == "77")
            #expect(aps["category"] as? String == "TICKET_REPLY")
            #expect(aps["sound"] as? String == "reply.caf")
            #expect(aps["mutable-content"] == nil)
            #expect(payload["push_relay_content"] == nil)
            let data = try #require(try Self.fcm(harness, "fcm-full").last)
            #expect(data["title"] == Self.title && data["body"] == Self.body)
            #expect(data["thread_id"] == "77")
            #expect(data["push_relay_content"] == nil)
            #expect(try await harness.test.count("SELECT count(*)::int FROM notifications WHERE title = $1", [Self.title]) == 1)
        }
    }

    @Test("generic: localisation keys and fallback text, no byte of the reply at Apple, Google or in any table; the status API says so")
    func generic() async throws {
        try await DeliveryHarness.with { base in
            var push = PushSettings(content: .generic, threadID: false)
            push.fallbackBody = "Open the app to read it."
            let harness = Self.with(base, push: push)
            let ios = apnsToken()
            try await harness.application().test(.router) { client in
                let key = try await harness.test.key(app: "support")
                let id = try await Self.send(client, harness: harness, devices: [(ios, "ios"), ("fcm-generic", "android")])
                let status = try #require(
                    try await client.execute(uri: "/v1/apps/support/notifications/\(id)", method: .get, headers: bearer(key)).json
                )
                #expect(status["text"] as? String == "not_stored")
                #expect(status["content"] as? String == "generic")
                #expect(status["title"] is NSNull)
            }
            let payload = try #require(try Self.apns(harness, ios).last)
            let aps = try #require(payload["aps"] as? [String: Any])
            #expect(
                aps["alert"] as? [String: String]
                    == [
                        "title-loc-key": "PUSH_RELAY_REPLY_TITLE", "loc-key": "PUSH_RELAY_REPLY_BODY", "title": "New reply",
                        "body": "Open the app to read it.",
                    ]
            )
            #expect(aps["thread-id"] == nil)
            #expect(aps["badge"] as? Int == 1)
            #expect(payload["zendesk_sdk_request_id"] as? String == "77")
            #expect(payload["push_relay_content"] as? String == "generic")
            #expect(payload["push_relay_notification_id"] is Int)
            let data = try #require(try Self.fcm(harness, "fcm-generic").last)
            #expect(
                data
                    == [
                        "zendesk_sdk_request_id": "77", "title": "New reply", "body": "Open the app to read it.", "unread_count": "1",
                        "push_relay_notification_id": data["push_relay_notification_id"] ?? "-", "push_relay_content": "generic",
                    ]
            )
            #expect(Set(payload.keys) == ["aps", "zendesk_sdk_request_id", "push_relay_notification_id", "push_relay_content"])
            #expect(Set(aps.keys) == ["alert", "badge", "sound"])
            let sent = Self.everythingSent(harness)
            for secret in Self.secrets {
                #expect(!sent.contains(secret), "'\(secret)' reached a provider")
                #expect(try await Self.columnsHolding(secret, test: harness.test) == [], "'\(secret)' is stored")
            }
        }
    }

    @Test(
        "encrypted: PushRelayKit's decryptor reads the recorded push; wrong key and tampering fail to the fallback; a rotated key decrypts what follows; the text is erased once sent"
    )
    func encrypted() async throws {
        try await DeliveryHarness.with { base in
            let harness = Self.with(base, push: PushSettings(content: .encrypted))
            let (ios, bare) = (apnsToken(), apnsToken())
            let first = PushKey.generate(id: "k1")
            let keys = InMemoryPushKeyStore(keys: [first])
            try await harness.application(extra: try Self.storeKey()).test(.router) { client in
                let key = try await harness.test.key(app: "support")
                #expect(try await Self.register(client, key: key, token: ios, platform: "ios", pushKey: first).status == .created)
                #expect(try await Self.register(client, key: key, token: "fcm-encrypted", platform: "android", pushKey: first).status == .created)
                #expect(try await Self.register(client, key: key, token: bare, platform: "ios").status == .created)
                // The key is sealed at rest and never returned.
                let device = try await client.execute(uri: "/v1/apps/support/devices/\(ios)", method: .get, headers: bearer(key))
                let shown = String(buffer: device.body)
                #expect(device.json?["push_key_set"] as? Bool == true && device.json?["push_key_id"] as? String == "k1")
                #expect(!shown.contains(first.base64))
                let stored = try #require(
                    try await harness.test.client.query("SELECT push_key FROM devices WHERE token = $1", [ios]).first?.decode(Data.self, at: 0)
                )
                #expect(stored != first.data && stored.count > 32)

                let id = try await Self.send(client, harness: harness, devices: [(ios, "ios"), ("fcm-encrypted", "android"), (bare, "ios")])
                let userInfo = try #require(try Self.apns(harness, ios).last)
                let aps = try #require(userInfo["aps"] as? [String: Any])
                #expect(aps["mutable-content"] as? Int == 1)
                #expect(aps["thread-id"] as? String == "77")
                #expect((aps["alert"] as? [String: String])?["title"] == "New reply")
                #expect(userInfo["push_relay_content"] as? String == "encrypted" && userInfo["push_relay_key_id"] as? String == "k1")
                #expect(PushRelayNotification(userInfo: userInfo)?.content == .encrypted)
                let decryptor = PushRelayNotificationDecryptor(keys: keys)
                #expect(decryptor.decrypt(userInfo: userInfo) == .init(title: Self.title, body: Self.body))
                #expect(Set(aps.keys) == ["alert", "badge", "sound", "thread-id", "mutable-content"])
                #expect(
                    Set(userInfo.keys)
                        == [
                            "aps", "zendesk_sdk_request_id", "push_relay_notification_id", "push_relay_content", "push_relay_key_id",
                            "push_relay_ciphertext",
                        ]
                )
                let data = try #require(try Self.fcm(harness, "fcm-encrypted").last)
                #expect(data["title"] == "New reply" && data["body"] == PushSettings.defaultFallbackBody && data["push_relay_key_id"] == "k1")
                #expect(
                    Set(data.keys)
                        == [
                            "zendesk_sdk_request_id", "title", "body", "unread_count", "push_relay_notification_id", "thread_id",
                            "push_relay_content",
                            "push_relay_key_id", "push_relay_ciphertext",
                        ]
                )
                #expect(decryptor.decrypt(data: data) == .init(title: Self.title, body: Self.body))
                // Another key under the same id, or one flipped byte: nothing, so the extension shows the fallback.
                #expect(PushRelayNotificationDecryptor(keys: InMemoryPushKeyStore(keys: [PushKey.generate(id: "k1")])).decrypt(data: data) == nil)
                var tampered = data
                let ciphertext = try #require(data["push_relay_ciphertext"])
                var bytes = try #require(Data(base64Encoded: ciphertext))
                bytes[bytes.count - 20] ^= 0x01
                tampered["push_relay_ciphertext"] = bytes.base64EncodedString()
                #expect(decryptor.decrypt(data: tampered) == nil)
                // The device without a key got the generic push.
                let plain = try #require(try Self.apns(harness, bare).last)
                #expect(plain["push_relay_content"] as? String == "generic" && plain["push_relay_ciphertext"] == nil)
                for secret in Self.secrets { #expect(!Self.everythingSent(harness).contains(secret), "'\(secret)' reached a provider") }
                // Every delivery ended: the text is erased, the delivery records stay.
                let erased = try await eventually {
                    try await harness.test.count("SELECT count(*)::int FROM notifications WHERE id = $1 AND title IS NULL AND body IS NULL", [id])
                        == 1
                }
                #expect(erased, "the text of notification \(id) was not erased")
                #expect(try await harness.test.count("SELECT count(*)::int FROM deliveries WHERE notification_id = $1", [id]) == 3)
                let status = try #require(
                    try await client.execute(uri: "/v1/apps/support/notifications/\(id)", method: .get, headers: bearer(key)).json
                )
                #expect(status["text"] as? String == "erased")

                // Rotation: a new key and id; the next push is encrypted for it.
                let second = PushKey.generate(id: "k2")
                try keys.save(second)
                #expect(try await Self.register(client, key: key, token: ios, platform: "ios", pushKey: second).status == .ok)
                _ = try await Self.send(client, harness: harness, devices: [(ios, "ios")], ticket: "78")
                let rotated = try #require(try Self.apns(harness, ios).last)
                #expect(rotated["push_relay_key_id"] as? String == "k2")
                #expect(decryptor.decrypt(userInfo: rotated) == .init(title: Self.title, body: Self.body))
                #expect(PushRelayNotificationDecryptor(keys: InMemoryPushKeyStore(keys: [first])).decrypt(userInfo: rotated) == nil)
            }
        }
    }

    @Test("a registration's push_key is checked: 32 bytes of base64 with an id, or a clear 400 that changes nothing")
    func registrationChecks() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let key = try await test.key(app: "support")
            let token = apnsToken()
            let good = Data(repeating: 7, count: 32).base64EncodedString()
            let cases: [([String: Any], String)] = [
                (["push_key": good], "push_key_id"),
                (["push_key_id": "k1"], "push_key_id"),
                (["push_key": Data(repeating: 7, count: 16).base64EncodedString(), "push_key_id": "k1"], "push_key"),
                (["push_key": "not base64!", "push_key_id": "k1"], "push_key"),
                (["push_key": good, "push_key_id": "bad id/"], "push_key_id"),
                (["push_key": good, "push_key_id": String(repeating: "k", count: 65)], "push_key_id"),
            ]
            for (fields, named) in cases {
                var body = fields
                body["platform"] = "ios"
                let response = try await client.execute(
                    uri: "/v1/apps/support/devices/\(token)",
                    method: .put,
                    headers: bearer(key),
                    body: ByteBuffer(data: try JSONSerialization.data(withJSONObject: body))
                )
                #expect(response.status == .badRequest, "\(fields)")
                #expect(response.errorBody?.message.contains(named) == true, "\(String(buffer: response.body))")
                #expect(!String(buffer: response.body).contains(good))
            }
            #expect(try await test.count("SELECT count(*)::int FROM devices") == 0)
            // A registration without a key clears the one registered before.
            _ = try await client.execute(
                uri: "/v1/apps/support/devices/\(token)",
                method: .put,
                headers: bearer(key),
                body: jsonBody(#"{"platform":"ios","push_key":"\#(good)","push_key_id":"k1"}"#)
            )
            #expect(try await test.count("SELECT count(*)::int FROM devices WHERE push_key IS NOT NULL") == 1)
            let cleared = try await client.execute(
                uri: "/v1/apps/support/devices/\(token)",
                method: .put,
                headers: bearer(key),
                body: jsonBody(#"{"platform":"ios"}"#)
            )
            #expect(cleared.json?["push_key_set"] as? Bool == false)
            #expect(try await test.count("SELECT count(*)::int FROM devices WHERE push_key IS NOT NULL OR push_key_id IS NOT NULL") == 0)
        }
    }

    @Test("the admin API switches a managed app's content mode, and the next push follows without a restart")
    func adminSwitch() async throws {
        try await DeliveryHarness.with { harness in
            let credentials = try await DeliveryHarness.credentials()
            let account = try JSONSerialization.jsonObject(
                with: Data(contentsOf: URL(fileURLWithPath: try credentials.writeServiceAccount(sandboxURL: harness.gateway)))
            )
            func configuration(_ content: String) throws -> ByteBuffer {
                let object: [String: Any] = [
                    "webhook_secrets": [ManagedAppTests.webhookSecret],
                    "apns": [
                        "topic": "com.example.acme", "url": harness.gateway,
                        "token": [
                            "key": try String(contentsOfFile: credentials.apnsKeyFile, encoding: .utf8), "key_id": SandboxCredentials.apnsKeyID,
                            "team_id": SandboxCredentials.apnsTeamID,
                        ],
                    ],
                    "fcm": ["service_account": account, "url": harness.gateway],
                    "push": ["content": content],
                ]
                return ByteBuffer(data: try ManagedAppTests.body(object))
            }
            let bodies = try Dictionary(uniqueKeysWithValues: ["full", "generic"].map { ($0, try configuration($0)) })
            try await harness.application(extra: try Self.storeKey()).test(.router) { client in
                let admin = try await harness.test.key(app: nil)
                var version = 0
                for content in ["full", "generic", "full"] {
                    let put = try await client.execute(uri: "/v1/admin/apps/acme", method: .put, headers: bearer(admin), body: bodies[content])
                    #expect(put.status == (version == 0 ? .created : .ok), "\(String(buffer: put.body))")
                    version += 1
                    let served = try await eventually {
                        let apps = try await client.execute(uri: "/v1/apps", method: .get, headers: bearer(admin)).json?["apps"] as? [[String: Any]]
                        let acme = apps?.first { $0["id"] as? String == "acme" }
                        return (acme?["push"] as? [String: Any])?["content"] as? String == content
                    }
                    #expect(served, "the relay never served acme with content \(content)")
                    let token = "fcm-acme-\(version)"
                    let sent = try await client.execute(
                        uri: "/v1/webhooks/zendesk/acme/\(ManagedAppTests.webhookSecret)",
                        method: .post,
                        headers: DeliveryTests.json,
                        body: jsonBody(webhook(devices: [(token, "android")], title: Self.title, body: Self.body))
                    )
                    #expect(sent.status == .accepted)
                    #expect(try await eventually { try !Self.fcm(harness, token).isEmpty }, "no push for \(token)")
                    let data = try #require(try Self.fcm(harness, token).last)
                    #expect(data["body"] == (content == "full" ? Self.body : PushSettings.defaultFallbackBody), "\(content): \(data)")
                    #expect(data["push_relay_content"] == (content == "full" ? nil : content))
                }
            }
        }
    }
    @Test("a reload (SIGHUP) switches the content mode of a `serve` process, and the next push follows")
    func reloadSwitch() async throws {
        try await DeliveryHarness.with { harness in
            let configFile = harness.directory + "/push-relay.yaml"
            func write(_ content: String) throws {
                let app = Self.with(harness, push: PushSettings(content: .init(rawValue: content))).test.apps[0]
                try harness.serveYAML(apps: try harness.appYAML(app)).write(toFile: configFile, atomically: true, encoding: .utf8)
            }
            try write("full")
            let relay = try await RelayProcess.start(
                configFile: configFile,
                port: try EmbeddedPostgres.freePort(),
                log: harness.directory + "/relay.log",
                logLevel: "info"
            )
            defer { relay.stop() }
            func log() -> String { (try? String(contentsOfFile: relay.log, encoding: .utf8)) ?? "" }
            for (round, content) in ["full", "generic", "full"].enumerated() {
                if round > 0 {
                    try write(content)
                    relay.process.signal(SIGHUP)
                    let reloaded = await eventually { log().components(separatedBy: "configuration reloaded").count - 1 >= round }
                    #expect(reloaded, "reload \(round) did not happen:\n\(log())")
                }
                let token = apnsToken()
                let answer = try await relay.request(
                    "POST",
                    DeliveryTests.url,
                    body: webhook(devices: [(token, "ios")], title: Self.title, body: Self.body)
                )
                #expect(answer.status == 202)
                #expect(try await eventually { try !Self.apns(harness, token).isEmpty }, "no push for round \(round)")
                let alert = try #require((try Self.apns(harness, token).last?["aps"] as? [String: Any])?["alert"] as? [String: String])
                #expect(alert["body"] == (content == "full" ? Self.body : PushSettings.defaultFallbackBody), "\(content): \(alert)")
            }
            #expect(!log().contains(Self.body))
        }
    }
    @Test(
        "an encrypted notification's text is erased at intake when no device takes it, and by retention when the erase after the outcome was missed"
    )
    func erasureWithoutOutcome() async throws {
        try await DeliveryHarness.with { base in
            let harness = Self.with(base, push: PushSettings(content: .encrypted))
            let sql = harness.test.client
            let dead = apnsToken()
            try await harness.application(extra: ["retention.enabled": .init(.bool(false), isSecret: false)]).test(.router) { client in
                let key = try await harness.test.key(app: "support")
                #expect(try await Self.register(client, key: key, token: dead, platform: "ios").status == .created)
                _ = try await sql.query("UPDATE devices SET status = 'invalid' WHERE token = $1", [dead])
                let response = try await client.execute(
                    uri: DeliveryTests.url,
                    method: .post,
                    headers: DeliveryTests.json,
                    body: jsonBody(webhook(devices: [(dead, "ios")], title: Self.title, body: Self.body))
                )
                #expect(response.json?["deliveries"] as? Int == 0)
                let id = try #require(response.json?["notification_id"] as? Int)
                #expect(try await harness.test.count("SELECT count(*)::int FROM notifications WHERE id = $1 AND title IS NULL", [Int64(id)]) == 1)
            }
            // Two encrypted notifications that kept their text: one whose delivery ended, one still pending.
            let ended = try await Self.stored(sql, status: "delivered")
            let pending = try await Self.stored(sql, status: "pending")
            let settings = RetentionSettings()
            let report = try #require(
                try await RetentionService(client: sql, settings: settings, metrics: RelayMetrics(), logger: DeliveryHarness.logger).runOnce()
            )
            #expect(report.erasedTexts == 1)
            #expect(
                try await harness.test.count("SELECT count(*)::int FROM notifications WHERE id = $1 AND title IS NULL AND body IS NULL", [ended]) == 1
            )
            #expect(try await harness.test.count("SELECT count(*)::int FROM notifications WHERE id = $1 AND title = $2", [pending, Self.title]) == 1)
        }
    }

    /// An encrypted notification with its text and one delivery in `status`, as an erase that
    /// never ran leaves it.
    static func stored(_ sql: PostgresClient, status: String) async throws -> Int64 {
        let id = try #require(
            try await sql.query(
                "INSERT INTO notifications (app_id, ticket_id, title, body, content) VALUES ('support', '9', $1, $2, 'encrypted') RETURNING id",
                [title, body]
            ).first?.decode(Int64.self, at: 0)
        )
        _ = try await sql.query(
            "INSERT INTO deliveries (notification_id, app_id, device_token, platform, status, next_attempt_at) VALUES ($1, 'support', $2, 'ios', $3, now() + interval '1 day')",
            [id, apnsToken(), status]
        )
        return id
    }
}
