import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Postgres
import PushSandbox
import TestSupport
import Testing

@testable import PushRelay

@Suite("Delivery visibility: the status API, feedback events and retention", .serialized)
struct DeliveryVisibilityTests {
    static let url = "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)"
    static let json: HTTPFields = [.contentType: "application/json"]

    static func object(_ response: TestResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(String(buffer: response.body).utf8)) as? [String: Any])
    }

    static func accept(_ client: some TestClientProtocol, _ body: String) async throws -> Int64 {
        let response = try await client.execute(uri: url, method: .post, headers: json, body: jsonBody(body))
        #expect(response.status == .accepted)
        return try #require((try object(response)["notification_id"] as? NSNumber)?.int64Value)
    }

    @Test("a notification's status shows each delivery: delivered with its apns-id, dead_token with the provider's reason; tokens shortened")
    func notificationStatus() async throws {
        try await DeliveryHarness.with { harness in
            let dead = apnsToken()
            let alive = apnsToken()
            let android = "android-\(UUID().uuidString)"
            harness.state.setBehaviour(SandboxBehaviour(status: 410, reason: "Unregistered"), for: dead)
            try await harness.application().test(.router) { client in
                let reader = try await harness.test.key(app: "support", scopes: [.notificationsRead])
                let id = try await Self.accept(client, webhook(devices: [(dead, "ios"), (alive, "ios"), (android, "android")], ticket: "4711"))
                #expect(
                    try await eventually {
                        try await harness.test.count("SELECT count(*) FROM deliveries WHERE status IN ('delivered', 'dead_token')") == 3
                    }
                )
                let response = try await client.execute(uri: "/v1/apps/support/notifications/\(id)", method: .get, headers: bearer(reader))
                #expect(response.status == .ok)
                let body = try Self.object(response)
                #expect((body["id"] as? NSNumber)?.int64Value == id)
                #expect(body["ticket_id"] as? String == "4711")
                #expect(body["title"] as? String == "Agent replied")
                let counts = try #require(body["counts"] as? [String: Int])
                #expect(counts["delivered"] == 2 && counts["dead_token"] == 1 && counts["pending"] == 0 && counts["failed"] == 0)
                let deliveries = try #require(body["deliveries"] as? [[String: Any]])
                #expect(deliveries.count == 3)
                let byToken = Dictionary(uniqueKeysWithValues: deliveries.map { ($0["token"] as? String ?? "", $0) })
                let deadRow = try #require(byToken["\(dead.prefix(6))…\(dead.suffix(4))"])
                #expect(deadRow["status"] as? String == "dead_token")
                #expect(deadRow["last_reason"] as? String == "Unregistered")
                #expect(deadRow["kind"] as? String == "alert")
                #expect(deadRow["delivered_at"] is NSNull)
                let aliveRow = try #require(byToken["\(alive.prefix(6))…\(alive.suffix(4))"])
                #expect(aliveRow["status"] as? String == "delivered")
                #expect(UUID(uuidString: aliveRow["provider_id"] as? String ?? "") != nil)
                #expect(aliveRow["delivered_at"] is String)
                #expect((aliveRow["attempts"] as? Int) == 1)
                let androidRow = try #require(byToken["\(android.prefix(6))…\(android.suffix(4))"])
                #expect((androidRow["provider_id"] as? String)?.hasPrefix("projects/") == true)
                // No full token anywhere in the answer.
                let text = String(buffer: response.body)
                #expect(!text.contains(dead) && !text.contains(alive) && !text.contains(android))

                // Full tokens: refused to a key without devices:read, shown to an admin.
                let refused = try await client.execute(uri: "/v1/apps/support/notifications/\(id)?tokens=full", method: .get, headers: bearer(reader))
                #expect(refused.status == .forbidden)
                let admin = try await harness.test.key(app: nil)
                let full = try await client.execute(uri: "/v1/apps/support/notifications/\(id)?tokens=full", method: .get, headers: bearer(admin))
                #expect(full.status == .ok)
                #expect(String(buffer: full.body).contains(dead))

                // Another app's key, a key without the scope, a user token, an unknown id, another app's path.
                let other = try await harness.test.key(app: "other")
                #expect(
                    try await client.execute(uri: "/v1/apps/support/notifications/\(id)", method: .get, headers: bearer(other)).status == .forbidden
                )
                let devicesOnly = try await harness.test.key(app: "support", scopes: [.devicesRead])
                #expect(
                    try await client.execute(uri: "/v1/apps/support/notifications/\(id)", method: .get, headers: bearer(devicesOnly)).status
                        == .forbidden
                )
                let user = try await TestApp.userToken("alice")
                #expect(
                    try await client.execute(uri: "/v1/apps/support/notifications/\(id)", method: .get, headers: bearer(user)).status == .forbidden
                )
                let missing = try await client.execute(uri: "/v1/apps/support/notifications/\(id + 1000)", method: .get, headers: bearer(reader))
                #expect(missing.status == .notFound)
                #expect(String(buffer: missing.body).contains("notification_not_found"))
                #expect(try await client.execute(uri: "/v1/apps/other/notifications/\(id)", method: .get, headers: bearer(admin)).status == .notFound)
                #expect(
                    try await client.execute(uri: "/v1/apps/support/notifications/abc", method: .get, headers: bearer(reader)).status == .notFound
                )
            }
        }
    }

    @Test("a ticket's notifications and a device's deliveries come newest first, a page at a time")
    func listsArePaginated() async throws {
        try await DeliveryHarness.with { harness in
            let token = apnsToken()
            let bystander = apnsToken()
            try await harness.application().test(.router) { client in
                let reader = try await harness.test.key(app: "support", scopes: [.notificationsRead])
                var ids: [Int64] = []
                for _ in 0..<5 { ids.append(try await Self.accept(client, webhook(devices: [(token, "ios")], ticket: "77"))) }
                _ = try await Self.accept(client, webhook(devices: [(bystander, "ios")], ticket: "78"))
                #expect(try await eventually { try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == 6 })

                var seen: [Int64] = []
                var cursor: String?
                var pages = 0
                repeat {
                    let uri = "/v1/apps/support/tickets/77/notifications?limit=2" + (cursor.map { "&cursor=\($0)" } ?? "")
                    let response = try await client.execute(uri: uri, method: .get, headers: bearer(reader))
                    #expect(response.status == .ok)
                    let body = try Self.object(response)
                    let page = try #require(body["notifications"] as? [[String: Any]])
                    #expect(page.count <= 2)
                    for item in page {
                        seen.append(try #require((item["id"] as? NSNumber)?.int64Value))
                        #expect((item["counts"] as? [String: Int])?["delivered"] == 1)
                        #expect(item["deliveries"] == nil)
                    }
                    cursor = body["next"] as? String
                    pages += 1
                } while cursor != nil && pages < 10
                #expect(seen == ids.reversed())
                #expect(pages == 3)

                let response = try await client.execute(
                    uri: "/v1/apps/support/devices/\(token.uppercased())/deliveries?limit=4",
                    method: .get,
                    headers: bearer(reader)
                )
                #expect(response.status == .ok)
                let body = try Self.object(response)
                let page = try #require(body["deliveries"] as? [[String: Any]])
                #expect(page.map { ($0["notification_id"] as? NSNumber)?.int64Value } == ids.reversed().prefix(4).map { $0 })
                #expect(page.allSatisfy { $0["ticket_id"] as? String == "77" && $0["status"] as? String == "delivered" })
                let next = try #require(body["next"] as? String)
                let rest = try Self.object(
                    try await client.execute(
                        uri: "/v1/apps/support/devices/\(token)/deliveries?limit=4&cursor=\(next)",
                        method: .get,
                        headers: bearer(reader)
                    )
                )
                #expect((rest["deliveries"] as? [[String: Any]])?.compactMap { ($0["notification_id"] as? NSNumber)?.int64Value } == [ids[0]])
                #expect(rest["next"] is NSNull)

                // Every cursor the served document admits (up to 19 digits) is taken: one past
                // Int64.max bounds nothing, so it is the first page.
                for huge in ["9665053891909647976", "9999999999999999999", "9223372036854775808"] {
                    let response = try await client.execute(
                        uri: "/v1/apps/support/tickets/77/notifications?limit=2&cursor=\(huge)",
                        method: .get,
                        headers: bearer(reader)
                    )
                    #expect(response.status == .ok, "\(huge)")
                    let page = try #require(try Self.object(response)["notifications"] as? [[String: Any]])
                    #expect(page.compactMap { ($0["id"] as? NSNumber)?.int64Value } == Array(ids.reversed().prefix(2)), "\(huge)")
                }
                for bad in ["limit=0", "limit=501", "cursor=abc", "cursor=-4", "cursor=0", "cursor=10000000000000000000"] {
                    let response = try await client.execute(
                        uri: "/v1/apps/support/tickets/77/notifications?\(bad)",
                        method: .get,
                        headers: bearer(reader)
                    )
                    #expect(response.status == .badRequest, "\(bad)")
                }
                let badTokens = try await client.execute(
                    uri: "/v1/apps/support/devices/\(token)/deliveries?tokens=all",
                    method: .get,
                    headers: bearer(reader)
                )
                #expect(badTokens.status == .badRequest)
            }
        }
    }
}
