import Configuration
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Postgres
import TestSupport
import Testing
import _CryptoExtras

@testable import PushRelay

/// Apps managed through the admin API: sealed in PostgreSQL, announced with NOTIFY, never shown
/// with a secret, and the configuration file's apps kept read-only.
@Suite("Managed apps: sealed storage, admin API, console", .serialized)
struct ManagedAppTests {
    static let webhookSecret = "managed-webhook-secret-0123456789"
    static let userTokenSecret = "managed-user-token-secret-0123456789abcdef"
    static let zendeskToken = "managed-zendesk-api-token-0123456789"
    static let eventsSecret = "managed-events-signing-secret-0123"
    static let apnsKey = P256.Signing.PrivateKey().pemRepresentation
    static let serviceAccountKey = (try? _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation) ?? ""

    /// Every secret of ``configuration(_:)``'s apps; none may reach the table or an answer.
    static var secrets: [String] {
        [webhookSecret, userTokenSecret, zendeskToken, eventsSecret, apnsKey, serviceAccountKey]
            + [apnsKey, serviceAccountKey].map { pem in
                // A line from the middle of each key, so a key stored in another form is found too.
                String(pem.split(separator: "\n")[2])
            }
    }

    /// A managed app with every credential inline, as a PUT body's JSON object.
    static func configuration(_ id: String, webhookSecret: String = webhookSecret) -> [String: Any] {
        [
            "id": id,
            "webhook_secrets": [webhookSecret],
            "user_tokens": ["secret": userTokenSecret],
            "apns": [
                "topic": "com.example.\(id)",
                "token": ["key": apnsKey, "key_id": "ABCDEFGHIJ", "team_id": "KLMNOPQRST"],
            ],
            "fcm": [
                "service_account": [
                    "type": "service_account",
                    "project_id": "project-\(id)",
                    "client_email": "relay@project-\(id).iam.gserviceaccount.com",
                    "private_key": serviceAccountKey,
                    "token_uri": "https://oauth2.googleapis.com/token",
                ]
            ],
            "zendesk": ["url": "https://\(id).zendesk.com", "email": "admin@example.com", "api_token": zendeskToken],
            "events": ["url": "https://hooks.example.com/\(id)", "signing_secret": eventsSecret],
        ]
    }

    static func app(_ id: String, webhookSecret: String = webhookSecret) throws -> AppConfiguration {
        try JSONDecoder().decode(AppConfiguration.self, from: body(configuration(id, webhookSecret: webhookSecret)))
    }

    /// A list of `{"label","fingerprint"}` objects from a JSON answer.
    static func identifiers(_ value: Any?) -> [[String: String]] {
        ((value as? [[String: Any]]) ?? []).map { $0.compactMapValues { $0 as? String } }
    }

    static func body(_ object: [String: Any]) throws -> Data {
        try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    /// A key file as the docs say to make one (`openssl rand -base64 32`), and its key.
    static func keyFile() throws -> (path: String, key: ManagedAppKey) {
        let bytes = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
        let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("apps-store-\(UUID().uuidString).key")
        try (bytes.base64EncodedString() + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return (path, try ManagedAppKey(bytes: bytes))
    }

    static func keyConfig(_ path: String) -> [AbsoluteConfigKey: ConfigValue] {
        ["apps_store.key_file": .init(.string(path), isSecret: false)]
    }

    static func store(_ test: TestApp, key: ManagedAppKey, previous: ManagedAppKey? = nil) -> ManagedAppStore {
        ManagedAppStore(client: test.client, key: key, previousKey: previous, fileAppIDs: { Set(test.apps.map(\.id)) })
    }

    /// Builds the application once, so the schema exists.
    static func migrated(_ test: TestApp) async throws {
        _ = try await test.application()
    }

    // MARK: Store

    @Test("the store seals the whole configuration: the row holds no secret in clear text and reads back the same app")
    func sealedRoundTrip() async throws {
        let test = try await TestApp.make()
        try await Self.migrated(test)
        let (_, key) = try Self.keyFile()
        let store = Self.store(test, key: key)
        let app = try Self.app("acme")
        let (record, created) = try await store.put(app)
        #expect(created)
        #expect(record.version == 1)
        #expect(record.sealedWith == key.id)
        #expect(try await store.list() == [app])
        #expect(try await store.get("acme")?.configuration == app)
        #expect(try await store.get("nobody") == nil)

        // Every byte of the row, as PostgreSQL holds it and as text.
        let row = try #require(try await test.client.query("SELECT sealed, row_to_json(m)::text FROM managed_apps m").first)
        let sealed = try row.decode(Data.self, at: 0)
        let text = try row.decode(String.self, at: 1)
        for secret in Self.secrets {
            #expect(sealed.range(of: Data(secret.utf8)) == nil)
            #expect(!text.contains(secret))
            #expect(!text.contains(Data(secret.utf8).map { String(format: "%02x", $0) }.joined()))
        }
        // Not even the non-secret settings are in clear text.
        #expect(sealed.range(of: Data("com.example.acme".utf8)) == nil)

        let (replaced, again) = try await store.put(try Self.app("acme", webhookSecret: "another-webhook-secret-0123456789"))
        #expect(!again)
        #expect(replaced.version == 2)
        #expect(try await store.list().first?.webhookSecrets == ["another-webhook-secret-0123456789"])
        #expect(try await store.delete("acme"))
        #expect(try await store.delete("acme") == false)
        #expect(try await store.list().isEmpty)
    }

    @Test("a row sealed with another key is an error naming the app; with it as the previous key it opens and is sealed again")
    func wrongKeyAndRotation() async throws {
        let test = try await TestApp.make()
        try await Self.migrated(test)
        let (_, old) = try Self.keyFile()
        let (_, new) = try Self.keyFile()
        let app = try Self.app("acme")
        try await Self.store(test, key: old).put(app)

        // Skipped, with the reason, rather than failing the whole list.
        let wrongKey = try await Self.store(test, key: new).records()
        #expect(wrongKey.records.isEmpty)
        let problem = try #require(wrongKey.unusable.first)
        #expect(problem.id == "acme")
        #expect(problem.problem.contains("managed app 'acme'"))
        #expect(problem.problem.contains(old.id))
        #expect(problem.problem.contains("apps_store.previous_key_file"))
        #expect(try await Self.store(test, key: new).list() == [])

        // A row whose sealed value was moved from another row does not open either; acme still does.
        try await Self.store(test, key: old).put(try Self.app("beta"))
        try await test.client.query("UPDATE managed_apps SET sealed = (SELECT sealed FROM managed_apps WHERE id = 'acme') WHERE id = 'beta'")
        let moved = try await Self.store(test, key: old).records()
        #expect(moved.unusable.map(\.id) == ["beta"])
        #expect(moved.unusable.first?.problem.contains("'beta'") == true)
        #expect(moved.apps == [app])
        try await test.client.query("DELETE FROM managed_apps WHERE id = 'beta'")

        // Rotation: the new key with the old one as previous opens the row and seals it again.
        #expect(try await Self.store(test, key: new, previous: old).list() == [app])
        #expect(try await test.client.query("SELECT key_id, version FROM managed_apps").first?.decode(String.self, at: 0) == new.id)
        #expect(try await test.count("SELECT version FROM managed_apps") == 1)
        #expect(try await Self.store(test, key: new).list() == [app])
    }

    @Test("one managed app that cannot be opened is skipped and reported; the relay starts and serves the others")
    func unusableAppIsSkipped() async throws {
        let test = try await TestApp.make()
        try await Self.migrated(test)
        let (path, key) = try Self.keyFile()
        try await Self.store(test, key: key).put(try Self.app("acme"))
        try await Self.store(test, key: key).put(try Self.app("beta"))
        // beta's row now holds acme's sealed value: it no longer opens as beta.
        try await test.client.query("UPDATE managed_apps SET sealed = (SELECT sealed FROM managed_apps WHERE id = 'acme') WHERE id = 'beta'")
        try await test.application(extra: Self.keyConfig(path)).test(.router) { client in
            let admin = try await test.key(app: nil)
            #expect(try await ManagedAppPickupTests.hook(client, app: "acme") == .accepted)
            #expect(try await ManagedAppPickupTests.hook(client, app: "beta") == .notFound)
            let listed = try await client.execute(uri: "/v1/admin/apps", method: .get, headers: bearer(admin))
            #expect(listed.status == .ok)
            let apps = try #require((listed.json?["apps"] as? [[String: Any]]))
            let beta = try #require(apps.first { $0["id"] as? String == "beta" })
            #expect((beta["problem"] as? String)?.contains("'beta'") == true, "\(beta)")
            #expect(apps.first { $0["id"] as? String == "acme" }?["problem"] == nil)
            // The console's Apps page says it too.
            let (_, browser) = try await ConsoleTests.signIn(client, key: admin)
            let page = try await client.execute(uri: "/console/apps", method: .get, headers: try #require(browser).headers)
            let html = String(buffer: page.body)
            #expect(html.contains("Not served: managed app &#39;beta&#39;") || html.contains("Not served: managed app 'beta'"), "\(html)")
        }
    }

    @Test("every change sends NOTIFY push_relay_apps with the new generation, after its transaction commits")
    func notifies() async throws {
        let test = try await TestApp.make()
        try await Self.migrated(test)
        let (_, key) = try Self.keyFile()
        let store = Self.store(test, key: key)
        let before = try await store.generation()
        let listener = try PostgresListener(conninfo: test.conninfo, channels: [ManagedAppStore.channel], logger: TestDatabase.logger)
        let events = listener.events()
        let payloads = try await withThrowingTaskGroup(of: [String]?.self) { group in
            group.addTask {
                try await listener.run()
                return nil
            }
            group.addTask {
                var payloads: [String] = []
                for await event in events {
                    switch event {
                    case .listening:
                        try await store.put(try Self.app("acme"))
                    case .lost:
                        break
                    case .notification(let notification):
                        #expect(notification.channel == "push_relay_apps")
                        payloads.append(notification.payload)
                        if payloads.count == 1 {
                            // The change is visible by the time it is announced.
                            #expect(try await store.list().map(\.id) == ["acme"])
                            try await store.delete("acme")
                        } else {
                            #expect(try await store.list().isEmpty)
                            return payloads
                        }
                    }
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: hangCeiling)  // only a hang ends here
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
        #expect(payloads == ["\(before + 1)", "\(before + 2)"])
        let after = try await store.generation()
        #expect(after == before + 2)
    }

    // MARK: Admin API

    @Test("admin API: create, replace and delete a managed app; answers show fingerprints, never a secret")
    func adminAPI() async throws {
        let test = try await TestApp.make()
        let (path, key) = try Self.keyFile()
        try await test.application(extra: Self.keyConfig(path)).test(.router) { client in
            let admin = try await test.key(app: nil)
            let url = "/v1/admin/apps/acme"
            var body = Self.configuration("acme")
            body["id"] = nil
            let created = try await client.execute(uri: url, method: .put, headers: bearer(admin), body: ByteBuffer(data: try Self.body(body)))
            #expect(created.status == .created)
            let text = String(buffer: created.body)
            for secret in Self.secrets { #expect(!text.contains(secret)) }
            let json = try #require(created.json)
            #expect(json["source"] as? String == "managed")
            #expect(json["version"] as? Int == 1)
            #expect(json["sealed_with"] as? String == key.id)
            let secrets = Self.identifiers(json["secrets"])
            #expect(secrets.first == ["label": "webhook_secrets[0]", "fingerprint": SecretIdentifier.fingerprint(Self.webhookSecret)])
            #expect(
                Set(secrets.compactMap { $0["label"] }) == [
                    "webhook_secrets[0]", "user_tokens.secret", "apns.token.key", "fcm.service_account.private_key", "zendesk.api_token",
                    "events.signing_secret",
                ]
            )
            let configuration = try #require(json["configuration"] as? [String: Any])
            #expect((configuration["apns"] as? [String: Any])?["topic"] as? String == "com.example.acme")
            #expect(((configuration["fcm"] as? [String: Any])?["service_account"] as? [String: Any])?["project_id"] as? String == "project-acme")

            let replaced = try await client.execute(
                uri: url,
                method: .put,
                headers: bearer(admin),
                body: ByteBuffer(data: try Self.body(Self.configuration("acme", webhookSecret: "another-webhook-secret-0123456789")))
            )
            #expect(replaced.status == .ok)
            #expect(replaced.json?["version"] as? Int == 2)

            let list = try await client.execute(uri: "/v1/admin/apps", method: .get, headers: bearer(admin))
            #expect(list.status == .ok)
            #expect(list.json?["managed_apps_enabled"] as? Bool == true)
            let apps = try #require(list.json?["apps"] as? [[String: Any]])
            #expect(apps.map { "\($0["id"]!):\($0["source"]!)" } == ["acme:managed", "other:file", "support:file"])
            let listed = String(buffer: list.body)
            for secret in Self.secrets + [TestApp.webhookSecret, TestApp.rotatedSecret, TestApp.otherSecret, TestApp.userTokenKey] {
                #expect(!listed.contains(secret))
            }
            let support = try #require(apps.first { $0["id"] as? String == "support" })
            #expect(
                Self.identifiers(support["secrets"]).first
                    == ["label": "webhook_secrets[0]", "fingerprint": SecretIdentifier.fingerprint(TestApp.webhookSecret)]
            )

            let shown = try await client.execute(uri: url, method: .get, headers: bearer(admin))
            #expect(shown.status == .ok)
            #expect(
                Self.identifiers(shown.json?["secrets"]).first?["fingerprint"] == SecretIdentifier.fingerprint("another-webhook-secret-0123456789")
            )
            #expect(
                try await client.execute(uri: "/v1/admin/apps/support", method: .get, headers: bearer(admin)).json?["source"] as? String == "file"
            )
            #expect(try await client.execute(uri: "/v1/admin/apps/nobody", method: .get, headers: bearer(admin)).status == .notFound)

            // An app key may not manage apps.
            let appKey = try await test.key(app: "support")
            #expect(try await client.execute(uri: "/v1/admin/apps", method: .get, headers: bearer(appKey)).status == .forbidden)
            #expect(
                try await client.execute(uri: url, method: .put, headers: bearer(appKey), body: ByteBuffer(data: try Self.body(body))).status
                    == .forbidden
            )

            let deleted = try await client.execute(uri: url, method: .delete, headers: bearer(admin))
            #expect(deleted.status == .noContent)
            #expect(try await client.execute(uri: url, method: .get, headers: bearer(admin)).status == .notFound)
            #expect(try await client.execute(uri: url, method: .delete, headers: bearer(admin)).status == .notFound)
            #expect(try await test.count("SELECT count(*) FROM managed_apps") == 0)
        }
    }

    @Test("the file's apps are read-only, and bad input is a 400 or 422 naming the key that changes nothing")
    func refusals() async throws {
        let test = try await TestApp.make()
        let (path, _) = try Self.keyFile()
        try await test.application(extra: Self.keyConfig(path)).test(.router) { client in
            let admin = try await test.key(app: nil)
            let put = { (uri: String, body: String) in
                try await client.execute(uri: uri, method: .put, headers: bearer(admin), body: ByteBuffer(string: body))
            }
            let valid = String(decoding: try Self.body(Self.configuration("acme")), as: UTF8.self)
            #expect(try await put("/v1/admin/apps/acme", valid).status == .created)

            for uri in ["/v1/admin/apps/support", "/v1/admin/apps/other"] {
                let response = try await put(
                    uri,
                    String(decoding: try Self.body(Self.configuration(String(uri.split(separator: "/").last!))), as: UTF8.self)
                )
                #expect(response.status == .conflict)
                #expect(response.errorBody?.code == "app_read_only")
                #expect(response.errorBody?.message.contains("defined in the configuration file") == true)
            }
            let delete = try await client.execute(uri: "/v1/admin/apps/support", method: .delete, headers: bearer(admin))
            #expect(delete.status == .conflict)
            #expect(delete.errorBody?.code == "app_read_only")

            func without(_ edit: (inout [String: Any]) -> Void) throws -> String {
                var object = Self.configuration("acme")
                edit(&object)
                return String(decoding: try Self.body(object), as: UTF8.self)
            }
            let cases: [(String, String, HTTPResponse.Status, String)] = [
                ("/v1/admin/apps/acme", "{", .badRequest, "not valid JSON"),
                ("/v1/admin/apps/acme", "[]", .badRequest, "must be a JSON object"),
                ("/v1/admin/apps/Not%20An%20Id", valid, .badRequest, "app must be lower-case"),
                ("/v1/admin/apps/acme", try without { $0["id"] = "other-id" }, .badRequest, "id must be the app in the path"),
                ("/v1/admin/apps/acme", try without { $0["webhook_secrets"] = nil }, .unprocessableContent, "webhook_secrets"),
                ("/v1/admin/apps/acme", try without { $0["webhook_secrets"] = ["short"] }, .unprocessableContent, "webhook_secrets[0]"),
                (
                    "/v1/admin/apps/acme", try without { $0["webhook_signing_secert"] = "signing-secret-0123456789" }, .unprocessableContent,
                    "unknown key webhook_signing_secert"
                ),
                (
                    "/v1/admin/apps/acme",
                    try without { $0["user_tokens"] = ["secret": Self.userTokenSecret, "secret_file": "/etc/passwd"] },
                    .unprocessableContent, "user_tokens.secret_file names a file"
                ),
                (
                    "/v1/admin/apps/acme",
                    try without { $0["zendesk"] = ["url": "https://a.zendesk.com", "email": "a@b.c", "api_token_file": "/etc/passwd"] },
                    .unprocessableContent, "zendesk.api_token_file names a file"
                ),
                (
                    "/v1/admin/apps/acme",
                    try without { $0["apns"] = ["topic": "t", "token": ["key": "not a key", "key_id": "ABCDEFGHIJ", "team_id": "KLMNOPQRST"]] },
                    .unprocessableContent, "apns.token.key is not a PKCS#8 P-256 key"
                ),
                ("/v1/admin/apps/acme", try without { $0["apns"] = ["topic": 5] }, .unprocessableContent, "apns.topic"),
            ]
            for (uri, body, status, fragment) in cases {
                let response = try await put(uri, body)
                #expect(response.status == status, "\(fragment): \(response.status)")
                #expect(response.errorBody?.message.contains(fragment) == true, "\(response.errorBody?.message ?? "")")
                #expect(response.errorBody?.message.contains("/etc/passwd") != true)
            }
            // Nothing changed: the first app, at its first version, and nothing else.
            #expect(try await test.count("SELECT count(*) FROM managed_apps") == 1)
            #expect(try await test.count("SELECT version FROM managed_apps WHERE id = 'acme'") == 1)
        }
    }

    @Test("without apps_store.key_file managed apps are off: 503 saying what to set; the file's apps are listed")
    func disabled() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let admin = try await test.key(app: nil)
            let response = try await client.execute(
                uri: "/v1/admin/apps/acme",
                method: .put,
                headers: bearer(admin),
                body: ByteBuffer(data: try Self.body(Self.configuration("acme")))
            )
            #expect(response.status == .serviceUnavailable)
            #expect(response.errorBody?.code == "managed_apps_disabled")
            #expect(response.errorBody?.message.contains("apps_store.key_file") == true)
            #expect(try await client.execute(uri: "/v1/admin/apps/acme", method: .delete, headers: bearer(admin)).status == .serviceUnavailable)
            let list = try await client.execute(uri: "/v1/admin/apps", method: .get, headers: bearer(admin))
            #expect(list.status == .ok)
            #expect(list.json?["managed_apps_enabled"] as? Bool == false)
            #expect((list.json?["apps"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["other", "support"])
        }
    }

    @Test("GET /v1/apps shows each secret as a fingerprint, not its first characters")
    func operatorAppsFingerprints() async throws {
        let test = try await TestApp.make(signing: true)
        try await test.application().test(.router) { client in
            let admin = try await test.key(app: nil)
            let response = try await client.execute(uri: "/v1/apps", method: .get, headers: bearer(admin))
            let text = String(buffer: response.body)
            #expect(!text.contains("supp…"))
            #expect(!text.contains("sign…"))
            let apps = try #require(response.json?["apps"] as? [[String: Any]])
            let support = try #require(apps.first { $0["id"] as? String == "support" })
            #expect(
                Self.identifiers(support["webhook_secrets"]).map { $0["fingerprint"] ?? "" }
                    == [TestApp.webhookSecret, TestApp.rotatedSecret].map(SecretIdentifier.fingerprint)
            )
            #expect(
                (support["webhook_signing_secret"] as? [String: Any])?["fingerprint"] as? String
                    == SecretIdentifier.fingerprint(TestApp.signingSecret)
            )
            #expect(
                Self.identifiers(support["secrets"]).contains([
                    "label": "user_tokens.secret_file", "fingerprint": SecretIdentifier.fingerprint(TestApp.userTokenKey),
                ])
            )
        }
    }

    // MARK: Console

    @Test("console: an admin adds, sees and deletes a managed app on the Apps page; no secret on the page")
    func console() async throws {
        let test = try await TestApp.make()
        let (path, _) = try Self.keyFile()
        try await test.application(extra: Self.keyConfig(path)).test(.router) { client in
            let admin = try #require(try await ConsoleTests.signIn(client, key: try await test.key(app: nil)).1)
            var headers = ConsoleTests.form
            headers[.cookie] = admin.cookie
            let configuration = String(decoding: try Self.body(Self.configuration("acme")), as: UTF8.self)
            let saved = try await client.execute(
                uri: "/console/apps/managed",
                method: .post,
                headers: headers,
                body: ConsoleTests.encoded([("csrf_token", admin.csrf), ("app", "acme"), ("configuration", configuration)])
            )
            #expect(saved.status == .seeOther)
            #expect(saved.headers[.location] == "/console/apps?done=saved")
            let page = ConsoleTests.html(try await client.execute(uri: "/console/apps?done=saved", method: .get, headers: admin.headers))
            #expect(page.contains("data-row-app=\"acme\" data-source=\"managed\""))
            #expect(page.contains("data-row-app=\"support\" data-source=\"file\""))
            #expect(page.contains(SecretIdentifier.fingerprint(Self.webhookSecret)))
            #expect(page.contains(SecretIdentifier.fingerprint(TestApp.webhookSecret)))
            for secret in Self.secrets + [TestApp.webhookSecret] { #expect(!page.contains(secret)) }

            // A refused form keeps what was typed and shows the API's message.
            let refused = try await client.execute(
                uri: "/console/apps/managed",
                method: .post,
                headers: headers,
                body: ConsoleTests.encoded([("csrf_token", admin.csrf), ("app", "support"), ("configuration", "{}")])
            )
            #expect(refused.status == .conflict)
            #expect(ConsoleTests.html(refused).contains("defined in the configuration file"))

            // Without the CSRF token nothing happens.
            let forged = try await client.execute(
                uri: "/console/apps/managed/delete",
                method: .post,
                headers: headers,
                body: ConsoleTests.encoded([("app", "acme")])
            )
            #expect(forged.status == .forbidden)
            let deleted = try await client.execute(
                uri: "/console/apps/managed/delete",
                method: .post,
                headers: headers,
                body: ConsoleTests.encoded([("csrf_token", admin.csrf), ("app", "acme")])
            )
            #expect(deleted.status == .seeOther)
            #expect(try await test.count("SELECT count(*) FROM managed_apps") == 0)
        }
    }
}
