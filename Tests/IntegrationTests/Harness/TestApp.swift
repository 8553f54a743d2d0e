import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import Logging
import NIOCore
import Postgres
import TestSupport

@testable import PushRelay

/// A relay on a database of its own with two apps, `support` (user tokens enabled) and `other`.
struct TestApp {
    static let webhookSecret = "support-secret-0123456789"
    static let rotatedSecret = "support-secret-rotated-9876"
    static let otherSecret = "other-secret-0123456789abc"
    static let signingSecret = "signing-secret-0123456789"
    static let userTokenKey = "user-token-key-0123456789abcdef0123456789"

    let conninfo: String
    let client: PostgresClient
    var apps: [AppConfiguration]

    static func make(signing: Bool = false, conninfo: String? = nil) async throws -> TestApp {
        let keyFile = (NSTemporaryDirectory() as NSString).appendingPathComponent("user-token-\(UUID().uuidString).key")
        try userTokenKey.write(toFile: keyFile, atomically: true, encoding: .utf8)
        let apps = [
            AppConfiguration(
                id: "support",
                webhookSecrets: [webhookSecret, rotatedSecret],
                webhookSigningSecret: signing ? signingSecret : nil,
                userTokens: .init(secretFile: keyFile)
            ),
            AppConfiguration(id: "other", webhookSecrets: [otherSecret]),
        ]
        var database = conninfo
        if database == nil { database = try await TestDatabase.makeDatabase() }
        let conninfo = database!
        return TestApp(
            conninfo: conninfo,
            client: PostgresClient(configuration: .test(conninfo: conninfo, maxConnections: 2), logger: TestDatabase.logger),
            apps: apps
        )
    }

    func application(
        extra: [AbsoluteConfigKey: ConfigValue] = [:],
        logger: Logger = TestDatabase.logger,
        clock: RelayClock = .system
    ) async throws -> some ApplicationProtocol {
        var values: [AbsoluteConfigKey: ConfigValue] = [
            "database.url": .init(.string(conninfo), isSecret: true),
            "database.max_connections": .init(.int(6), isSecret: false),
            // The pool's waits bound a hang only (a test of a timeout sets its own): a loaded
            // machine takes many seconds for a connection or a statement that takes milliseconds idle.
            "database.acquire_timeout_seconds": .init(.int(Int(hangCeiling.components.seconds)), isSecret: false),
            "database.connect_timeout_seconds": .init(.int(Int(hangCeiling.components.seconds)), isSecret: false),
            "database.statement_timeout_ms": .init(.int(Int(hangCeiling.components.seconds) * 1000), isSecret: false),
            // Intake tests look at deliveries as intake left them; delivery tests turn this on.
            "delivery.enabled": .init(.bool(false), isSecret: false),
        ]
        values.merge(extra) { $1 }
        return try await buildApplication(
            reader: ConfigReader(provider: InMemoryProvider(values: values)),
            logger: logger,
            apps: apps,
            reload: nil,
            clock: clock
        )
    }

    /// Creates an API key directly in the database (the schema must exist: build the app first).
    func key(app: String?, scopes: [APIKeyScope] = APIKeyScope.allCases) async throws -> String {
        try await APIKeyStore(client: client).create(appID: app, scopes: scopes, label: "test").key.plaintext
    }

    /// A user JWT for `support`, signed with its configured key.
    /// A user token of `user` signed with `key`; `padding` adds a claim of that many bytes, as an
    /// app's backend may put any claim in a token it signs.
    static func userToken(_ user: String, expiresIn: TimeInterval = 600, key: String = userTokenKey, padding: Int = 0) async throws -> String {
        struct Claims: JWTPayload {
            var sub: SubjectClaim
            var exp: ExpirationClaim
            var pad: String?
            func verify(using algorithm: some JWTAlgorithm) async throws {}
        }
        let keys = await JWTKeyCollection().add(hmac: HMACKey(from: key), digestAlgorithm: .sha256)
        let claims = Claims(
            sub: .init(value: user),
            exp: .init(value: Date().addingTimeInterval(expiresIn)),
            pad: padding > 0 ? String(repeating: "p", count: padding) : nil
        )
        return try await keys.sign(claims)
    }

    func count(_ sql: String, _ parameters: [any PostgresEncodable] = []) async throws -> Int {
        try await client.query(sql, parameters).first!.decode(Int.self, at: 0)
    }
}

struct ErrorEnvelope: Decodable {
    struct Detail: Decodable {
        var code: String
        var message: String
    }
    var error: Detail
}

extension TestResponse {
    var errorBody: ErrorEnvelope.Detail? { try? JSONDecoder().decode(ErrorEnvelope.self, from: Data(buffer: body)).error }
    var json: [String: Any]? { try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any] }
}

func bearer(_ credential: String) -> HTTPFields { [.authorization: "Bearer \(credential)", .contentType: "application/json"] }

func jsonBody(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

let fixtureWebhook = #"""
    {
      "devices": [
        {"identifier": "oiuytrdsdfghjk", "type": "ios"},
        {"identifier": "iuytfrdcvbnmkl", "type": "android"}
      ],
      "notification": {
        "body": "Agent replied something something",
        "title": "Agent replied",
        "ticket_id": "5"
      }
    }
    """#
