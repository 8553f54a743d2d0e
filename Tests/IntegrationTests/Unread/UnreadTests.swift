import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Postgres
import PushSandbox
import Synchronization
import TestSupport
import Testing

@testable import PushRelay

@Suite("Unread counts, badges, read sync and the live stream", .serialized)
struct UnreadTests {
    static let webhookURL = "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)"
    static let json: HTTPFields = [.contentType: "application/json"]

    /// Registers a device for `user` with an app key.
    static func register(
        _ client: some TestClientProtocol,
        key: String,
        app: String = "support",
        token: String,
        platform: String,
        user: String
    ) async throws {
        let response = try await client.execute(
            uri: "/v1/apps/\(app)/devices/\(token)",
            method: .put,
            headers: bearer(key),
            body: jsonBody(#"{"platform":"\#(platform)","user_id":"\#(user)"}"#)
        )
        #expect(response.status == .created)
    }

    /// Polls `user`'s counts (with `token`, a user JWT) until one is answered from the ETag the
    /// relay keeps, every change announced before the call having arrived; returns that poll's
    /// headers (the token and `If-None-Match`).
    ///
    /// A 304 alone does not show it: one also comes from a read whose ETag matched (nothing is kept
    /// while the hub's listener is not up yet), and an announcement still on its way drops a kept
    /// ETag. So this first waits for a marker: listeners get NOTIFYs in commit order, so once a
    /// webhook committed now has dropped another user's kept ETag (a poll with it reads that user's
    /// new count: 200), every earlier announcement has arrived. Each wait for a kept ETag is for a
    /// 304 that moved a cached-answer counter (`cached` or `cached_routed`).
    static func keptETag(_ client: some TestClientProtocol, key: String, user: String, token: String) async throws -> HTTPFields {
        func pollUntilKept(_ user: String, _ token: String) async throws -> HTTPFields {
            let polled = Mutex(bearer(token))
            let kept = try await eventually {
                let before = try await UnreadPollShortcutTests.cachedAnswers(client)
                let headers = polled.withLock { $0 }
                let poll = try await client.execute(uri: "/v1/apps/support/users/\(user)/unread", method: .get, headers: headers)
                if poll.status == .notModified, try await UnreadPollShortcutTests.cachedAnswers(client) > before { return true }
                polled.withLock { $0[.ifNoneMatch] = poll.headers[.eTag] ?? "" }
                return false
            }
            #expect(kept, "no 304 from the kept ETag of \(user)")
            return polled.withLock { $0 }
        }
        try await register(client, key: key, token: "android-marker-1", platform: "android", user: "marker")
        let markerPoll = try await pollUntilKept("marker", try await TestApp.userToken("marker"))
        let hook = try await client.execute(
            uri: webhookURL,
            method: .post,
            headers: json,
            body: jsonBody(webhook(devices: [("android-marker-1", "android")]))
        )
        #expect(hook.status == .accepted)
        #expect(
            try await eventually {
                try await client.execute(uri: "/v1/apps/support/users/marker/unread", method: .get, headers: markerPoll).status == .ok
            }
        )
        return try await pollUntilKept(user, token)
    }

    static func pushBadge(_ request: SandboxRequest) -> Int? {
        let object = try? JSONSerialization.jsonObject(with: Data(request.body.utf8)) as? [String: Any]
        if request.service == "apns" { return (object?["aps"] as? [String: Any])?["badge"] as? Int }
        let data = (object?["message"] as? [String: Any])?["data"] as? [String: String]
        return data?["unread_count"].flatMap(Int.init)
    }

    @Test("three webhooks on two tickets: total 3, per ticket 2 and 1, pushes carry badges 1, 2, 3; reading one ticket syncs the other devices")
    func countsBadgesAndReadSync() async throws {
        try await DeliveryHarness.with { harness in
            let phone = apnsToken()
            let tablet = apnsToken()
            let android = "android-alice-1"
            try await harness.application().test(.router) { client in
                let key = try await harness.test.key(app: "support")
                try await Self.register(client, key: key, token: phone, platform: "ios", user: "alice")
                try await Self.register(client, key: key, token: tablet, platform: "ios", user: "alice")
                try await Self.register(client, key: key, token: android, platform: "android", user: "alice")

                // Each webhook names the phone only; each push is awaited so its badge is the count at that moment.
                for (index, ticket) in ["7", "7", "8"].enumerated() {
                    let response = try await client.execute(
                        uri: Self.webhookURL,
                        method: .post,
                        headers: Self.json,
                        body: jsonBody(webhook(devices: [(phone, "ios")], ticket: ticket))
                    )
                    #expect(response.status == .accepted)
                    #expect(await eventually { harness.requests(token: phone).count == index + 1 })
                }
                #expect(harness.requests(token: phone).map(Self.pushBadge) == [1, 2, 3])

                let unread = try await client.execute(uri: "/v1/apps/support/users/alice/unread", method: .get, headers: bearer(key))
                #expect(unread.status == .ok)
                let summary = try JSONDecoder().decode(Summary.self, from: Data(buffer: unread.body))
                #expect(summary.total == 3)
                #expect(summary.tickets == [.init(ticket_id: "7", unread: 2), .init(ticket_id: "8", unread: 1)])

                // Read ticket 7 on the phone: total 1, and a silent badge update to the two other devices only.
                let read = try await client.execute(
                    uri: "/v1/apps/support/users/alice/tickets/7/read",
                    method: .post,
                    headers: bearer(key),
                    body: jsonBody(#"{"device":"\#(phone)"}"#)
                )
                #expect(read.status == .ok)
                #expect(read.json?["total"] as? Int == 1)
                #expect(read.json?["synced_devices"] as? Int == 2)
                #expect(await eventually { harness.requests(token: tablet).count == 1 && harness.requests(token: android).count == 1 })
                try await Task.sleep(for: .milliseconds(300))
                #expect(harness.requests(token: phone).count == 3, "the device the ticket was read on gets no update")
            }
            let apns = try #require(harness.requests(token: tablet).first)
            #expect(apns.headers["apns-push-type"] == "background")
            #expect(apns.headers["apns-priority"] == "5")
            #expect(apns.headers["apns-collapse-id"] == nil)
            let payload = try #require(try JSONSerialization.jsonObject(with: Data(apns.body.utf8)) as? [String: Any])
            #expect(payload["aps"] as? [String: Int] == ["content-available": 1, "badge": 1])
            let fcm = try #require(harness.requests(token: android).first)
            let message = try #require((try JSONSerialization.jsonObject(with: Data(fcm.body.utf8)) as? [String: Any])?["message"] as? [String: Any])
            #expect(message["notification"] == nil)
            #expect((message["data"] as? [String: String])?["unread_count"] == "1")
            #expect(try await harness.test.count("SELECT count(*) FROM deliveries WHERE kind = 'badge_sync' AND status = 'delivered'") == 2)
        }
    }

    @Test("a device registered again under another user gets one badge sync with the new user's total, and never the previous user's counts again")
    func userSwitch() async throws {
        try await DeliveryHarness.with { harness in
            let shared = apnsToken()  // the device that changes hands
            let alicePhone = apnsToken()
            let bobTablet = "android-bob-tablet"
            try await harness.application().test(.router) { client in
                let key = try await harness.test.key(app: "support")
                try await Self.register(client, key: key, token: shared, platform: "ios", user: "alice")
                try await Self.register(client, key: key, token: alicePhone, platform: "ios", user: "alice")
                try await Self.register(client, key: key, token: bobTablet, platform: "android", user: "bob")
                for (index, ticket) in ["7", "8"].enumerated() {
                    let response = try await client.execute(
                        uri: Self.webhookURL,
                        method: .post,
                        headers: Self.json,
                        body: jsonBody(webhook(devices: [(shared, "ios")], ticket: ticket))
                    )
                    #expect(response.status == .accepted)
                    #expect(await eventually { harness.requests(token: shared).count == index + 1 })
                }
                _ = try await client.execute(
                    uri: Self.webhookURL,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [(bobTablet, "android")], ticket: "9"))
                )
                #expect(await eventually { harness.requests(token: bobTablet).count == 1 })
                #expect(harness.requests(token: shared).map(Self.pushBadge) == [1, 2])

                // Bob signs in on alice's device: it gets one silent update to bob's total, 1.
                let moved = try await client.execute(
                    uri: "/v1/apps/support/devices/\(shared)",
                    method: .put,
                    headers: bearer(key),
                    body: jsonBody(#"{"platform":"ios","user_id":"bob"}"#)
                )
                #expect(moved.status == .ok)
                #expect(await eventually { harness.requests(token: shared).count == 3 })
                let sync = try #require(harness.requests(token: shared).last)
                #expect(sync.headers["apns-push-type"] == "background")
                #expect(Self.pushBadge(sync) == 1)

                // Registered again under bob: no new sync. Alice reads everything on her phone: her
                // other devices would be synced, and the shared device is no longer one of them.
                let again = try await client.execute(
                    uri: "/v1/apps/support/devices/\(shared)",
                    method: .put,
                    headers: bearer(key),
                    body: jsonBody(#"{"platform":"ios","user_id":"bob"}"#)
                )
                #expect(again.status == .ok)
                let aliceRead = try await client.execute(
                    uri: "/v1/apps/support/users/alice/read-all",
                    method: .post,
                    headers: bearer(key),
                    body: jsonBody(#"{"device":"\#(alicePhone)"}"#)
                )
                #expect(aliceRead.status == .ok, "\(String(buffer: aliceRead.body))")
                #expect(aliceRead.json?["total"] as? Int == 0)
                #expect(aliceRead.json?["synced_devices"] as? Int == 0)

                // Unregistered: bob reading on his tablet syncs no one, and the shared device hears nothing more.
                #expect(
                    try await client.execute(uri: "/v1/apps/support/devices/\(shared)", method: .delete, headers: bearer(key)).status == .noContent
                )
                let bobRead = try await client.execute(
                    uri: "/v1/apps/support/users/bob/read-all",
                    method: .post,
                    headers: bearer(key),
                    body: jsonBody(#"{"device":"\#(bobTablet)"}"#)
                )
                #expect(bobRead.json?["synced_devices"] as? Int == 0)
                try await Task.sleep(for: .milliseconds(500))
                #expect(harness.requests(token: shared).count == 3)
            }
            #expect(try await harness.test.count("SELECT count(*) FROM deliveries WHERE device_token = $1 AND kind = 'badge_sync'", [shared]) == 1)
        }
    }

    @Test("a device that gains its first user, or a new device, is synced only when its owner changes")
    func ownerChangeOnly() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let key = try await test.key(app: "support")
            let token = "android-owner-change"
            // Implicitly registered by a webhook: owned by its token, one unread reply.
            _ = try await client.execute(
                uri: Self.webhookURL,
                method: .post,
                headers: Self.json,
                body: jsonBody(webhook(devices: [(token, "android")]))
            )
            // Registered explicitly, still without a user: same owner, no sync.
            let same = try await client.execute(
                uri: "/v1/apps/support/devices/\(token)",
                method: .put,
                headers: bearer(key),
                body: jsonBody(#"{"platform":"android"}"#)
            )
            #expect(same.status == .ok)
            #expect(try await test.count("SELECT count(*) FROM deliveries WHERE device_token = $1 AND kind = 'badge_sync'", [token]) == 0)
            // Linked to carol: a new owner, one sync.
            let linked = try await client.execute(
                uri: "/v1/apps/support/devices/\(token)",
                method: .put,
                headers: bearer(key),
                body: jsonBody(#"{"platform":"android","user_id":"carol"}"#)
            )
            #expect(linked.status == .ok)
            #expect(try await test.count("SELECT count(*) FROM deliveries WHERE device_token = $1 AND kind = 'badge_sync'", [token]) == 1)
            // A brand-new device: nothing to correct.
            try await Self.register(client, key: key, token: "android-brand-new", platform: "android", user: "carol")
            #expect(try await test.count("SELECT count(*) FROM deliveries WHERE device_token = 'android-brand-new'") == 0)
        }
    }

    @Test(
        "read up to a notification: a reply stored after it stays counted, on one ticket and with read-all; counts from before ids were kept are cleared"
    )
    func readUpTo() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let key = try await test.key(app: "support")
            try await Self.register(client, key: key, token: "android-dave-phone", platform: "android", user: "dave")
            try await Self.register(client, key: key, token: "android-dave-tablet", platform: "android", user: "dave")
            func reply(_ ticket: String) async throws -> Int64 {
                let response = try await client.execute(
                    uri: Self.webhookURL,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [("android-dave-phone", "android")], ticket: ticket))
                )
                #expect(response.status == .accepted)
                return try #require((response.json?["notification_id"] as? NSNumber)?.int64Value)
            }
            func read(_ path: String, _ body: String) async throws -> (total: Int?, synced: Int?) {
                let response = try await client.execute(
                    uri: "/v1/apps/support/users/dave/\(path)",
                    method: .post,
                    headers: bearer(key),
                    body: jsonBody(body)
                )
                #expect(response.status == .ok, "\(String(buffer: response.body))")
                return (response.json?["total"] as? Int, response.json?["synced_devices"] as? Int)
            }
            func syncs() async throws -> Int {
                try await test.count("SELECT count(*) FROM deliveries WHERE device_token = 'android-dave-tablet' AND kind = 'badge_sync'")
            }
            let first = try await reply("7")
            let second = try await reply("7")
            let other = try await reply("8")
            #expect(second > first && other > second)

            // The phone saw the first reply only: the second stays counted; the tablet is synced.
            let partial = try await read("tickets/7/read", #"{"device":"android-dave-phone","up_to_notification_id":\#(first)}"#)
            #expect(partial.total == 2)
            #expect(partial.synced == 1)
            #expect(try await syncs() == 1)
            // A read that arrives later but saw even less clears nothing and syncs no one.
            let stale = try await read("read-all", #"{"device":"android-dave-phone","up_to_notification_id":\#(first)}"#)
            #expect(stale.total == 2)
            #expect(stale.synced == 0)
            #expect(try await syncs() == 1)
            // read-all up to the second reply: ticket 8's newer reply stays.
            let upToSecond = try await read("read-all", #"{"up_to_notification_id":\#(second)}"#)
            #expect(upToSecond.total == 1)
            let unread = try await client.execute(uri: "/v1/apps/support/users/dave/unread", method: .get, headers: bearer(key))
            #expect(try JSONDecoder().decode(Summary.self, from: Data(buffer: unread.body)).tickets == [.init(ticket_id: "8", unread: 1)])
            // Without the field, everything goes, as before.
            #expect(try await read("read-all", "").total == 0)

            // A count from before ids were kept (the migration leaves its ids empty) is older than any id.
            _ = try await reply("9")
            _ = try await test.client.query("UPDATE unread_counters SET notification_ids = '{}', unread = 3 WHERE owner = 'dave' AND ticket_id = '9'")
            let newest = try await reply("9")
            let legacy = try await read("tickets/9/read", #"{"up_to_notification_id":\#(newest - 1)}"#)
            #expect(legacy.total == 1, "the three older ones go, the newest stays")

            // Not a notification id: 400, nothing changes.
            for bad in ["0", "-3", "1.5", "\"12\"", "1e3", "true"] {
                let response = try await client.execute(
                    uri: "/v1/apps/support/users/dave/read-all",
                    method: .post,
                    headers: bearer(key),
                    body: jsonBody(#"{"up_to_notification_id":\#(bad)}"#)
                )
                #expect(response.status == .badRequest, "\(bad)")
                #expect(response.errorBody?.code == "invalid_field")
            }
            #expect(try await test.count("SELECT coalesce(sum(unread), 0)::int FROM unread_counters WHERE owner = 'dave'") == 1)
            #expect(
                try await test.count(
                    "SELECT count(*) FROM unread_counters WHERE unread < 0 OR unread <> cardinality(notification_ids) AND owner = 'dave'"
                ) == 0
            )
        }
    }

    @Test(
        "an unread count keeps its newest ids only, however many replies are unread: counts stay exact, and reads up to a point clear what they saw"
    )
    func boundedReadUpTo() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let key = try await test.key(app: "support")
            try await Self.register(client, key: key, token: "android-erin", platform: "android", user: "erin")
            func reply() async throws -> Int64 {
                let response = try await client.execute(
                    uri: Self.webhookURL,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [("android-erin", "android")], ticket: "5"))
                )
                #expect(response.status == .accepted)
                return try #require((response.json?["notification_id"] as? NSNumber)?.int64Value)
            }
            func read(upTo: Int64) async throws -> Int? {
                let response = try await client.execute(
                    uri: "/v1/apps/support/users/erin/tickets/5/read",
                    method: .post,
                    headers: bearer(key),
                    body: jsonBody(#"{"up_to_notification_id":\#(upTo)}"#)
                )
                #expect(response.status == .ok, "\(String(buffer: response.body))")
                return response.json?["total"] as? Int
            }
            let kept = DeliveryQueue.keptUnreadIDs
            var ids: [Int64] = []
            for _ in 0..<(kept + 8) { ids.append(try await reply()) }
            let row = "SELECT unread, cardinality(notification_ids), coalesce(dropped_up_to, 0) FROM unread_counters WHERE owner = 'erin'"
            let (unread, idCount, droppedUpTo) = try #require(try await test.client.query(row).first).decode((Int, Int, Int64).self)
            #expect(unread == kept + 8)
            #expect(idCount == kept, "the row keeps the newest \(kept) ids, not \(kept + 8)")
            #expect(droppedUpTo == ids[7])
            // A read up to an older reply than the dropped ones: the newer kept ids stay, and so do
            // the dropped ones (some may be newer than what the reader saw).
            #expect(try await read(upTo: ids[2]) == kept + 8)
            // Up to the newest dropped one: all eight dropped go, every kept one stays.
            #expect(try await read(upTo: ids[7]) == kept)
            // Up to a kept one: exact again.
            #expect(try await read(upTo: ids[19]) == kept + 8 - 20)
            #expect(try await test.count("SELECT count(*) FROM unread_counters WHERE owner = 'erin' AND dropped_up_to IS NOT NULL") == 0)
            // Many more replies: the row stays the same size; read-all clears everything.
            for _ in 0..<(2 * kept) { _ = try await reply() }
            let (many, manyIDs, _) = try #require(try await test.client.query(row).first).decode((Int, Int, Int64).self)
            #expect(many == kept + 8 - 20 + 2 * kept)
            #expect(manyIDs == kept)
            #expect(try await read(upTo: Int64.max / 2) == 0)
        }
    }

    @Test("a read up to a notification syncs the other devices to the count it leaves (at the sandbox), and the counts show it")
    func readUpToSync() async throws {
        try await DeliveryHarness.with { harness in
            let phone = "android-erin-phone"
            let tablet = "android-erin-tablet"
            try await harness.application().test(.router) { client in
                let key = try await harness.test.key(app: "support")
                try await Self.register(client, key: key, token: phone, platform: "android", user: "erin")
                try await Self.register(client, key: key, token: tablet, platform: "android", user: "erin")
                var ids: [Int64] = []
                for _ in 0..<3 {
                    let response = try await client.execute(
                        uri: Self.webhookURL,
                        method: .post,
                        headers: Self.json,
                        body: jsonBody(webhook(devices: [(phone, "android")], ticket: "7"))
                    )
                    ids.append(try #require((response.json?["notification_id"] as? NSNumber)?.int64Value))
                }
                #expect(await eventually { harness.requests(token: phone).count == 3 })
                let read = try await client.execute(
                    uri: "/v1/apps/support/users/erin/tickets/7/read",
                    method: .post,
                    headers: bearer(key),
                    body: jsonBody(#"{"device":"\#(phone)","up_to_notification_id":\#(ids[0])}"#)
                )
                #expect(read.json?["total"] as? Int == 2)
                #expect(await eventually { harness.requests(token: tablet).count == 1 })
                #expect(harness.requests(token: tablet).map(Self.pushBadge) == [2])
                let unread = try await client.execute(uri: "/v1/apps/support/users/erin/unread", method: .get, headers: bearer(key))
                #expect(unread.json?["total"] as? Int == 2)
            }
        }
    }

    struct Summary: Decodable, Equatable {
        struct Ticket: Decodable, Equatable {
            var ticket_id: String
            var unread: Int
        }
        var total: Int
        var tickets: [Ticket]
    }

    @Test("polling: the ETag answers 304 while nothing changed and 200 after a webhook; read-all clears everything")
    func pollingWithETag() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let key = try await test.key(app: "support")
            try await Self.register(client, key: key, token: "android-bob-1", platform: "android", user: "bob")
            _ = try await client.execute(
                uri: Self.webhookURL,
                method: .post,
                headers: Self.json,
                body: jsonBody(webhook(devices: [("android-bob-1", "android")]))
            )
            let user = try await TestApp.userToken("bob")
            let first = try await client.execute(uri: "/v1/apps/support/users/bob/unread", method: .get, headers: bearer(user))
            #expect(first.status == .ok)
            let etag = try #require(first.headers[.eTag])
            var conditional = bearer(user)
            conditional[.ifNoneMatch] = etag
            let unchanged = try await client.execute(uri: "/v1/apps/support/users/bob/unread", method: .get, headers: conditional)
            #expect(unchanged.status == .notModified)
            #expect(unchanged.body.readableBytes == 0)

            _ = try await client.execute(
                uri: Self.webhookURL,
                method: .post,
                headers: Self.json,
                body: jsonBody(webhook(devices: [("android-bob-1", "android")], ticket: "6"))
            )
            // The webhook's change is announced (NOTIFY at commit) and reaches the poll within moments.
            var changed = try await client.execute(uri: "/v1/apps/support/users/bob/unread", method: .get, headers: conditional)
            #expect(
                try await eventually {
                    changed = try await client.execute(uri: "/v1/apps/support/users/bob/unread", method: .get, headers: conditional)
                    return changed.status == .ok
                }
            )
            #expect(changed.json?["total"] as? Int == 2)
            #expect(changed.headers[.eTag] != etag)

            let cleared = try await client.execute(uri: "/v1/apps/support/users/bob/read-all", method: .post, headers: bearer(user))
            #expect(cleared.status == .ok)
            #expect(cleared.json?["total"] as? Int == 0)
            let after = try await client.execute(uri: "/v1/apps/support/users/bob/unread", method: .get, headers: bearer(user))
            #expect(after.json?["total"] as? Int == 0)
            #expect((after.json?["tickets"] as? [Any])?.isEmpty == true)

            // Another user's token, and no credential at all.
            let other = try await TestApp.userToken("mallory")
            #expect(try await client.execute(uri: "/v1/apps/support/users/bob/unread", method: .get, headers: bearer(other)).status == .forbidden)
            #expect(try await client.execute(uri: "/v1/apps/support/users/bob/unread", method: .get).status == .unauthorized)
            let readOnly = try await test.key(app: "support", scopes: [.unreadRead])
            #expect(
                try await client.execute(uri: "/v1/apps/support/users/bob/read-all", method: .post, headers: bearer(readOnly)).status == .forbidden
            )
        }
    }

    @Test("a webhook whose owners' ids are multibyte (a NOTIFY list over 8000 bytes in fewer characters) is stored, and polls see the change")
    func multibyteOwnersNotify() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let key = try await test.key(app: "support")
            // 40 users of 250-odd bytes but 65 characters each: about 3,000 characters, 10,400 bytes of owners.
            let users = (0..<40).map { "\($0 + 10)-" + String(repeating: "😀", count: 62) }
            let tokens = users.indices.map { "android-multibyte-\($0)" }
            for (token, user) in zip(tokens, users) {
                try await Self.register(client, key: key, token: token, platform: "android", user: user)
            }
            let user = try await TestApp.userToken(users[0])
            let encoded = try #require(users[0].addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "0123456789-")))
            let path = "/v1/apps/support/users/\(encoded)/unread"
            let first = try await client.execute(uri: path, method: .get, headers: bearer(user))
            #expect(first.status == .ok)
            var conditional = bearer(user)
            conditional[.ifNoneMatch] = try #require(first.headers[.eTag])
            #expect(try await client.execute(uri: path, method: .get, headers: conditional).status == .notModified)

            let response = try await client.execute(
                uri: Self.webhookURL,
                method: .post,
                headers: Self.json,
                body: jsonBody(webhook(devices: tokens.map { ($0, "android") }))
            )
            #expect(response.status == .accepted, "\(String(buffer: response.body))")
            #expect(try await test.count("SELECT count(*) FROM deliveries") == 40)
            // The list did not fit one NOTIFY, so it came in several: the poll sees the reply.
            var changed = try await client.execute(uri: path, method: .get, headers: conditional)
            #expect(
                try await eventually {
                    changed = try await client.execute(uri: path, method: .get, headers: conditional)
                    return changed.status == .ok
                }
            )
            #expect(changed.json?["total"] as? Int == 1)
        }
    }

    @Test("a webhook changing more owners than one NOTIFY holds makes listeners forget those owners' ETags only, not another app's")
    func largeChangeIsScoped() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let supportKey = try await test.key(app: "support")
            let otherKey = try await test.key(app: "other")
            try await Self.register(client, key: otherKey, app: "other", token: "android-bob-1", platform: "android", user: "bob")
            try await Self.register(client, key: supportKey, token: "android-zz-1", platform: "android", user: "zz-last")
            func reads() async throws -> Double {
                let text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                return metricValue(text, "push_relay_unread_polls_total", ["app": "other", "answer": "read"]) ?? 0
            }
            /// Polls until the answer is a 304 from the kept ETag; returns that ETag.
            func cachedETag(_ path: String, key: String) async throws -> String {
                var etag = ""
                #expect(
                    try await eventually {
                        var headers = bearer(key)
                        if !etag.isEmpty { headers[.ifNoneMatch] = etag }
                        let poll = try await client.execute(uri: path, method: .get, headers: headers)
                        if poll.status == .notModified { return true }
                        etag = poll.headers[.eTag] ?? ""
                        return false
                    }
                )
                return etag
            }
            let bobPath = "/v1/apps/other/users/bob/unread"
            let zzPath = "/v1/apps/support/users/zz-last/unread"
            let bobETag = try await cachedETag(bobPath, key: otherKey)
            let zzETag = try await cachedETag(zzPath, key: supportKey)

            // 200 tokens no one registered, each its own owner: about 11,000 bytes of owners, more
            // than one NOTIFY payload. zz-last sorts last, so its line is in the last payload.
            let flood = (0..<200).map { (String(format: "android-flood-%03d-0123456789abcdefghij", $0), "android") }
            let hook = try await client.execute(
                uri: Self.webhookURL,
                method: .post,
                headers: Self.json,
                body: jsonBody(webhook(devices: flood + [("android-zz-1", "android")]))
            )
            #expect(hook.status == .accepted, "\(String(buffer: hook.body))")
            // The announcement reached this instance once zz-last's ETag is gone.
            var zzHeaders = bearer(supportKey)
            zzHeaders[.ifNoneMatch] = zzETag
            #expect(
                try await eventually { try await client.execute(uri: zzPath, method: .get, headers: zzHeaders).status == .ok }
            )

            // Another app's unchanged poll is still answered from the kept ETag, without a read.
            let readsBefore = try await reads()
            var bobHeaders = bearer(otherKey)
            bobHeaders[.ifNoneMatch] = bobETag
            #expect(try await client.execute(uri: bobPath, method: .get, headers: bobHeaders).status == .notModified)
            #expect(try await reads() == readsBefore, "the other app's ETag was dropped: its poll read PostgreSQL")
        }
    }

    @Test("an unchanged poll is a 304 without a query (it is answered while the counters table is locked); a read on this instance is seen at once")
    func pollWithoutQuery() async throws {
        let test = try await TestApp.make()
        try await test.application(extra: ["unread.poll_after_seconds": .init(.int(7), isSecret: false)]).test(.router) { client in
            let key = try await test.key(app: "support")
            try await Self.register(client, key: key, token: "android-fay-1", platform: "android", user: "fay")
            _ = try await client.execute(
                uri: Self.webhookURL,
                method: .post,
                headers: Self.json,
                body: jsonBody(webhook(devices: [("android-fay-1", "android")]))
            )
            let user = try await TestApp.userToken("fay")
            let conditional = try await Self.keptETag(client, key: key, user: "fay", token: user)
            let etag = conditional[.ifNoneMatch] ?? ""
            let cacheControl = try await client.execute(uri: "/v1/apps/support/users/fay/unread", method: .get, headers: conditional).headers[
                .cacheControl
            ]
            #expect(cacheControl == "private, max-age=7")

            // Hold an exclusive lock on unread_counters: a poll that queried would wait for it.
            let pollHeaders = conditional
            let expected = etag
            let answered = Mutex<Int?>(nil)
            let polls = Task {
                var notModified = 0
                for _ in 0..<200 {
                    let poll = try await client.execute(uri: "/v1/apps/support/users/fay/unread", method: .get, headers: pollHeaders)
                    if poll.status == .notModified, poll.headers[.eTag] == expected { notModified += 1 }
                }
                answered.withLock { $0 = notModified }
            }
            let whileLocked = try await test.client.withTransaction { session in
                _ = try await session.query("LOCK TABLE unread_counters IN ACCESS EXCLUSIVE MODE")
                // Waits at most 10 s; a poll that queried would wait for this transaction to end.
                _ = await eventually { answered.withLock { $0 } != nil }
                return answered.withLock { $0 }
            }
            _ = await polls.result
            #expect(whileLocked == 200, "nil: the polls waited for the lock, so they queried")

            // A read on this instance forgets the ETag at once: the next poll reads and sees 0.
            _ = try await client.execute(uri: "/v1/apps/support/users/fay/read-all", method: .post, headers: bearer(user))
            let afterRead = try await client.execute(uri: "/v1/apps/support/users/fay/unread", method: .get, headers: conditional)
            #expect(afterRead.status == .ok)
            #expect(afterRead.json?["total"] as? Int == 0)
        }
    }

    @Test("a user token checked once is still refused once it expires, and a token of another user is still refused")
    func verifiedUserTokensExpire() async throws {
        let test = try await TestApp.make()
        // The relay checks expiry against its clock's date, which the test moves.
        let time = ManualTime()
        try await test.application(clock: RelayClock(time)).test(.router) { client in
            let token = try await TestApp.userToken("gus", expiresIn: 600)
            #expect(try await client.execute(uri: "/v1/apps/support/users/gus/unread", method: .get, headers: bearer(token)).status == .ok)
            #expect(try await client.execute(uri: "/v1/apps/support/users/gus/unread", method: .get, headers: bearer(token)).status == .ok)
            #expect(try await client.execute(uri: "/v1/apps/support/users/hal/unread", method: .get, headers: bearer(token)).status == .forbidden)
            time.advance(by: .seconds(3600))
            #expect(try await client.execute(uri: "/v1/apps/support/users/gus/unread", method: .get, headers: bearer(token)).status == .unauthorized)
        }
    }

    @Test("a user token longer than the most accepted is refused with 401 before it is checked, one within it is accepted")
    func oversizedUserTokens() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let within = try await TestApp.userToken("ivy", padding: 2000)
            #expect(within.utf8.count <= Authenticator.maxUserTokenBytes)
            #expect(try await client.execute(uri: "/v1/apps/support/users/ivy/unread", method: .get, headers: bearer(within)).status == .ok)
            // A valid signature and claims, padded past the bound (45 kB padded many instances' caches).
            let padded = try await TestApp.userToken("ivy", padding: 45_000)
            for _ in 0..<2 {
                let answer = try await client.execute(uri: "/v1/apps/support/users/ivy/unread", method: .get, headers: bearer(padded))
                #expect(answer.status == .unauthorized)
                #expect(
                    answer.errorBody?.message.contains("longer than \(Authenticator.maxUserTokenBytes) bytes") == true,
                    "\(String(buffer: answer.body))"
                )
            }
        }
    }

    @Test("devices without a user are counted under their token")
    func tokenOwner() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let key = try await test.key(app: "support")
            _ = try await client.execute(
                uri: Self.webhookURL,
                method: .post,
                headers: Self.json,
                body: jsonBody(webhook(devices: [("lonely-device", "android")]))
            )
            let unread = try await client.execute(uri: "/v1/apps/support/users/lonely-device/unread", method: .get, headers: bearer(key))
            #expect(unread.json?["total"] as? Int == 1)
        }
    }

    @Test("concurrent webhooks for one user never lose an increment")
    func concurrentIncrements() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let key = try await test.key(app: "support")
            try await Self.register(client, key: key, token: "android-carol-1", platform: "android", user: "carol")
            try await Self.register(client, key: key, token: "android-carol-2", platform: "android", user: "carol")
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for index in 0..<120 {
                    group.addTask {
                        // Both devices of one user: one increment per webhook, not two.
                        let devices = [("android-carol-1", "android"), ("android-carol-2", "android")]
                        return try await client.execute(
                            uri: Self.webhookURL,
                            method: .post,
                            headers: Self.json,
                            body: jsonBody(webhook(devices: devices, ticket: "\(index % 3)"))
                        ).status
                    }
                }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(statuses.allSatisfy { $0 == .accepted })
            let unread = try await client.execute(uri: "/v1/apps/support/users/carol/unread", method: .get, headers: bearer(key))
            #expect(unread.json?["total"] as? Int == 120)
            #expect((unread.json?["tickets"] as? [[String: Any]])?.map { $0["unread"] as? Int } == [40, 40, 40])
        }
    }

    @Test("the live stream sends the count on connect and on every change, and ends when the relay shuts down", .timeLimit(.minutes(1)))
    func liveStream() async throws {
        let test = try await TestApp.make()
        let reader = Mutex<SSEReader?>(nil)
        try await test.application(extra: ["http.port": .init(.int(0), isSecret: false), "unread.heartbeat_seconds": .init(.int(1), isSecret: false)])
            .testLive { client in
                let key = try await test.key(app: "support")
                try await Self.register(client, key: key, token: "android-dave-1", platform: "android", user: "dave")
                let first = try await client.execute(
                    uri: Self.webhookURL,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [("android-dave-1", "android")]))
                )
                let firstID = try #require((first.json?["notification_id"] as? NSNumber)?.int64Value)
                let stream = try SSEReader(port: try #require(client.port), path: "/v1/apps/support/users/dave/unread/stream", bearer: key)
                reader.withLock { $0 = stream }
                #expect(try await stream.nextEvent()?["total"] as? Int == 1)
                _ = try await client.execute(
                    uri: Self.webhookURL,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [("android-dave-1", "android")], ticket: "9"))
                )
                #expect(try await stream.nextEvent()?["total"] as? Int == 2)
                _ = try await client.execute(uri: "/v1/apps/support/users/dave/tickets/9/read", method: .post, headers: bearer(key))
                #expect(try await stream.nextEvent()?["total"] as? Int == 1)
                // A newer reply on ticket 5, then a read of everything up to the first one: the newer stays.
                _ = try await client.execute(
                    uri: Self.webhookURL,
                    method: .post,
                    headers: Self.json,
                    body: jsonBody(webhook(devices: [("android-dave-1", "android")]))
                )
                #expect(try await stream.nextEvent()?["total"] as? Int == 2)
                _ = try await client.execute(
                    uri: "/v1/apps/support/users/dave/read-all",
                    method: .post,
                    headers: bearer(key),
                    body: jsonBody(#"{"up_to_notification_id":\#(firstID)}"#)
                )
                #expect(try await stream.nextEvent()?["total"] as? Int == 1)
                // Heartbeats keep an idle stream alive (every second here).
                #expect(await eventually { stream.heartbeats > 0 })
            }
        // The relay has shut down: the stream ended instead of holding shutdown up.
        let stream = try #require(reader.withLock { $0 })
        #expect(await eventually { stream.ended })
    }
}

/// A minimal Server-Sent Events client on a plain socket, reading on a thread of its own.
final class SSEReader: Sendable {
    private struct State {
        var text = ""
        var events: [[String: Any]] = []
        var heartbeats = 0
        var ended = false
        var status: Int?
        var closed = false
    }

    private let state = Mutex(State())
    private let fd: Int32

    convenience init(port: Int, path: String, bearer: String) throws {
        try self.init(port: port, path: path, header: "Authorization: Bearer \(bearer)")
    }

    /// A stream requested with one more header line (`Cookie: …` for a console session).
    init(port: Int, path: String, header: String) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw ConfigurationError("cannot connect to the relay") }
        let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(header)\r\nAccept: text/event-stream\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), 0) }
        let socketFD = fd
        Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(socketFD, &buffer, buffer.count, 0)
                if count <= 0 { break }
                self.consume(String(decoding: buffer[..<count], as: UTF8.self))
            }
            // Closed under the lock hangUp() takes, so it never shuts down a number reused since.
            self.state.withLock { state in
                state.ended = true
                state.closed = true
                close(socketFD)
            }
        }.start()
    }

    private func consume(_ chunk: String) {
        state.withLock { state in
            // The last chunk of a chunked response: the stream ended, though the connection may stay.
            if (state.text + chunk).hasSuffix("\r\n0\r\n\r\n") || chunk.hasPrefix("0\r\n\r\n") { state.ended = true }
            state.text += chunk
            // Chunked framing puts "\r\n" (one Character in Swift) around the event lines.
            for line in state.text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).dropLast() {
                let line = line.trimmingCharacters(in: .whitespacesAndNewlines)
                if state.status == nil, line.hasPrefix("HTTP/1.1 ") {
                    state.status = Int(line.dropFirst(9).prefix(3))
                } else if line.hasPrefix("data: "),
                    let object = try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [String: Any]
                {
                    state.events.append(object)
                } else if line == ": heartbeat" {
                    state.heartbeats += 1
                }
            }
            if let last = state.text.lastIndex(where: \.isNewline) { state.text = String(state.text[state.text.index(after: last)...]) }
        }
    }

    var heartbeats: Int { state.withLock { $0.heartbeats } }
    /// Whether the response ended (its last chunk arrived) or the connection closed.
    var ended: Bool { state.withLock { $0.ended } }
    /// The response's status, once its head arrived.
    var status: Int? { state.withLock { $0.status } }

    /// Ends the connection from the client's side.
    func hangUp() {
        state.withLock { state in
            if !state.closed { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// The next `unread` event's data; `nil` once the stream has ended without one (a refusal, a
    /// closed connection) or none came before the hang ceiling.
    func nextEvent() async throws -> [String: Any]? {
        var next: [String: Any]?
        _ = await eventually {
            let (event, ended) = state.withLock { state in
                (state.events.isEmpty ? nil : state.events.removeFirst(), state.ended || state.closed)
            }
            next = event
            return event != nil || ended
        }
        return next
    }
}
