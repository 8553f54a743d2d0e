import CurlHTTP2
import Foundation
import PushSandbox
import TestSupport
import Testing

@Suite("Sandbox FCM, OAuth and Zendesk endpoints over the HTTP/2 client")
struct SandboxEndpointTests {
    static func base64URL(_ object: [String: Any]) -> String {
        (try! JSONSerialization.data(withJSONObject: object)).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func assertion(scope: String = "https://www.googleapis.com/auth/firebase.messaging") -> String {
        let now = Date().timeIntervalSince1970
        return base64URL(["alg": "RS256", "typ": "JWT"]) + "."
            + base64URL(["iss": "relay@demo.iam.gserviceaccount.com", "scope": scope, "aud": "https://oauth/token", "iat": now, "exp": now + 3600])
            + ".c2lnbmF0dXJl"
    }

    static func json(_ response: HTTP2Response) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? [:]
    }

    @Test("an access token from /token opens FCM sends; without one FCM answers UNAUTHENTICATED")
    func fcmWithOAuth() async throws {
        try await SandboxHarness.with { sandbox in
            let client = try HTTP2Client(configuration: .init(caFile: sandbox.caFile, connectTimeout: hangCeiling))
            let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(Self.assertion())"
            let grant = try await client.send(
                HTTP2Request(
                    url: "\(sandbox.base)/token",
                    headers: [("content-type", "application/x-www-form-urlencoded")],
                    body: Array(form.utf8),
                    timeout: hangCeiling
                )
            )
            #expect(grant.status == 200)
            let token = try #require(Self.json(grant)["access_token"] as? String)
            #expect(Self.json(grant)["expires_in"] as? Int == 3599)

            let wrongScope = try await client.send(
                HTTP2Request(
                    url: "\(sandbox.base)/token",
                    body: Array("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(Self.assertion(scope: "email"))".utf8),
                    timeout: hangCeiling
                )
            )
            #expect(wrongScope.status == 400)

            let url = "\(sandbox.base)/v1/projects/demo/messages:send"
            let message = Array(#"{"message":{"token":"fcm-1","data":{"zendesk_sdk_request_id":"5","unread_count":"1"}}}"#.utf8)
            let anonymous = try await client.send(
                HTTP2Request(url: url, headers: [("content-type", "application/json")], body: message, timeout: hangCeiling)
            )
            #expect(anonymous.status == 401)
            #expect(String(decoding: anonymous.body, as: UTF8.self).contains("UNAUTHENTICATED"))

            let auth = [("authorization", "Bearer \(token)"), ("content-type", "application/json")]
            let sent = try await client.send(HTTP2Request(url: url, headers: auth, body: message, timeout: hangCeiling))
            #expect(sent.status == 200)
            #expect((Self.json(sent)["name"] as? String)?.hasPrefix("projects/demo/messages/") == true)

            let numeric = Array(#"{"message":{"token":"fcm-1","data":{"unread_count":1}}}"#.utf8)
            #expect(try await client.send(HTTP2Request(url: url, headers: auth, body: numeric, timeout: hangCeiling)).status == 400)

            sandbox.state.setBehaviour(SandboxBehaviour(status: 404, reason: "UNREGISTERED", times: 1), for: "fcm-1")
            let dead = try await client.send(HTTP2Request(url: url, headers: auth, body: message, timeout: hangCeiling))
            #expect(dead.status == 404)
            let details = ((Self.json(dead)["error"] as? [String: Any])?["details"] as? [[String: Any]])?.first
            #expect(details?["errorCode"] as? String == "UNREGISTERED")

            let recorded = sandbox.state.requests(service: "fcm")
            #expect(recorded.count == 4)
            #expect(recorded.allSatisfy { $0.headers["authorization"] == nil })
            await client.shutdown()
        }
    }

    @Test("Zendesk destroy_many needs Basic auth, records the tokens and can be told to answer 429")
    func zendesk() async throws {
        try await SandboxHarness.with { sandbox in
            let client = try HTTP2Client(configuration: .init(caFile: sandbox.caFile, connectTimeout: hangCeiling))
            let url = "\(sandbox.base)/api/v2/push_notification_devices/destroy_many"
            let body = Array(#"{"push_notification_devices":["t1","t2"]}"#.utf8)
            let basic = "Basic " + Data("admin@example.com/token:secret".utf8).base64EncodedString()
            #expect(
                try await client.send(HTTP2Request(url: url, headers: [("content-type", "application/json")], body: body, timeout: hangCeiling))
                    .status == 401
            )
            #expect(
                try await client.send(HTTP2Request(url: url, headers: [("authorization", basic)], body: body, timeout: hangCeiling)).status == 200
            )
            sandbox.state.setBehaviour(SandboxBehaviour(status: 429, reason: "Too Many Requests", retryAfter: 2, times: 1), for: "zendesk")
            let limited = try await client.send(HTTP2Request(url: url, headers: [("authorization", basic)], body: body, timeout: hangCeiling))
            #expect(limited.status == 429)
            #expect(limited.header("retry-after") == "2")
            let accepted = sandbox.state.requests(service: "zendesk").filter { $0.status == 200 }
            #expect(accepted.count == 1)
            #expect(accepted.first?.body == #"{"push_notification_devices":["t1","t2"]}"#)
            await client.shutdown()
        }
    }
}
