import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import TestSupport
import Testing

@testable import PushRelay

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

    @Test("an app created through instance A is accepted by instance B by its NOTIFY, and refused once deleted")
    func pickup() async throws {
        let test = try await TestApp.make()
        let (path, _) = try ManagedAppTests.keyFile()
        let first = try await test.application(extra: ManagedAppTests.keyConfig(path))
        // B's clock stands still, so its check of the stored generation (each second, for a missed
        // NOTIFY) never runs: only the NOTIFY can bring the change.
        let second = try await test.application(extra: ManagedAppTests.keyConfig(path), clock: RelayClock(ManualTime()))
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
                #expect(try await eventually { try await Self.hook(b, app: "acme") == .accepted }, "instance B never served the managed app")
                let apps = String(buffer: try await b.execute(uri: "/v1/apps", method: .get, headers: bearer(admin)).body)
                #expect(apps.contains("\"acme\""))
                #expect(!apps.contains(ManagedAppTests.webhookSecret))
                // The file's apps are still served beside it.
                #expect(try await Self.hook(b, app: "support", secret: TestApp.webhookSecret) == .accepted)
                let deleted = try await a.execute(uri: "/v1/admin/apps/acme", method: .delete, headers: bearer(admin))
                #expect(deleted.status == .noContent || deleted.status == .ok)
                #expect(try await eventually { try await Self.hook(b, app: "acme") == .notFound })
            }
        }
    }

    /// Holds a reload in its read of the configuration file until the test lets it go.
    final class ReadGate: Sendable {
        private let state = Mutex<(armed: Bool, entered: Bool, released: Bool)>((false, false, false))
        func arm() { state.withLock { $0.armed = true } }
        var entered: Bool { state.withLock { $0.entered } }
        func release() { state.withLock { $0.released = true } }
        /// Called by the reload's read: returns at once unless armed, else once released.
        func pass() async {
            guard
                state.withLock({ state in
                    if state.armed { state.entered = true }
                    return state.armed
                })
            else { return }
            _ = await eventually { state.withLock { $0.released } }
        }
    }

    @Test("a file reload that read the managed apps before a deletion cannot put the deleted app back: reloads run one at a time")
    func reloadsAreSerialised() async throws {
        let test = try await TestApp.make()
        let (path, _) = try ManagedAppTests.keyFile()
        let lines = OutageLogTests.Lines()
        var logger = Logger(label: "push-relay") { RelayLogHandler(label: $0, stream: lines, format: .text) }
        logger.logLevel = .debug
        var values: [AbsoluteConfigKey: ConfigValue] = [
            "database.url": .init(.string(test.conninfo), isSecret: true),
            "database.max_connections": .init(.int(6), isSecret: false),
            "delivery.enabled": .init(.bool(false), isSecret: false),
        ]
        values.merge(ManagedAppTests.keyConfig(path)) { $1 }
        let reader = ConfigReader(provider: InMemoryProvider(values: values))
        let gate = ReadGate()
        let app = try await buildApplication(reader: reader, logger: logger, apps: test.apps) { _ in
            await gate.pass()
            return reader
        }
        try await app.test(.router) { client in
            let admin = try await test.key(app: nil)
            var body = ManagedAppTests.configuration("acme")
            body["id"] = nil
            let created = try await client.execute(
                uri: "/v1/admin/apps/acme",
                method: .put,
                headers: bearer(admin),
                body: ByteBuffer(data: try ManagedAppTests.body(body))
            )
            #expect(created.status == .created)
            #expect(try await eventually { try await Self.hook(client, app: "acme") == .accepted })

            // A file reload starts (it reads the managed apps, acme among them) and is held in
            // its read of the file.
            gate.arm()
            async let reloaded = client.execute(uri: "/v1/admin/reload", method: .post, headers: bearer(admin))
            #expect(await eventually { gate.entered })
            // acme is deleted meanwhile; its NOTIFY asks for a managed-app reload.
            let deleted = try await client.execute(uri: "/v1/admin/apps/acme", method: .delete, headers: bearer(admin))
            #expect(deleted.status == .noContent || deleted.status == .ok)
            let waits = { lines.lines.withLock { $0.contains { $0.contains("configuration reload waits for the one in progress") } } }
            // Either the managed reload waits its turn, or (unserialised) it installs at once.
            #expect(
                try await eventually {
                    if waits() { return true }
                    return try await Self.hook(client, app: "acme") == .notFound
                }
            )
            gate.release()
            #expect(try await reloaded.status == .ok)
            // Both done: the managed reload came last and acme stays deleted.
            #expect(try await eventually { try await Self.hook(client, app: "acme") == .notFound })
            #expect(waits(), "the managed-app reload did not wait for the file reload in progress")
            let apps = String(buffer: try await client.execute(uri: "/v1/apps", method: .get, headers: bearer(admin)).body)
            #expect(!apps.contains("\"acme\""), "\(apps)")
        }
    }
}
