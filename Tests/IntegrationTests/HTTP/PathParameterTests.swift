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

@Suite("Hardening: path parameters")
struct PathParameterTests {
    @Test("a user id with spaces, a slash and non-ASCII letters round-trips: register, list, unread, read, read-all")
    func userIDRoundTrip() async throws {
        let test = try await TestApp.make()
        let app = try await test.application()
        let key = try await test.key(app: "support")
        let user = "José Ünal / 42"
        let encoded = "Jos%C3%A9%20%C3%9Cnal%20%2F%2042"
        let token = apnsToken()
        try await app.test(.router) { client in
            let registered = try await client.execute(
                uri: "/v1/apps/support/devices/\(token)",
                method: .put,
                headers: bearer(key),
                body: jsonBody(#"{"platform":"ios","user_id":"\#(user)"}"#)
            )
            #expect(registered.status == .created)
            let list = try await client.execute(uri: "/v1/apps/support/users/\(encoded)/devices", method: .get, headers: bearer(key))
            #expect(list.status == .ok)
            #expect((list.json?["devices"] as? [[String: Any]])?.first?["user_id"] as? String == user)
            let hook = try await client.execute(
                uri: "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)",
                method: .post,
                headers: [.contentType: "application/json"],
                body: jsonBody(webhook(devices: [(token, "ios")], ticket: "T 1/é"))
            )
            #expect(hook.status == .accepted)
            let unread = try await client.execute(uri: "/v1/apps/support/users/\(encoded)/unread", method: .get, headers: bearer(key))
            #expect(unread.status == .ok)
            #expect(unread.json?["total"] as? Int == 1)
            let read = try await client.execute(
                uri: "/v1/apps/support/users/\(encoded)/tickets/T%201%2F%C3%A9/read",
                method: .post,
                headers: bearer(key)
            )
            #expect(read.status == .ok)
            #expect(read.json?["total"] as? Int == 0)
            let readAll = try await client.execute(uri: "/v1/apps/support/users/\(encoded)/read-all", method: .post, headers: bearer(key))
            #expect(readAll.status == .ok)
            // Malformed encodings and control characters are a 400 naming the parameter, the same on every route.
            for path in ["/v1/apps/support/users/a%ZZ/devices", "/v1/apps/support/users/a%00b/unread", "/v1/apps/support/users/%C3%28/devices"] {
                let bad = try await client.execute(uri: path, method: .get, headers: bearer(key))
                #expect(bad.status == .badRequest, "\(path)")
                #expect(bad.errorBody?.message.hasPrefix("user ") == true, "\(path): \(bad.errorBody?.message ?? "")")
            }
        }
    }
}
