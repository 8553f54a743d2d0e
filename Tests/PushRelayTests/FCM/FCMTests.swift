import Foundation
import JWTKit
import StrictJSON
import Synchronization
import Testing
import _CryptoExtras

@testable import PushRelay

@Suite("FCM messages, outcomes and OAuth tokens")
struct FCMTests {
    @Test("a reply is data-only with string values, the deep link, high priority and a collapse key")
    func reply() throws {
        let bytes = FCMMessage.reply(token: "fcm-token", title: "Agent replied", body: "Hi ✓", ticketID: "5", unreadCount: 2, notificationID: 42)
        let message = try #require((try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])?["message"] as? [String: Any])
        #expect(message["token"] as? String == "fcm-token")
        #expect(message["notification"] == nil)
        let data = try #require(message["data"] as? [String: String])
        #expect(
            data == [
                "zendesk_sdk_request_id": "5", "title": "Agent replied", "body": "Hi ✓", "unread_count": "2", "push_relay_notification_id": "42",
                "thread_id": "5",
            ]
        )
        let android = try #require(message["android"] as? [String: Any])
        #expect(android["priority"] as? String == "HIGH")
        #expect(android["collapse_key"] as? String == "zendesk-ticket-5")
        #expect(android["ttl"] as? String == "86400s")
        let short = FCMMessage.reply(token: "t", title: "t", body: "b", ticketID: "5", unreadCount: nil, ttl: .seconds(600))
        let shortAndroid = try #require(
            ((try JSONSerialization.jsonObject(with: Data(short)) as? [String: Any])?["message"] as? [String: Any])?["android"] as? [String: Any]
        )
        #expect(shortAndroid["ttl"] as? String == "600s", "delivery.push_ttl_seconds reaches FCM as it reaches APNs")
    }

    @Test("an oversized body is shortened so the data map stays within 4096 bytes")
    func trimming() throws {
        let bytes = FCMMessage.reply(token: "t", title: "t", body: String(repeating: "日本語", count: 2000), ticketID: "5", unreadCount: 1)
        let message = try #require((try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])?["message"] as? [String: Any])
        let data = try #require(message["data"] as? [String: String])
        #expect(data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count } <= 4096)
        #expect(data["body"]?.hasSuffix("…") == true)
    }

    static func body(_ status: String, _ code: String?, message: String = "") -> [UInt8] {
        var error: [String: Any] = ["status": status, "message": message]
        if let code { error["details"] = [["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": code]] }
        return Array(try! JSONSerialization.data(withJSONObject: ["error": error]))
    }

    @Test("FCM answers are classified as PROTOCOLS.md says")
    func classification() {
        #expect(
            PushOutcome.fcm(status: 200, body: Array(#"{"name":"projects/p/messages/1"}"#.utf8), retryAfter: nil)
                == .delivered(providerID: "projects/p/messages/1")
        )
        #expect(PushOutcome.fcm(status: 404, body: Self.body("NOT_FOUND", "UNREGISTERED"), retryAfter: nil) == .deadToken(reason: "UNREGISTERED"))
        #expect(
            PushOutcome.fcm(
                status: 400,
                body: Self.body("INVALID_ARGUMENT", "INVALID_ARGUMENT", message: "The registration token is not a valid FCM registration token"),
                retryAfter: nil
            )
                == .deadToken(reason: "INVALID_ARGUMENT")
        )
        #expect(
            PushOutcome.fcm(status: 400, body: Self.body("INVALID_ARGUMENT", "INVALID_ARGUMENT", message: "bad ttl"), retryAfter: nil)
                == .permanent(reason: "INVALID_ARGUMENT")
        )
        #expect(
            PushOutcome.fcm(status: 403, body: Self.body("PERMISSION_DENIED", "SENDER_ID_MISMATCH"), retryAfter: nil)
                == .deadToken(reason: "SENDER_ID_MISMATCH")
        )
        #expect(
            PushOutcome.fcm(status: 429, body: Self.body("RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), retryAfter: "60")
                == .retry(reason: "QUOTA_EXCEEDED", retryAfter: 60)
        )
        #expect(
            PushOutcome.fcm(status: 503, body: Self.body("UNAVAILABLE", "UNAVAILABLE"), retryAfter: "5")
                == .retry(reason: "UNAVAILABLE", retryAfter: 5)
        )
        #expect(PushOutcome.fcm(status: 500, body: Self.body("INTERNAL", "INTERNAL"), retryAfter: nil) == .retry(reason: "INTERNAL", retryAfter: nil))
        #expect(
            PushOutcome.fcm(status: 401, body: Self.body("UNAUTHENTICATED", nil), retryAfter: nil)
                == .credential(reason: "UNAUTHENTICATED", refreshToken: true)
        )
        #expect(
            PushOutcome.fcm(status: 401, body: Self.body("UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR"), retryAfter: nil)
                == .credential(reason: "THIRD_PARTY_AUTH_ERROR", refreshToken: false)
        )
        #expect(PushOutcome.fcm(status: 502, body: Array("<html>".utf8), retryAfter: nil) == .retry(reason: "HTTP 502", retryAfter: nil))
    }

    @Test("the OAuth assertion is an RS256 JWT for the token URI; the token is cached and refetched when rejected")
    func accessTokens() async throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let account = ServiceAccount(
            projectID: "demo-project",
            clientEmail: "relay@demo-project.iam.gserviceaccount.com",
            privateKey: key.pemRepresentation,
            tokenURI: "https://oauth.example/token"
        )
        let verifier = await JWTKeyCollection().add(rsa: try Insecure.RSA.PublicKey(pem: key.publicKey.pemRepresentation), digestAlgorithm: .sha256)
        let exchanges = Mutex<[String]>([])
        let clock = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        let manager = try await FCMAccessTokenManager(
            account: account,
            exchange: { url, form in
                #expect(url == "https://oauth.example/token")
                let count = exchanges.withLock {
                    $0.append(form)
                    return $0.count
                }
                return (200, Array(#"{"access_token":"token-\#(count)","expires_in":3599,"token_type":"Bearer"}"#.utf8))
            },
            now: { clock.withLock { $0 } }
        )
        #expect(try await manager.token() == "token-1")
        let form = try #require(exchanges.withLock { $0.first })
        #expect(form.hasPrefix("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion="))
        let assertion = String(form.split(separator: "=").last!)
        let claims = try await verifier.verify(assertion, as: FCMAccessTokenManager.Assertion.self)
        #expect(claims.iss.value == account.clientEmail)
        #expect(claims.scope == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(claims.aud.value == ["https://oauth.example/token"])
        #expect(claims.exp.value.timeIntervalSince(claims.iat.value) == 3600)

        clock.withLock { $0 += 3000 }
        #expect(try await manager.token() == "token-1")
        clock.withLock { $0 += 600 }  // within a minute of expiry
        #expect(try await manager.token() == "token-2")
        await manager.rejected("token-1")  // stale: nothing changes
        #expect(try await manager.token() == "token-2")
        await manager.rejected("token-2")
        #expect(try await manager.token() == "token-3")
    }

    @Test("expires_in from the token endpoint is bounded: Int.min does not trap, Int.max does not keep a token for ever")
    func boundedTokenLifetime() async throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let account = ServiceAccount(
            projectID: "demo-project",
            clientEmail: "relay@demo-project.iam.gserviceaccount.com",
            privateKey: key.pemRepresentation,
            tokenURI: "https://oauth.example/token"
        )
        let lifetimes = Mutex<[String]>(["9223372036854775807", "-9223372036854775808", "1e300", "\"3599\"", "3599"])
        let count = Mutex(0)
        let clock = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        let manager = try await FCMAccessTokenManager(
            account: account,
            exchange: { _, _ in
                let lifetime = lifetimes.withLock { $0.isEmpty ? "3599" : $0.removeFirst() }
                let number = count.withLock {
                    $0 += 1
                    return $0
                }
                return (200, Array(#"{"access_token":"token-\#(number)","expires_in":\#(lifetime)}"#.utf8))
            },
            now: { clock.withLock { $0 } }
        )
        #expect(try await manager.token() == "token-1")
        clock.withLock { $0 += 86400 + 1 }  // Int.max counts as a day at most
        #expect(try await manager.token() == "token-2")
        // Int.min counts as 0: the token is used at once and fetched again on the next call.
        #expect(try await manager.token() == "token-3")
        #expect(FCMAccessTokenManager.lifetime(NSNumber(value: Int.min)) == 0)
        #expect(FCMAccessTokenManager.lifetime(NSNumber(value: Int.max)) == 86400)
        #expect(FCMAccessTokenManager.lifetime(NSNumber(value: Double.nan)) == 3599)
        #expect(FCMAccessTokenManager.lifetime(NSNumber(value: -Double.infinity)) == 3599)
        #expect(FCMAccessTokenManager.lifetime("3599") == 3599)
        #expect(FCMAccessTokenManager.lifetime(nil) == 3599)
        #expect(FCMAccessTokenManager.lifetime(NSNumber(value: 3599)) == 3599)
    }

    @Test(
        "a service account whose token_uri is not https stops start-up with a message naming the app and the key",
        arguments: [
            ("http://oauth2.googleapis.com/token", false), ("ftp://oauth2.googleapis.com/token", false), ("https:///token", false),
            ("oauth2.googleapis.com/token", false), ("", false), ("https://oauth2.googleapis.com/token", true),
        ]
    )
    func tokenURIMustBeHTTPS(uri: String, accepted: Bool) throws {
        let path = NSTemporaryDirectory() + "/push-relay-sa-\(UUID().uuidString.prefix(8)).json"
        let json: [String: String] = ["project_id": "p", "client_email": "relay@p.iam.gserviceaccount.com", "private_key": "k", "token_uri": uri]
        try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let settings = FCMSettings(serviceAccountFile: path)
        if accepted {
            try settings.validate(app: "support")
        } else {
            let error = #expect(throws: ConfigurationError.self) { try settings.validate(app: "support") }
            #expect(error?.message.contains("app 'support'") == true)
            #expect(error?.message.contains("token_uri") == true)
            #expect(error?.message.contains("https") == true)
        }
    }
}
