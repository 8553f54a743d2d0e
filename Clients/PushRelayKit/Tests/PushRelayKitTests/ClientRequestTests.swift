import Foundation
import Testing

@testable import PushRelayKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The unread answer every script gives unless a test says otherwise: nothing unread.
let nothingUnread = RelayStub.Reply.json(200, #"{"total":0,"tickets":[]}"#)

@Suite("Requests, tokens and errors, against a stub")
struct ClientRequestTests {
    @Test("the relay's error body becomes server(status, code, message); a body that is not one keeps the status")
    func serverErrors() async throws {
        let cases: [(RelayStub.Reply, PushRelayError, transient: Bool)] = [
            (
                .error(422, code: "invalid_device", message: "the token is not hex"),
                .server(status: 422, code: "invalid_device", message: "the token is not hex"), false
            ),
            (
                .answer(503, headers: ["Content-Type": "text/html"], body: "<h1>down</h1>"),
                .server(status: 503, code: "http_503", message: HTTPURLResponse.localizedString(forStatusCode: 503)), true
            ),
            (.error(429, code: "rate_limited", message: "slow down"), .server(status: 429, code: "rate_limited", message: "slow down"), true),
        ]
        for (reply, expected, transient) in cases {
            let host = RelayStub.host("errors") { $0.method == "PUT" ? reply : nothingUnread }
            let relay = RelayStub.client(host)
            try await relay.setDeviceToken(identifier: "token-1")
            let error = await #expect(throws: PushRelayError.self) { try await relay.authorize(userID: "alice") { _ in "jwt" } }
            #expect(error == expected)
            #expect(error?.isTransient == transient)
            #expect(await relay.userID == "alice", "a failed registration keeps the user authorized")
            #expect(await !relay.isRegistered)
            try await relay.deauthorize()
        }
    }

    @Test("a refused token is replaced once through the provider and the request sent again with the new one")
    func refreshOnce() async throws {
        let host = RelayStub.host("refresh") { request in
            request.method == "PUT" && request.authorization == "Bearer alice-1"
                ? .error(401, code: "unauthorized", message: "token expired") : .json(200, "{}")
        }
        let mint = TokenMint("alice")
        let relay = RelayStub.client(host)
        try await relay.setDeviceToken(identifier: "token-1")
        try await relay.authorize(userID: "alice", tokenProvider: mint.provider)
        #expect(RelayStub.requests(host, "PUT").map(\.authorization) == ["Bearer alice-1", "Bearer alice-2"])
        #expect(mint.count == 2)
        #expect(await relay.isRegistered)
        try await relay.deauthorize()
        #expect(RelayStub.requests(host, "DELETE").map(\.authorization) == ["Bearer alice-2"], "the new token is kept")
    }

    @Test("a second refusal is unauthorized with the relay's message; nothing is registered")
    func refusedTwice() async throws {
        let host = RelayStub.host("refused") { _ in .error(401, code: "unauthorized", message: "bad signature") }
        let relay = RelayStub.client(host)
        try await relay.setDeviceToken(identifier: "token-1")
        let error = await #expect(throws: PushRelayError.self) {
            try await relay.authorize(userID: "alice", tokenProvider: TokenMint("alice").provider)
        }
        #expect(error == .unauthorized("bad signature"))
        #expect(error?.isTransient == false)
        #expect(RelayStub.requests(host, "PUT").count == 2)
        #expect(await !relay.isRegistered)
        try await relay.deauthorize()
    }

    @Test("a token provider that throws is tokenProvider with its error, and nothing is sent")
    func providerFails() async throws {
        struct NoSession: Error, CustomStringConvertible { var description: String { "signed out at the backend" } }
        let host = RelayStub.host("provider") { _ in .json(200, "{}") }
        let relay = RelayStub.client(host)
        try await relay.setDeviceToken(identifier: "token-1")
        await #expect(throws: PushRelayError.tokenProvider("signed out at the backend")) {
            try await relay.authorize(userID: "alice") { _ in throw NoSession() }
        }
        #expect(RelayStub.requests(host, "PUT").isEmpty)
        try await relay.deauthorize()
    }

    @Test("an unreachable relay is a transient network error")
    func unreachable() async throws {
        let host = RelayStub.host("offline") { _ in .failure(.notConnectedToInternet) }
        let relay = RelayStub.client(host)
        try await relay.setDeviceToken(identifier: "token-1")
        let error = await #expect(throws: PushRelayError.self) { try await relay.authorize(userID: "alice") { _ in "jwt" } }
        guard case .network(let message) = error else {
            Issue.record("expected a network error, got \(String(describing: error))")
            return
        }
        #expect(message.hasPrefix("\(URLError.Code.notConnectedToInternet.rawValue) "))
        #expect(error?.isTransient == true)
        try? await relay.deauthorize()
    }

    @Test("without an authorized user the counter's calls throw notAuthorized and send nothing")
    func notAuthorized() async throws {
        let host = RelayStub.host("nouser") { _ in nothingUnread }
        let relay = RelayStub.client(host)
        await #expect(throws: PushRelayError.notAuthorized) { try await relay.unread.getUnreadMessagesCount() }
        await #expect(throws: PushRelayError.notAuthorized) { try await relay.unread.markRead(ticket: "5") }
        await #expect(throws: PushRelayError.notAuthorized) { try await relay.unread.markAllRead() }
        try await relay.deauthorize()  // nobody to sign out: nothing happens
        #expect(RelayStub.requests(host).isEmpty)
    }

    @Test("requests: the base path kept, JSON Accept always, Content-Type only with a body, the given timeout")
    func requestShape() throws {
        let transport = Transport(baseURL: URL(string: "https://push.example.com/relay//")!, appID: "my app", session: .shared, timeout: 7)
        let get = transport.request("GET", ["users", "alice", "unread"], headers: ["If-None-Match": "\"v1\""])
        #expect(get.url?.absoluteString == "https://push.example.com/relay/v1/apps/my%20app/users/alice/unread")
        #expect(get.httpMethod == "GET" && get.httpBody == nil)
        #expect(get.value(forHTTPHeaderField: "Accept") == "application/json")
        #expect(get.value(forHTTPHeaderField: "Content-Type") == nil)
        #expect(get.value(forHTTPHeaderField: "If-None-Match") == "\"v1\"")
        #expect(get.timeoutInterval == 7)
        let put = transport.request("PUT", ["devices", "t"], body: Data("{}".utf8), timeout: 2)
        #expect(put.value(forHTTPHeaderField: "Content-Type") == "application/json")
        #expect(put.httpBody == Data("{}".utf8) && put.timeoutInterval == 2)
    }
}

@Suite("Device registration, against a stub")
struct DeviceRegistrationTests {
    /// A relay that accepts every registration and removal, and has nothing unread.
    static func accepting(_ name: String) -> String {
        RelayStub.host(name) { $0.path.hasSuffix("/unread") ? nothingUnread : .json(200, "{}") }
    }

    /// The host's registrations and removals, as `METHOD path user` lines (the user from the token).
    static func changes(_ host: String) -> [String] {
        RelayStub.requests(host).filter { $0.method != "GET" }.map {
            "\($0.method) \($0.path) \($0.authorization?.split(separator: "-").first?.dropFirst(7) ?? "-")"
        }
    }

    @Test("the user first, the token later: one registration with the configured platform, environment and locale")
    func bodyFields() async throws {
        let host = Self.accepting("fields")
        let relay = RelayStub.client(host) {
            $0.platform = .android
            $0.environment = .sandbox
            $0.locale = "de_DE"
        }
        try await relay.authorize(userID: "alice", tokenProvider: TokenMint("alice").provider)
        #expect(Self.changes(host).isEmpty, "no token yet: nothing to register")
        try await relay.setDeviceToken(identifier: "fcm-token-1")
        #expect(
            RelayStub.requests(host, "PUT").map(\.body) == [["platform": "android", "user_id": "alice", "environment": "sandbox", "locale": "de_DE"]]
        )
        #expect(RelayStub.requests(host, "PUT").map(\.path) == ["devices/fcm-token-1"])
        #expect(await relay.isRegistered)
        #expect(await relay.deviceIdentifier == "fcm-token-1")
        try await relay.registerDevice()
        try await relay.authorize(userID: "alice") { _ in "never asked" }
        #expect(Self.changes(host).count == 1, "registered already: nothing sent again")
        try await relay.deauthorize()
        #expect(Self.changes(host) == ["PUT devices/fcm-token-1 alice", "DELETE devices/fcm-token-1 alice"])
    }

    @Test("an APNs token's bytes are registered as lower-case hex")
    func apnsToken() async throws {
        let host = Self.accepting("apns")
        let relay = RelayStub.client(host)
        try await relay.setDeviceToken(Data([0xDE, 0xAD, 0x00, 0x01]))
        try await relay.authorize(userID: "alice") { _ in "alice-1" }
        #expect(RelayStub.requests(host, "PUT").map(\.path) == ["devices/dead0001"])
        try await relay.deauthorize()
    }

    @Test("a replaced token: the old registration removed, the new one made")
    func tokenReplaced() async throws {
        let host = Self.accepting("replaced")
        let relay = RelayStub.client(host)
        try await relay.setDeviceToken(identifier: "token-1")
        try await relay.authorize(userID: "alice", tokenProvider: TokenMint("alice").provider)
        try await relay.setDeviceToken(identifier: "token-2")
        #expect(Self.changes(host) == ["PUT devices/token-1 alice", "DELETE devices/token-1 alice", "PUT devices/token-2 alice"])
        try await relay.deauthorize()
    }

    @Test("another user: the first user's registration removed with the first user's token, then the new user's made")
    func userSwitch() async throws {
        let host = Self.accepting("switch")
        let relay = RelayStub.client(host)
        try await relay.setDeviceToken(identifier: "token-1")
        try await relay.authorize(userID: "alice", tokenProvider: TokenMint("alice").provider)
        try await relay.authorize(userID: "bob", tokenProvider: TokenMint("bob").provider)
        #expect(Self.changes(host) == ["PUT devices/token-1 alice", "DELETE devices/token-1 alice", "PUT devices/token-1 bob"])
        #expect(RelayStub.requests(host, "PUT").last?.body["user_id"] == "bob")
        #expect(await relay.userID == "bob")
        #expect(await relay.isRegistered)
        try await relay.deauthorize()
    }

    @Test("a removal that failed at sign-out throws, and is made before the next registration")
    func staleRemoval() async throws {
        let failed = Locked(false)
        let host = RelayStub.host("stale") { request in
            if request.path.hasSuffix("/unread") { return nothingUnread }
            let first =
                request.method == "DELETE"
                && failed.withLock { done in
                    defer { done = true }
                    return !done
                }
            return first ? .answer(502, headers: [:], body: "bad gateway") : .json(200, "{}")
        }
        let relay = RelayStub.client(host)
        try await relay.setDeviceToken(identifier: "token-1")
        try await relay.authorize(userID: "alice", tokenProvider: TokenMint("alice").provider)
        let error = await #expect(throws: PushRelayError.self) { try await relay.deauthorize() }
        #expect(error?.isTransient == true)
        #expect(await relay.userID == nil, "signed out all the same")
        try await relay.authorize(userID: "bob", tokenProvider: TokenMint("bob").provider)
        #expect(
            Self.changes(host) == [
                "PUT devices/token-1 alice", "DELETE devices/token-1 alice", "DELETE devices/token-1 alice", "PUT devices/token-1 bob",
            ]
        )
        try await relay.deauthorize()
    }
}
