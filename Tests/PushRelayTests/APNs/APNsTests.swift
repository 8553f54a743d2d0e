import Crypto
import Foundation
import JWTKit
import Synchronization
import Testing

@testable import PushRelay

@Suite("APNs payloads, headers, outcomes and provider tokens")
struct APNsTests {
    @Test("an alert carries title, body, badge, sound, the ticket and the notification id beside aps")
    func alertPayload() throws {
        let bytes = APNsPayload.alert(title: "Agent replied", body: "Hello 🎉", badge: 3, ticketID: "5", notificationID: 42)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        #expect(object["zendesk_sdk_request_id"] as? String == "5")
        #expect(object["push_relay_notification_id"] as? Int == 42)
        let aps = try #require(object["aps"] as? [String: Any])
        let alert = try #require(aps["alert"] as? [String: Any])
        #expect(alert["title"] as? String == "Agent replied")
        #expect(alert["body"] as? String == "Hello 🎉")
        #expect(aps["badge"] as? Int == 3)
        #expect(aps["sound"] as? String == "default")
    }

    @Test("apns-id values are distinct version 4 UUIDs, also when drawn from several threads at once")
    func uniqueUUIDs() async {
        let ids = await withTaskGroup(of: [String].self) { group in
            for _ in 0..<4 { group.addTask { (0..<5_000).map { _ in UUID.unique().uuidString.lowercased() } } }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(Set(ids).count == 20_000)
        // xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx
        #expect(ids.allSatisfy { Array($0)[14] == "4" && "89ab".contains(Array($0)[19]) })
    }

    @Test("lowercasedString is Foundation's uuidString, lower-cased")
    func lowercasedUUIDString() {
        var samples = (0..<1000).map { _ in UUID() }
        samples.append(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        samples.append(UUID(uuid: (255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255)))
        samples.append(UUID(uuid: (0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10)))
        for uuid in samples { #expect(uuid.lowercasedString == uuid.uuidString.lowercased()) }
        #expect(samples.last?.lowercasedString == "01234567-89ab-cdef-fedc-ba9876543210")
    }

    @Test("payload JSON escapes what JSON requires, keeps the rest as written, and sorts keys")
    func payloadJSON() throws {
        let tricky = "quote \" backslash \\ slash / newline \n return \r tab \t bell \u{07} nul \u{00} emoji 🎉 é"
        let document = PayloadJSON.object(["b": .string(tricky), "a": .int(-3), "c": .object(["z": .string(""), "y": .int(0)])])
        let text = String(decoding: document.bytes, as: UTF8.self)
        #expect(text.hasPrefix(#"{"a":-3,"b":"quote \" backslash \\ slash / newline \n return \r tab \t bell \u0007 nul \u0000 emoji 🎉 é","#))
        #expect(text.hasSuffix(#""c":{"y":0,"z":""}}"#))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(document.bytes)) as? [String: Any])
        #expect(object["b"] as? String == tricky)
        #expect(object["a"] as? Int == -3)
        #expect((object["c"] as? [String: Any])?["y"] as? Int == 0)
    }

    @Test("an oversized body is cut at a character boundary so the payload is valid JSON of at most 4096 bytes")
    func trimming() throws {
        // Multi-byte characters and characters JSON must escape, so raw length and encoded length differ.
        let body = String(repeating: "é😀\"\n", count: 2000)
        let bytes = APNsPayload.alert(title: "t", body: body, badge: nil, ticketID: "9")
        #expect(bytes.count <= 4096)
        #expect(bytes.count > 4000)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        let alert = try #require((object["aps"] as? [String: Any])?["alert"] as? [String: Any])
        let trimmed = try #require(alert["body"] as? String)
        #expect(trimmed.hasSuffix("…"))
        #expect(body.hasPrefix(String(trimmed.dropLast())))
        // A body that fits is left alone.
        let small = APNsPayload.alert(title: "t", body: "short", badge: nil, ticketID: "9")
        #expect(String(decoding: small, as: UTF8.self).contains("\"short\""))
    }

    @Test("a badge sync is a silent push with content-available and the badge")
    func badgeSync() throws {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(APNsPayload.badgeSync(badge: 1))) as? [String: Any])
        let aps = try #require(object["aps"] as? [String: Any])
        #expect(aps["content-available"] as? Int == 1)
        #expect(aps["badge"] as? Int == 1)
        #expect(aps["alert"] == nil)
    }

    @Test("headers: push type, topic, priority 10 for alerts and 5 for background, collapse id from the ticket")
    func headers() {
        let id = UUID()
        let alert = Dictionary(
            APNsHeaders.make(
                type: .alert,
                topic: "com.example",
                bearer: "jwt",
                ticketID: "5",
                expiration: Date(timeIntervalSince1970: 1_800_000_000),
                apnsID: id
            ),
            uniquingKeysWith: { $1 }
        )
        #expect(alert["apns-push-type"] == "alert")
        #expect(alert["apns-topic"] == "com.example")
        #expect(alert["apns-priority"] == "10")
        #expect(alert["apns-expiration"] == "1800000000")
        #expect(alert["apns-collapse-id"] == "zendesk-ticket-5")
        #expect(alert["apns-id"] == id.uuidString.lowercased())
        #expect(alert["authorization"] == "bearer jwt")
        let background = Dictionary(
            APNsHeaders.make(type: .background, topic: "com.example", bearer: nil, ticketID: "5", expiration: Date(), apnsID: id),
            uniquingKeysWith: { $1 }
        )
        #expect(background["apns-priority"] == "5")
        #expect(background["apns-collapse-id"] == nil)
        let long = TicketCollapseID.make(ticketID: String(repeating: "x", count: 100))
        #expect(long.utf8.count <= 64)
        #expect(long == TicketCollapseID.make(ticketID: String(repeating: "x", count: 100)))
    }

    @Test(
        "every APNs answer is classified",
        arguments: [
            (200, nil, PushOutcome.delivered(providerID: "id")),
            (410, "Unregistered", .deadToken(reason: "Unregistered")),
            (410, "ExpiredToken", .deadToken(reason: "ExpiredToken")),
            (400, "BadDeviceToken", .deadToken(reason: "BadDeviceToken")),
            (400, "BadTopic", .permanent(reason: "BadTopic")),
            (400, "IdleTimeout", .retry(reason: "IdleTimeout", retryAfter: nil)),
            (403, "ExpiredProviderToken", .credential(reason: "ExpiredProviderToken", refreshToken: true)),
            (403, "InvalidProviderToken", .credential(reason: "InvalidProviderToken", refreshToken: false)),
            (403, "UnrelatedKeyIdInToken", .credential(reason: "UnrelatedKeyIdInToken", refreshToken: false)),
            (403, "BadEnvironmentKeyInToken", .credential(reason: "BadEnvironmentKeyInToken", refreshToken: false)),
            (403, "BadEnvironmentKeyIdInToken", .credential(reason: "BadEnvironmentKeyIdInToken", refreshToken: false)),
            (413, "PayloadTooLarge", .permanent(reason: "PayloadTooLarge")),
            (429, "TooManyRequests", .retry(reason: "TooManyRequests", retryAfter: 30)),
            (429, "TooManyProviderTokenUpdates", .credential(reason: "TooManyProviderTokenUpdates", refreshToken: false)),
            (500, "InternalServerError", .retry(reason: "InternalServerError", retryAfter: 30)),
            (503, "ServiceUnavailable", .retry(reason: "ServiceUnavailable", retryAfter: 30)),
        ] as [(Int, String?, PushOutcome)]
    )
    func classification(status: Int, reason: String?, expected: PushOutcome) {
        #expect(PushOutcome.apns(status: status, reason: reason, retryAfter: "30", apnsID: "id") == expected)
    }

    @Test("the provider token is an ES256 JWT with kid, iss and iat, reused until it is due and re-signed when expired")
    func providerTokens() async throws {
        let key = P256.Signing.PrivateKey()
        let clock = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        let manager = try await APNsTokenManager(
            privateKeyPEM: key.pemRepresentation,
            keyID: "ABC123DEFG",
            teamID: "TEAM123456",
            now: { clock.withLock { $0 } }
        )
        let first = try await manager.token()
        let parts = first.split(separator: ".")
        #expect(parts.count == 3)
        let header = try #require(try JSONSerialization.jsonObject(with: base64URL(parts[0])) as? [String: Any])
        #expect(header["alg"] as? String == "ES256")
        #expect(header["kid"] as? String == "ABC123DEFG")
        let claims = try #require(try JSONSerialization.jsonObject(with: base64URL(parts[1])) as? [String: Any])
        #expect(claims["iss"] as? String == "TEAM123456")
        #expect(claims["iat"] as? Int == 1_800_000_000)
        // The signature checks out with the public key.
        let verifier = await JWTKeyCollection().add(ecdsa: try ES256PublicKey(pem: key.publicKey.pemRepresentation), kid: "ABC123DEFG")
        _ = try await verifier.verify(first, as: APNsTokenManager.Claims.self)

        clock.withLock { $0 += 30 * 60 }
        #expect(try await manager.token() == first)
        clock.withLock { $0 += 21 * 60 }
        let second = try await manager.token()
        #expect(second != first)
        await manager.rejected(first)  // a stale report: nothing changes
        #expect(try await manager.token() == second)
        await manager.rejected(second)
        #expect(try await manager.token() != second)
    }
}

private func base64URL(_ part: Substring) -> Data {
    var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while text.count % 4 != 0 { text += "=" }
    return Data(base64Encoded: text) ?? Data()
}
