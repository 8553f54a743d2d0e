import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import TestSupport
import Testing

@testable import PushRelay

@Suite("Device registry API")
struct DeviceAPITests {
    static let iosToken = String(repeating: "0a1B", count: 16)  // 64 hex characters, mixed case
    static let androidToken = "fcm:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx_example-token"

    static func path(_ token: String, app: String = "support") -> String { "/v1/apps/\(app)/devices/\(token)" }

    @Test("app keys upsert (201 then 200), read, list and delete (204, idempotent) devices")
    func appKeyLifecycle() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let key = try await test.key(app: "support")
            let created = try await client.execute(
                uri: Self.path(Self.iosToken),
                method: .put,
                headers: bearer(key),
                body: jsonBody(#"{"platform":"ios","user_id":"u-1","environment":"sandbox","locale":"fr-CA"}"#)
            )
            #expect(created.status == .created)
            #expect(created.json?["token"] as? String == Self.iosToken.lowercased())
            #expect(created.json?["status"] as? String == "active")

            let updated = try await client.execute(
                uri: Self.path(Self.iosToken),
                method: .put,
                headers: bearer(key),
                body: jsonBody(#"{"platform":"ios","user_id":"u-1","environment":"production"}"#)
            )
            #expect(updated.status == .ok)
            #expect(updated.json?["environment"] as? String == "production")
            #expect(updated.json?["locale"] is NSNull)

            let fetched = try await client.execute(uri: Self.path(Self.iosToken.lowercased()), method: .get, headers: bearer(key))
            #expect(fetched.status == .ok)
            #expect(fetched.json?["user_id"] as? String == "u-1")

            _ = try await client.execute(
                uri: Self.path(Self.androidToken),
                method: .put,
                headers: bearer(key),
                body: jsonBody(#"{"platform":"android","user_id":"u-1"}"#)
            )
            let listed = try await client.execute(uri: "/v1/apps/support/users/u-1/devices", method: .get, headers: bearer(key))
            #expect(listed.status == .ok)
            let devices = try #require(listed.json?["devices"] as? [[String: Any]])
            #expect(Set(devices.compactMap { $0["token"] as? String }) == [Self.iosToken.lowercased(), Self.androidToken])

            let deleted = try await client.execute(uri: Self.path(Self.iosToken), method: .delete, headers: bearer(key))
            #expect(deleted.status == .noContent)
            let again = try await client.execute(uri: Self.path(Self.iosToken), method: .delete, headers: bearer(key))
            #expect(again.status == .noContent)
            let gone = try await client.execute(uri: Self.path(Self.iosToken), method: .get, headers: bearer(key))
            #expect(gone.status == .notFound)
            #expect(gone.errorBody?.code == "device_not_found")
            #expect(try await test.count("SELECT count(*) FROM devices") == 1)
        }
    }

    @Test("re-registering an invalidated token revives it")
    func revive() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let key = try await test.key(app: "support")
            try await test.client.query(
                "INSERT INTO devices (app_id, token, platform, status, invalid_reason, invalidated_at) VALUES ('support', $1, 'android', 'invalid', 'UNREGISTERED', now())",
                [Self.androidToken]
            )
            let response = try await client.execute(
                uri: Self.path(Self.androidToken),
                method: .put,
                headers: bearer(key),
                body: jsonBody(#"{"platform":"android"}"#)
            )
            #expect(response.status == .ok)
            #expect(response.json?["status"] as? String == "active")
            #expect(response.json?["invalid_reason"] is NSNull)
        }
    }

    static let badBodies: [(body: String, fragment: String)] = [
        (#"{"platform":"windows"}"#, "platform must be"),
        (#"{}"#, "platform is required"),
        (#"{"platform":"ios","environment":"staging"}"#, "environment must be"),
        (#"{"platform":"ios","user_id":7}"#, "user_id must be a string"),
        (#"{"platform":"ios","user_id":""}"#, "user_id must be 1-256"),
        ("not json", "not valid JSON"),
    ]

    @Test("bad bodies and bad tokens get 400 naming the field and change nothing")
    func validation() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let key = try await test.key(app: "support")
            for (body, fragment) in Self.badBodies {
                let response = try await client.execute(uri: Self.path(Self.iosToken), method: .put, headers: bearer(key), body: jsonBody(body))
                #expect(response.status == .badRequest, "\(body)")
                #expect(response.errorBody?.message.contains(fragment) == true, "\(response.errorBody?.message ?? "")")
            }
            for token in ["abc", String(repeating: "g", count: 64), String(repeating: "a", count: 63), String(repeating: "ab", count: 101)] {
                let response = try await client.execute(
                    uri: Self.path(token),
                    method: .put,
                    headers: bearer(key),
                    body: jsonBody(#"{"platform":"ios"}"#)
                )
                #expect(response.status == .badRequest, "\(token)")
                #expect(response.errorBody?.message.contains("token") == true)
            }
            let longAndroid = String(repeating: "x", count: 4097)
            let tooLong = try await client.execute(
                uri: Self.path(longAndroid),
                method: .put,
                headers: bearer(key),
                body: jsonBody(#"{"platform":"android"}"#)
            )
            #expect(tooLong.status == .badRequest)
            #expect(try await test.count("SELECT count(*) FROM devices") == 0)
        }
    }

    @Test("401 without or with bad credentials; 403 for another app's key, a missing scope or a user token on another user")
    func authentication() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let put = jsonBody(#"{"platform":"android","user_id":"alice"}"#)
            let none = try await client.execute(
                uri: Self.path(Self.androidToken),
                method: .put,
                headers: [.contentType: "application/json"],
                body: put
            )
            #expect(none.status == .unauthorized)
            #expect(none.headers[.wwwAuthenticate] == "Bearer")
            let bogus = try await client.execute(uri: Self.path(Self.androidToken), method: .put, headers: bearer("prk_0123456789ab_nope"), body: put)
            #expect(bogus.status == .unauthorized)
            #expect(bogus.errorBody?.message.contains("nope") == false)

            let otherKey = try await test.key(app: "other")
            let wrongApp = try await client.execute(uri: Self.path(Self.androidToken), method: .put, headers: bearer(otherKey), body: put)
            #expect(wrongApp.status == .forbidden)

            let readOnly = try await test.key(app: "support", scopes: [.devicesRead])
            let noScope = try await client.execute(uri: Self.path(Self.androidToken), method: .put, headers: bearer(readOnly), body: put)
            #expect(noScope.status == .forbidden)
            #expect(noScope.errorBody?.message.contains("devices:write") == true)

            let revoked = try await test.key(app: "support")
            let prefix = String(revoked.split(separator: "_")[1])
            #expect(try await APIKeyStore(client: test.client).revoke(prefix))
            let afterRevoke = try await client.execute(uri: Self.path(Self.androidToken), method: .put, headers: bearer(revoked), body: put)
            #expect(afterRevoke.status == .unauthorized)

            let bob = try await TestApp.userToken("bob")
            let asBob = try await client.execute(uri: Self.path(Self.androidToken), method: .put, headers: bearer(bob), body: put)
            #expect(asBob.status == .forbidden)

            let expired = try await TestApp.userToken("alice", expiresIn: -120)
            let late = try await client.execute(uri: Self.path(Self.androidToken), method: .put, headers: bearer(expired), body: put)
            #expect(late.status == .unauthorized)

            // A subject that could not be stored as a user id (NUL, a newline) is not a user.
            for subject in ["al\u{0}ice", "al\nice"] {
                let odd = try await TestApp.userToken(subject)
                let refused = try await client.execute(uri: Self.path(Self.androidToken), method: .put, headers: bearer(odd), body: put)
                #expect(refused.status == .unauthorized)
                #expect(refused.errorBody?.message.contains("sub") == true)
            }

            let forged = try await TestApp.userToken("alice", key: "another-key-0123456789abcdef0123456789")
            let forgery = try await client.execute(uri: Self.path(Self.androidToken), method: .put, headers: bearer(forged), body: put)
            #expect(forgery.status == .unauthorized)

            // The other app has no user tokens configured.
            let alice = try await TestApp.userToken("alice")
            let elsewhere = try await client.execute(
                uri: Self.path(Self.androidToken, app: "other"),
                method: .put,
                headers: bearer(alice),
                body: put
            )
            #expect(elsewhere.status == .unauthorized)
            #expect(try await test.count("SELECT count(*) FROM devices") == 0)

            let admin = try await test.key(app: nil)
            let asAdmin = try await client.execute(uri: Self.path(Self.androidToken, app: "other"), method: .put, headers: bearer(admin), body: put)
            #expect(asAdmin.status == .created)
        }
    }

    @Test("a user JWT registers, reads, lists and deletes only its own user's devices")
    func userTokens() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let alice = try await TestApp.userToken("alice")
            let bob = try await TestApp.userToken("bob")

            // user_id defaults to the token's subject.
            let created = try await client.execute(
                uri: Self.path(Self.iosToken),
                method: .put,
                headers: bearer(alice),
                body: jsonBody(#"{"platform":"ios"}"#)
            )
            #expect(created.status == .created)
            #expect(created.json?["user_id"] as? String == "alice")

            let mine = try await client.execute(uri: "/v1/apps/support/users/alice/devices", method: .get, headers: bearer(alice))
            #expect((mine.json?["devices"] as? [Any])?.count == 1)
            let theirs = try await client.execute(uri: "/v1/apps/support/users/alice/devices", method: .get, headers: bearer(bob))
            #expect(theirs.status == .forbidden)

            #expect(try await client.execute(uri: Self.path(Self.iosToken), method: .get, headers: bearer(alice)).status == .ok)
            #expect(try await client.execute(uri: Self.path(Self.iosToken), method: .get, headers: bearer(bob)).status == .notFound)

            // Bob can neither take over nor delete Alice's device.
            let takeover = try await client.execute(
                uri: Self.path(Self.iosToken),
                method: .put,
                headers: bearer(bob),
                body: jsonBody(#"{"platform":"ios"}"#)
            )
            #expect(takeover.status == .forbidden)
            let removal = try await client.execute(uri: Self.path(Self.iosToken), method: .delete, headers: bearer(bob))
            #expect(removal.status == .forbidden)
            #expect(try await test.count("SELECT count(*) FROM devices WHERE user_id = 'alice'") == 1)

            #expect(try await client.execute(uri: Self.path(Self.iosToken), method: .delete, headers: bearer(alice)).status == .noContent)
            #expect(try await test.count("SELECT count(*) FROM devices") == 0)
        }
    }

    @Test("a user token can neither take over nor unregister a device registered to no user, unless the app sets user_tokens.claim_unowned_devices")
    func unownedDevices() async throws {
        for claim in [false, true] {
            var made = try await TestApp.make()
            made.apps[0].userTokens?.claimUnownedDevices = claim
            let test = made
            try await test.application().test(.router) { client in
                let key = try await test.key(app: "support")
                let alice = try await TestApp.userToken("alice")
                // Registered by the app's backend without a user, and implicitly by a webhook.
                let byKey = try await client.execute(
                    uri: Self.path(Self.iosToken),
                    method: .put,
                    headers: bearer(key),
                    body: jsonBody(#"{"platform":"ios"}"#)
                )
                #expect(byKey.status == .created)
                let hook = try await client.execute(
                    uri: "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)",
                    method: .post,
                    headers: [.contentType: "application/json"],
                    body: jsonBody(webhook(devices: [(Self.androidToken, "android")]))
                )
                #expect(hook.status == .accepted)
                for token in [Self.iosToken, Self.androidToken] where !claim {
                    let removal = try await client.execute(uri: Self.path(token), method: .delete, headers: bearer(alice))
                    #expect(removal.status == .forbidden, "\(String(buffer: removal.body))")
                    #expect(removal.errorBody?.message.contains("claim_unowned_devices") == true)
                }
                #expect(try await test.count("SELECT count(*) FROM devices WHERE user_id IS NULL") == 2)
                for (token, platform) in [(Self.iosToken, "ios"), (Self.androidToken, "android")] {
                    let claimed = try await client.execute(
                        uri: Self.path(token),
                        method: .put,
                        headers: bearer(alice),
                        body: jsonBody(#"{"platform":"\#(platform)"}"#)
                    )
                    if claim {
                        #expect(claimed.status == .ok, "\(String(buffer: claimed.body))")
                        #expect(claimed.json?["user_id"] as? String == "alice")
                    } else {
                        #expect(claimed.status == .forbidden, "\(String(buffer: claimed.body))")
                        #expect(claimed.errorBody?.message.contains("claim_unowned_devices") == true)
                    }
                }
                #expect(try await test.count("SELECT count(*) FROM devices WHERE user_id = 'alice'") == (claim ? 2 : 0))
                // A device new to the registry is the user's to register either way.
                let fresh = try await client.execute(
                    uri: Self.path("android-fresh-device"),
                    method: .put,
                    headers: bearer(alice),
                    body: jsonBody(#"{"platform":"android"}"#)
                )
                #expect(fresh.status == .created)
                // Where the app lets a user token claim such a device, it may unregister one too.
                if claim {
                    let orphan = String(repeating: "c", count: 64)
                    let put = try await client.execute(
                        uri: Self.path(orphan),
                        method: .put,
                        headers: bearer(key),
                        body: jsonBody(#"{"platform":"ios"}"#)
                    )
                    #expect(put.status == .created)
                    #expect(try await client.execute(uri: Self.path(orphan), method: .delete, headers: bearer(alice)).status == .noContent)
                    #expect(try await test.count("SELECT count(*) FROM devices WHERE token = '\(orphan)'") == 0)
                }
            }
        }
    }

    @Test("one user has at most devices.max_per_user active devices: one more is 409 and stores nothing, also when registered at once")
    func perUserCap() async throws {
        let test = try await TestApp.make()
        let app = try await test.application(extra: ["devices.max_per_user": .init(.int(3), isSecret: false)])
        try await app.test(.router) { client in
            let key = try await test.key(app: "support")
            func register(_ token: String, user: String) async throws -> TestResponse {
                try await client.execute(
                    uri: Self.path(token),
                    method: .put,
                    headers: bearer(key),
                    body: jsonBody(#"{"platform":"android","user_id":"\#(user)"}"#)
                )
            }
            // Ten at once for one user: exactly three are stored.
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for index in 0..<10 { group.addTask { try await register("android-cap-\(index)", user: "carol").status } }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .created }.count == 3, "\(statuses)")
            #expect(statuses.filter { $0 == .conflict }.count == 7, "\(statuses)")
            #expect(try await test.count("SELECT count(*) FROM devices WHERE user_id = 'carol'") == 3)
            let refused = try await register("android-cap-extra", user: "carol")
            #expect(refused.status == .conflict)
            #expect(refused.errorBody?.code == "too_many_user_devices")
            #expect(try await test.count("SELECT count(*) FROM devices WHERE token = 'android-cap-extra'") == 0)
            // A device already the user's may be registered again; another user is not affected.
            let kept = try #require(
                try await test.client.query("SELECT token FROM devices WHERE user_id = 'carol' LIMIT 1").first?.decode(String.self, at: 0)
            )
            #expect(try await register(kept, user: "carol").status == .ok)
            #expect(try await register("android-cap-dave", user: "dave").status == .created)
            // A device marked invalid (a dead token) no longer counts.
            try await test.client.query("UPDATE devices SET status = 'invalid' WHERE token = $1", [kept])
            #expect(try await register("android-cap-extra", user: "carol").status == .created)
        }
    }

    @Test("an unknown app is a 404 JSON error")
    func unknownApp() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let key = try await test.key(app: nil)
            let response = try await client.execute(uri: Self.path(Self.androidToken, app: "nosuchapp"), method: .get, headers: bearer(key))
            #expect(response.status == .notFound)
            #expect(response.errorBody?.code == "app_not_found")
        }
    }
}
