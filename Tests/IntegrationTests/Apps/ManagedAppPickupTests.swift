import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PushRelay
import TestSupport
import Testing

/// A managed app changed through one instance's admin API is served by every instance at once.
@Suite("Managed apps reach every instance")
struct ManagedAppPickupTests {
    static func hook(
        _ client: some TestClientProtocol,
        app: String,
        secret: String = ManagedAppTests.webhookSecret
    ) async throws -> HTTPResponse.Status {
        try await client.execute(
            uri: "/v1/webhooks/zendesk/\(app)/\(secret)",
            method: .post,
            headers: [.contentType: "application/json"],
            body: jsonBody(webhook(devices: [("android-managed-token", "android")]))
        ).status
    }

    @Test("an app created through instance A is soon accepted by instance B (NOTIFY), and refused once deleted")
    func pickup() async throws {
        let test = try await TestApp.make()
        let (path, _) = try ManagedAppTests.keyFile()
        let first = try await test.application(extra: ManagedAppTests.keyConfig(path))
        let second = try await test.application(extra: ManagedAppTests.keyConfig(path))
        try await first.test(.router) { a in
            try await second.test(.router) { b in
                let admin = try await test.key(app: nil)
                #expect(try await Self.hook(b, app: "acme") == .notFound)
                var body = ManagedAppTests.configuration("acme")
                body["id"] = nil
                let created = try await a.execute(
                    uri: "/v1/admin/apps/acme",
                    method: .put,
                    headers: bearer(admin),
                    body: ByteBuffer(data: try ManagedAppTests.body(body))
                )
                #expect(created.status == .created)
                let started = ContinuousClock.now
                let served = try await eventually(timeout: .seconds(10)) { try await Self.hook(b, app: "acme") == .accepted }
                let pickup = ContinuousClock.now - started
                #expect(served, "instance B never served the managed app")
                // NOTIFY takes a fraction of a second and the stored generation is checked every
                // second besides; the bound leaves a loaded machine room.
                #expect(pickup < .seconds(5), "instance B took \(pickup)")
                let apps = String(buffer: try await b.execute(uri: "/v1/apps", method: .get, headers: bearer(admin)).body)
                #expect(apps.contains("\"acme\""))
                #expect(!apps.contains(ManagedAppTests.webhookSecret))
                // The file's apps are still served beside it.
                #expect(try await Self.hook(b, app: "support", secret: TestApp.webhookSecret) == .accepted)
                print("managed app served by the other instance after \(pickup)")
                let deleted = try await a.execute(uri: "/v1/admin/apps/acme", method: .delete, headers: bearer(admin))
                #expect(deleted.status == .noContent || deleted.status == .ok)
                #expect(try await eventually(timeout: .seconds(5)) { try await Self.hook(b, app: "acme") == .notFound })
            }
        }
    }
}
