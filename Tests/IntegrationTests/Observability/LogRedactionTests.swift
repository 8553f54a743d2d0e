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

@Suite("Hardening: logs")
struct LogRedactionTests {
    @Test(
        "at log level trace, every path variant and a full delivery round leave no secret, full token, API key, provider token or notification text in the log"
    )
    func nothingSecretLogged() async throws {
        try await DeliveryHarness.with { harness in
            let secret = HostileRelay.secret
            let relay = try await HostileRelay.start(
                logLevel: "trace",
                appYAML: try harness.appYAML(harness.test.apps[0], secrets: [secret]),
                extraYAML: """
                    tls:
                      ca_file: \(harness.sandbox.certificates.caFile)
                    zendesk:
                      poll_interval_ms: 100
                    """,
                delivery: true
            )
            let title = "Title-\(UUID().uuidString)"
            let text = "Body-\(UUID().uuidString)"
            let ios = apnsToken()
            let android = "android-\(UUID().uuidString)-token"
            let dead = apnsToken()
            let registered = apnsToken()
            harness.state.setBehaviour(SandboxBehaviour(status: 410, reason: "Unregistered"), for: dead)
            let body = Array(webhook(devices: [(ios, "ios"), (android, "android"), (dead, "ios")], title: title, body: text).utf8)
            let json = [("Content-Type", "application/json")]
            var accepted = 0
            for path in [
                "/v1/webhooks/zendesk/support/\(secret)", "//v1/webhooks/zendesk/support/\(secret)",
                "/v1//webhooks/zendesk/support/\(secret)", "/v1/webhooks/zendesk/support//\(secret)",
                "/v1/webhooks/zendesk/support/\(secret)/", "/V1/webhooks/zendesk/support/\(secret)",
                "/./v1/webhooks/zendesk/support/\(secret)", "/v1/webhooks/zendesk/\(secret)",
                "/v1/webhooks/zendesk/support/\(secret)/x", "/v1/webhooks/zendesk/support/\(secret)?q=\(secret)",
            ] {
                let answer = try #require(try await relay.send(RawHTTP.request("POST", path, headers: json, body: body)))
                #expect(answer.status < 500)
                if answer.status == 202 { accepted += 1 }
            }
            #expect(accepted >= 5)
            let auth = [("Authorization", "Bearer \(relay.apiKey)")]
            for path in [
                "/v1/apps/support/devices/\(registered)", "//v1/apps/support/devices/\(registered)",
                "/v1/apps/support//devices/\(registered)", "/V1/apps/support/devices/\(registered)",
                "/v1/apps/support/users/\(registered)/unread", "//v1/apps/support/users/\(ios)/unread",
            ] {
                for method in ["PUT", "GET", "DELETE"] {
                    let answer = try await relay.send(
                        RawHTTP.request(
                            method,
                            path,
                            headers: json + auth,
                            body: method == "PUT" ? Array(#"{"platform":"ios"}"#.utf8) : nil
                        )
                    )
                    #expect((answer?.status ?? 0) < 500)
                }
            }
            // The whole round: every accepted delivery ends, the dead token reaches Zendesk.
            let done = try await eventually {
                try await relay.test.count("SELECT count(*) FROM deliveries WHERE status IN ('pending', 'sending')") == 0
                    && harness.state.requests(service: "zendesk").count >= 1
            }
            await relay.relay.stop()
            let log = relay.log
            #expect(done, "\(log.suffix(3000))")
            #expect(log.contains("http.route"))
            #expect(log.contains("trace") || log.contains("TRACE"))
            var secrets: [(String, String)] = [
                ("webhook secret", secret), ("API key", relay.apiKey), ("API key secret", String(relay.apiKey.dropFirst("prk_".count + 12 + 1))),
                ("iOS token", ios), ("Android token", android), ("dead token", dead), ("registered token", registered),
                ("title", title), ("body", text), ("Zendesk API token", "zendesk-api-token-0123456789"),
            ]
            let credentials = harness.state.presentedCredentials()
            // An APNs provider token, an OAuth assertion, an FCM access token, Zendesk's Basic credential.
            #expect(credentials.count >= 4, "the sandbox saw \(credentials.count) credentials")
            secrets += credentials.map { ("provider credential", $0) }
            for (name, value) in secrets {
                // The lines themselves, not the whole log, so a failure says where it leaked.
                let leaking = log.split(separator: "\n").filter { $0.contains(value) }
                #expect(
                    leaking.isEmpty,
                    "the log holds the \(name): \(leaking.prefix(3).map { $0.replacingOccurrences(of: value, with: "<\(name)>") })"
                )
            }
        }
    }
}
