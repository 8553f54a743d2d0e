import Configuration
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushSandbox
import TestSupport
import Testing

@testable import PushRelay

/// A provider token belongs to the exact key that signed it: a key replaced under the same id is
/// never answered with the old key's stored token, and a token a provider refuses is replaced.
@Suite("Provider tokens follow the credential")
struct CredentialChangeTests {
    static let url = "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)"
    static let json: HTTPFields = [.contentType: "application/json"]

    /// One iOS webhook through a relay whose `support` app signs with `keyFile`, run until its
    /// first refusal is stored (a credential refusal keeps it pending, with its reason) or, with
    /// `untilDelivered`, until it is delivered. Returns the delivery's status then.
    static func deliver(_ harness: DeliveryHarness, keyFile: String, untilDelivered: Bool) async throws -> String? {
        var copy = harness
        let index = try #require(copy.test.apps.firstIndex { $0.id == "support" })
        copy.test.apps[index].apns?.token?.keyFile = keyFile
        let token = apnsToken()
        return try await copy.application(extra: ["delivery.credential_retry_seconds": .init(.int(1), isSecret: false)]).test(.router) { client in
            let response = try await client.execute(
                uri: Self.url,
                method: .post,
                headers: Self.json,
                body: jsonBody(webhook(devices: [(token, "ios")]))
            )
            #expect(response.status == .accepted)
            var status: String?
            let settled = try await eventually {
                let row = try await harness.test.client.query(
                    "SELECT status, last_error FROM deliveries WHERE device_token = $1",
                    [token]
                ).rows.first.map { try $0.decode((String, String?).self) }
                status = row?.0
                return status == "delivered" || (!untilDelivered && status == "pending" && row?.1 != nil)
            }
            #expect(settled, "the delivery was \(status ?? "not stored")")
            return status
        }
    }

    @Test("a .p8 replaced under the same key id signs a new token at once; the old key's stored token is not reused")
    func replacedKey() async throws {
        try await DeliveryHarness.with { harness in
            let credentials = try await DeliveryHarness.credentials()
            // A key the sandbox does not know, under the sandbox key's id: its tokens get InvalidProviderToken.
            let keyFile = harness.directory + "/AuthKey_\(SandboxCredentials.apnsKeyID).p8"
            try P256.Signing.PrivateKey().pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
            // Refused, not delivered: its first attempt's outcome is stored as a failure.
            #expect(try await Self.deliver(harness, keyFile: keyFile, untilDelivered: false) == "pending")
            #expect(harness.state.requests(service: "apns").contains { $0.reason == "InvalidProviderToken" })
            #expect(try await harness.test.count("SELECT count(*) FROM provider_tokens WHERE credential LIKE 'apns:%'") >= 1)
            // The operator fixes the file (same path, same key id) and restarts.
            try String(contentsOfFile: credentials.apnsKeyFile, encoding: .utf8).write(toFile: keyFile, atomically: true, encoding: .utf8)
            #expect(try await Self.deliver(harness, keyFile: keyFile, untilDelivered: true) == "delivered", "the old key's token was reused")
        }
    }

    @Test("a stored token APNs refuses (InvalidProviderToken) is replaced after one refusal, not kept for its hour")
    func refusedToken() async throws {
        try await DeliveryHarness.with { harness in
            let credentials = try await DeliveryHarness.credentials()
            // Build the schema, then store a token the sandbox refuses under the credential's name,
            // as an instance with a broken key would have.
            try await harness.application().test(.router) { _ in }
            let pem = try String(contentsOfFile: credentials.apnsKeyFile, encoding: .utf8)
            let name = ProviderTokenStore.credentialName(
                "apns:\(SandboxCredentials.apnsTeamID):\(SandboxCredentials.apnsKeyID)",
                key: try P256.Signing.PrivateKey(pemRepresentation: pem)
            )
            let other = try await APNsTokenManager(
                privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation,
                keyID: SandboxCredentials.apnsKeyID,
                teamID: SandboxCredentials.apnsTeamID
            )
            let refused = try await other.token()
            try await harness.test.client.query(
                "INSERT INTO provider_tokens (credential, token, issued_at, expires_at) VALUES ($1, $2, now(), now() + interval '1 hour')",
                [name, refused]
            )
            #expect(
                try await Self.deliver(harness, keyFile: credentials.apnsKeyFile, untilDelivered: true) == "delivered",
                "the refused token was kept"
            )
            let answers = harness.state.requests(service: "apns").map { $0.reason ?? "\($0.status)" }
            #expect(answers.first == "InvalidProviderToken", "\(answers)")
            #expect(answers.filter { $0 == "InvalidProviderToken" }.count == 1, "\(answers)")
        }
    }
}
