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

@Suite("Hardening: strict JSON on every route")
struct StrictJSONRouteTests {
    /// Documents other parsers accept; each must be a 400 `invalid_json` naming the problem.
    static let notJSON: [(String, [UInt8])] = [
        ("trailing comma", Array(#"{"platform":"ios",}"#.utf8)),
        ("comment", Array(#"{"platform":"ios" /* c */}"#.utf8)),
        ("NaN", Array(#"{"platform":"ios","x":NaN}"#.utf8)),
        ("leading zero", Array(#"{"platform":"ios","x":01}"#.utf8)),
        ("invalid UTF-8", Array(#"{"platform":"ios","x":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8)),
        ("lone surrogate", Array(#"{"platform":"ios","x":"\ud800"}"#.utf8)),
        ("duplicate name", Array(#"{"platform":"ios","platform":"android"}"#.utf8)),
        ("byte order mark", [0xEF, 0xBB, 0xBF] + Array(#"{"platform":"ios"}"#.utf8)),
    ]

    @Test("the webhook, device registration, read and bulk-unregister bodies refuse non-JSON with 400 invalid_json and store nothing")
    func everyJSONBody() async throws {
        let test = try await TestApp.make()
        let app = try await test.application()
        let key = try await test.key(app: "support")
        let admin = try await test.key(app: nil)
        let valid = Array(webhook(devices: [(apnsToken(), "ios")]).utf8)
        try await app.test(.router) { client in
            for (problem, body) in Self.notJSON {
                // The webhook with the same defect: its own closing brace replaced by the defective object's members.
                let hook =
                    problem == "byte order mark"
                    ? [0xEF, 0xBB, 0xBF] + valid : Array(valid.dropLast()) + [UInt8(ascii: ",")] + Array(body.dropFirst())
                let requests: [(String, HTTPRequest.Method, HTTPFields, [UInt8])] = [
                    ("/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)", .post, [.contentType: "application/json"], hook),
                    ("/v1/apps/support/devices/\(apnsToken())", .put, bearer(key), body),
                    ("/v1/apps/support/users/alice/tickets/5/read", .post, bearer(key), body),
                    ("/v1/admin/apps/support/devices/bulk-unregister", .post, bearer(admin), body),
                ]
                for (uri, method, headers, bytes) in requests {
                    let response = try await client.execute(uri: uri, method: method, headers: headers, body: ByteBuffer(bytes: bytes))
                    #expect(response.status == .badRequest, "\(problem): \(method) \(uri)")
                    #expect(response.errorBody?.code == "invalid_json", "\(problem): \(method) \(uri): \(response.errorBody?.message ?? "")")
                }
            }
        }
        #expect(try await test.count("SELECT count(*) FROM notifications") == 0)
        #expect(try await test.count("SELECT count(*) FROM devices") == 0)
        #expect(try await test.count("SELECT count(*) FROM jobs") == 0)
    }
}
