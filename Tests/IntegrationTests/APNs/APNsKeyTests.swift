import CurlHTTP2
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushSandbox
import Synchronization
import TestSupport
import Testing

@testable import PushRelay

/// APNs ties an HTTP/2 connection to the key of the first provider token sent on it, and answers
/// `403 UnrelatedKeyIdInToken` to a token of another key on that connection.
@Suite("APNs keys and connections", .serialized)
struct APNsKeyTests {
    static let secondKeyID = "SECONDKEY2"

    static func secondKey() throws -> (keyFile: String, key: SandboxConfiguration.APNsKey) {
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-second-key-\(UUID().uuidString.prefix(8))")
        return try SandboxCredentials.generateAPNsKey(keyID: secondKeyID, teamID: SandboxCredentials.apnsTeamID, directory: directory)
    }

    /// One alert to a random device through `client`, with `bearer` as the provider token: the
    /// status and APNs' reason.
    static func push(_ client: HTTP2Client, gateway: String, bearer: String) async throws -> (Int, String?) {
        let headers = APNsHeaders.make(
            type: .alert,
            topic: "com.example.support",
            bearer: bearer,
            ticketID: "1",
            expiration: Date().addingTimeInterval(60),
            apnsID: UUID.unique()
        )
        let response = try await client.send(
            HTTP2Request(
                url: gateway + APNsHeaders.devicePath(token: apnsToken()),
                headers: headers,
                body: APNsPayload.alert(title: "t", body: "b", badge: nil, ticketID: "1"),
                timeout: hangCeiling
            )
        )
        let reason = (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])?["reason"] as? String
        return (response.status, reason)
    }

    static func tokens(keyFile: String, keyID: String) async throws -> APNsTokenManager {
        let pem = try String(contentsOfFile: keyFile, encoding: .utf8)
        return try await APNsTokenManager(privateKeyPEM: pem, keyID: keyID, teamID: SandboxCredentials.apnsTeamID)
    }

    @Test("the sandbox refuses a key's second new provider token within 20 minutes with 429 TooManyProviderTokenUpdates, as APNs does")
    func sandboxRefusesTokenChurn() async throws {
        try await DeliveryHarness.with { harness in
            let credentials = try await DeliveryHarness.credentials()
            // Two signers of one key, as two instances each signing their own would be.
            let first = try await Self.tokens(keyFile: credentials.apnsKeyFile, keyID: SandboxCredentials.apnsKeyID).token()
            let second = try await Self.tokens(keyFile: credentials.apnsKeyFile, keyID: SandboxCredentials.apnsKeyID).token()
            #expect(first != second)
            let client = try HTTP2Client(
                configuration: .init(maxConnectionsPerHost: 1, caFile: harness.sandbox.certificates.caFile, connectTimeout: hangCeiling)
            )
            func push(bearer: String) async throws -> (Int, String?) { try await Self.push(client, gateway: harness.gateway, bearer: bearer) }
            #expect(try await push(bearer: first) == (200, nil))
            #expect(try await push(bearer: second) == (429, "TooManyProviderTokenUpdates"))
            #expect(try await push(bearer: first) == (200, nil))
            await client.shutdown()
            #expect(harness.state.providerTokenCount(keyID: SandboxCredentials.apnsKeyID) == 1)
        }
    }

    @Test(
        "instances sharing the database share one provider token per key and one access token per service account; an expiry reported by several leads to one new token"
    )
    func sharedProviderTokens() async throws {
        let test = try await TestApp.make()
        _ = try await test.application()  // applies the migrations
        let store = ProviderTokenStore(client: test.client)
        let credentials = try await DeliveryHarness.credentials()
        let pem = try String(contentsOfFile: credentials.apnsKeyFile, encoding: .utf8)
        let clock = Mutex(Date(timeIntervalSince1970: 1_900_000_000))
        let now: @Sendable () -> Date = { clock.withLock { $0 } }
        func manager() async throws -> APNsTokenManager {
            try await APNsTokenManager(
                privateKeyPEM: pem,
                keyID: SandboxCredentials.apnsKeyID,
                teamID: SandboxCredentials.apnsTeamID,
                store: store,
                now: now
            )
        }
        let (a, b) = (try await manager(), try await manager())
        let first = try await a.token()
        #expect(try await b.token() == first)
        clock.withLock { $0 += 30 * 60 }
        #expect(try await a.token() == first)
        // Due after 50 minutes: the first to ask signs, the other takes it.
        clock.withLock { $0 += 21 * 60 }
        let second = try await b.token()
        #expect(second != first)
        #expect(try await a.token() == second)
        // Both are told it expired: one new token, not two.
        await a.rejected(second)
        await b.rejected(second)
        let third = try await a.token()
        #expect(third != second)
        #expect(try await b.token() == third)

        // FCM: one exchange for two managers, and one more after a rejection reported by both.
        let exchanges = Mutex(0)
        let exchange: FCMAccessTokenManager.Exchange = { _, _ in
            let number = exchanges.withLock { value in
                value += 1
                return value
            }
            return (200, Array(#"{"access_token":"access-\#(number)","expires_in":3599}"#.utf8))
        }
        let accountFile = try credentials.writeServiceAccount(sandboxURL: "https://oauth.invalid")
        let account = try JSONDecoder().decode(ServiceAccount.self, from: Data(contentsOf: URL(fileURLWithPath: accountFile)))
        let (c, d) = (
            try await FCMAccessTokenManager(account: account, exchange: exchange, store: store, now: now),
            try await FCMAccessTokenManager(account: account, exchange: exchange, store: store, now: now)
        )
        #expect(try await c.token() == "access-1")
        #expect(try await d.token() == "access-1")
        await c.rejected("access-1")
        await d.rejected("access-1")
        #expect(try await d.token() == "access-2")
        #expect(try await c.token() == "access-2")
        #expect(exchanges.withLock { $0 } == 2)
    }

    @Test("the sandbox answers 403 UnrelatedKeyIdInToken to a second key's token on a connection tied to the first key, and nothing else")
    func sandboxTiesAConnectionToItsFirstKey() async throws {
        let (secondFile, secondKey) = try Self.secondKey()
        try await DeliveryHarness.with(moreAPNsKeys: [Self.secondKeyID: secondKey]) { harness in
            let credentials = try await DeliveryHarness.credentials()
            let first = try await Self.tokens(keyFile: credentials.apnsKeyFile, keyID: SandboxCredentials.apnsKeyID).token()
            let second = try await Self.tokens(keyFile: secondFile, keyID: Self.secondKeyID).token()
            func push(_ client: HTTP2Client, bearer: String) async throws -> (Int, String?) {
                try await Self.push(client, gateway: harness.gateway, bearer: bearer)
            }
            // One connection: the first key's token ties it; the second key's is refused on it.
            let shared = try HTTP2Client(
                configuration: .init(maxConnectionsPerHost: 1, caFile: harness.sandbox.certificates.caFile, connectTimeout: hangCeiling)
            )
            #expect(try await push(shared, bearer: first) == (200, nil))
            #expect(try await push(shared, bearer: second) == (403, "UnrelatedKeyIdInToken"))
            #expect(try await push(shared, bearer: first) == (200, nil))
            await shared.shutdown()
            // A connection of its own: the second key is accepted.
            let own = try HTTP2Client(
                configuration: .init(maxConnectionsPerHost: 1, caFile: harness.sandbox.certificates.caFile, connectTimeout: hangCeiling)
            )
            #expect(try await push(own, bearer: second) == (200, nil))
            await own.shutdown()
        }
    }

    @Test("two apps with different APNs keys deliver side by side: one connection pool per key, so never UnrelatedKeyIdInToken")
    func appsWithDifferentKeysNeverShareAConnection() async throws {
        let (secondFile, secondKey) = try Self.secondKey()
        try await DeliveryHarness.with(moreAPNsKeys: [Self.secondKeyID: secondKey]) { made in
            var configured = made
            let other = try #require(configured.test.apps.firstIndex { $0.id == "other" })
            configured.test.apps[other].apns?.token = .init(keyFile: secondFile, keyID: Self.secondKeyID, teamID: SandboxCredentials.apnsTeamID)
            let harness = configured
            let support = (0..<30).map { _ in apnsToken() }
            let others = (0..<30).map { _ in apnsToken() }
            try await harness.application().test(.router) { client in
                for (url, tokens) in [(DeliveryTests.url, support), (DeliveryTests.otherURL, others)] {
                    for chunk in stride(from: 0, to: tokens.count, by: 10) {
                        let devices = tokens[chunk..<(chunk + 10)].map { ($0, "ios") }
                        let response = try await client.execute(
                            uri: url,
                            method: .post,
                            headers: DeliveryTests.json,
                            body: jsonBody(webhook(devices: devices))
                        )
                        #expect(response.status == .accepted)
                    }
                }
                #expect(
                    try await eventually {
                        try await harness.test.count("SELECT count(*) FROM deliveries WHERE status = 'delivered'") == support.count + others.count
                    }
                )
            }
            let answers = harness.state.requests(service: "apns")
            #expect(answers.count == support.count + others.count)
            #expect(answers.allSatisfy { $0.status == 200 }, "\(Set(answers.compactMap(\.reason)))")
            // Both keys signed provider tokens: the apps did not fall back to one shared key.
            #expect(
                Set(harness.state.presentedCredentials().compactMap { providerTokenKeyID("bearer " + $0) }) == [
                    SandboxCredentials.apnsKeyID, Self.secondKeyID,
                ]
            )
        }
    }
}

/// The `kid` in the header of a provider token as sent (`bearer <jwt>`).
func providerTokenKeyID(_ bearer: String) -> String? {
    guard let header = bearer.split(separator: " ").last?.split(separator: ".").first else { return nil }
    var base64 = header.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    guard let data = Data(base64Encoded: base64), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
    return object["kid"] as? String
}
