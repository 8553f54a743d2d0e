import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Postgres
import TestSupport
import Testing

@testable import PushRelay

@Suite("Request log")
struct RequestLogTests {
    @Test("the logged route carries neither the webhook secret nor a full device token, and unmatched paths log no segment")
    func redaction() throws {
        typealias Log = RequestLogMiddleware<AppRequestContext>
        let secret = "support-secret-0123456789"
        let token = String(repeating: "ab", count: 32)
        var parameters = Parameters()
        parameters["app"] = "support"
        parameters["secret"] = Substring(secret)
        #expect(Log.route("/v1/webhooks/zendesk/{app}/{secret}", parameters: parameters) == "/v1/webhooks/zendesk/support/…")
        parameters = Parameters()
        parameters["app"] = "support"
        parameters["token"] = Substring(token)
        let device = Log.route("/v1/apps/{app}/devices/{token}", parameters: parameters)
        #expect(!device.contains(token))
        #expect(device.hasPrefix("/v1/apps/support/devices/ababab"))
        // Unread counts of a device linked to no user are addressed by its token.
        parameters = Parameters()
        parameters["app"] = "support"
        parameters["user"] = Substring(token)
        let owner = Log.route("/v1/apps/{app}/users/{user}/unread", parameters: parameters)
        #expect(!owner.contains(token))
        #expect(owner.hasSuffix("/unread"))
        // A device token has no minimum length: a user of any length is shortened like a token.
        let short = "fcm-token-0123456789"
        parameters["user"] = Substring(short)
        #expect(Log.route("/v1/apps/{app}/users/{user}/unread", parameters: parameters) == "/v1/apps/support/users/fcm-to…6789/unread")
        parameters["app"] = "Jos%C3%A9%0A"
        #expect(Log.route("/v1/apps/{app}/users/{user}/unread", parameters: parameters).hasPrefix("/v1/apps/José\\n/users/"))
        #expect(Log.route("/health", parameters: Parameters()) == "/health")
        #expect(Log.route("NotFound", parameters: Parameters()) == "(no route)")
        #expect(Log.route(nil, parameters: Parameters()) == "(no route)")
    }

    @Test("a request's log lines carry one id, request.id, the one answered in X-Request-Id: not Hummingbird's hb.request.id")
    func oneRequestID() async throws {
        let router = Router(context: BasicRequestContext.self)
        router.middlewares.add(RequestIDMiddleware())
        router.get("keys") { _, context in
            "hb.request.id=\(context.logger[metadataKey: "hb.request.id"]?.description ?? "none") request.id=\(context.logger[metadataKey: "request.id"]?.description ?? "none")"
        }
        try await Application(router: router).test(.router) { client in
            try await client.execute(uri: "/keys", method: .get, headers: [RequestIDMiddleware<BasicRequestContext>.headerName: "abc-123"]) {
                #expect(String(buffer: $0.body) == "hb.request.id=none request.id=abc-123")
            }
        }
    }
}
