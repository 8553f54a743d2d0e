import ArgumentParser
import Crypto
import Foundation
import PushRelayKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// PushRelayKit end to end against a running relay: two devices of one user, a reply, a read on
/// one device seen on the other, and a user switch on the second device. It plays the app (two
/// ``PushRelayClient``s), the app's backend (it signs the user JWTs) and the helpdesk (it posts
/// the webhooks).
@main
struct Example: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-relay-kit-example",
        abstract: "Runs PushRelayKit against a relay: two devices, replies, a read, a user switch.",
        discussion: """
            The relay's app needs user tokens (user_tokens.secret_file); pass the same key file here,
            since this example also plays your backend, which signs each user's JWT. It also posts
            the helpdesk's webhooks, with the app's webhook secret. Exits 1 when a step does not
            happen within --timeout seconds.
            """
    )

    @Option(help: "The relay's base URL.")
    var relay = "http://127.0.0.1:8080"

    @Option(help: "The app's id in the relay's configuration.")
    var app: String

    @Option(help: "The app's webhook secret (the helpdesk's URL holds it).")
    var webhookSecret: String

    @Option(help: "The app's user_tokens key file, to sign user JWTs as the app's backend does.")
    var userTokenKeyFile: String

    @Option(help: "Seconds between the tablet's polls (unreadMessageCountDelay).")
    var delay: Double = 1

    @Option(help: "Lifetime of the user JWTs the backend signs, in seconds.")
    var tokenLifetime: Int = 600

    @Option(help: "Seconds to wait for each step.")
    var timeout: Double = 20

    func run() async throws {
        guard let base = URL(string: relay), base.scheme != nil else { throw ValidationError("--relay must be a URL, e.g. http://127.0.0.1:8080") }
        let keyData = try Data(contentsOf: URL(fileURLWithPath: userTokenKeyFile))
        let key = String(decoding: keyData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let backend = Backend(key: SymmetricKey(data: Data(key.utf8)), lifetime: tokenLifetime)
        let helpdesk = Helpdesk(url: base.appendingPathComponent("v1/webhooks/zendesk/\(app)/\(webhookSecret)"))
        let configuration = PushRelayClient.Configuration(baseURL: base, appID: app, environment: .sandbox)

        print("PushRelayKit example: relay \(relay), app \(app)")
        let phone = await Device(name: "phone", client: PushRelayClient(configuration: configuration), timeout: timeout)
        let tablet = await Device(name: "tablet", client: PushRelayClient(configuration: configuration), timeout: timeout)

        // Launch: each device gets its APNs token; alice signs in on both.
        try await phone.launch(token: Device.randomAPNsToken(), user: "alice", backend: backend, foreground: true, delay: 0)
        try await tablet.launch(token: Device.randomAPNsToken(), user: "alice", backend: backend, foreground: false, delay: delay)
        try await phone.expect(total: 0)
        try await tablet.expect(total: 0)

        // Two replies, to both of alice's devices.
        let both = [await phone.identifier(), await tablet.identifier()]
        try await helpdesk.reply(ticket: "5", to: both, note: "to alice's phone and tablet")
        try await phone.expect(total: 1)
        try await tablet.expect(total: 1)
        let latest = try await helpdesk.reply(ticket: "7", to: both, note: "to alice's phone and tablet")
        try await phone.expect(total: 2)
        try await tablet.expect(total: 2)

        // Alice opens ticket 5 on the phone; the tablet follows.
        await phone.say("alice opens ticket 5: markRead(ticket: \"5\")")
        try await phone.client.unread.markRead(ticket: "5")
        try await phone.expect(total: 1)
        try await tablet.expect(total: 1)

        // The tablet changes hands: alice signs out, bob signs in.
        await tablet.say("alice signs out, bob signs in")
        try await tablet.client.deauthorize()
        try await tablet.client.authorize(userID: "bob", tokenProvider: backend.provider)
        try await tablet.expect(total: 0)
        try await helpdesk.reply(ticket: "9", to: [await tablet.identifier()], note: "to bob's tablet")
        try await tablet.expect(total: 1)
        let phoneCount = try await phone.client.unread.getUnreadMessagesCount()
        await phone.say("getUnreadMessagesCount() = \(phoneCount.total): bob's reply is not alice's")
        guard phoneCount.total == 1 else { throw ExampleFailure("alice's count changed to \(phoneCount.total) on bob's reply") }

        // Alice reads everything up to the last reply she was pushed; both sign out.
        await phone.say("markAllRead(upTo: \(latest))")
        try await phone.client.unread.markAllRead(upTo: latest)
        try await phone.expect(total: 0)
        try await phone.client.deauthorize()
        try await tablet.client.deauthorize()
        let calls = await phone.callbacks() + tablet.callbacks()
        print("done: 2 devices, 1 user switch, \(calls) delegate callbacks, \(backend.issued()) user tokens signed")
    }
}

struct ExampleFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// One device running the app: a PushRelayClient and a delegate that prints what it is told.
@MainActor
final class Device: UnreadCounterDelegate {
    let name: String
    let client: PushRelayClient
    let timeout: Double
    private var count: UnreadCount?
    private var calls = 0

    init(name: String, client: PushRelayClient, timeout: Double) {
        self.name = name
        self.client = client
        self.timeout = timeout
        client.unread.delegate = self
    }

    static func randomAPNsToken() -> Data { Data((0..<32).map { _ in UInt8.random(in: 0...255) }) }

    func identifier() async -> String { await client.deviceIdentifier ?? "" }

    func callbacks() -> Int { calls }

    func say(_ text: String) {
        print("[\(name)]".padding(toLength: 9, withPad: " ", startingAt: 0) + text)
    }

    func launch(token: Data, user: String, backend: Backend, foreground: Bool, delay: Double) async throws {
        // didRegisterForRemoteNotificationsWithDeviceToken: kept until a user signs in.
        try await client.setDeviceToken(token)
        let identifier = await client.deviceIdentifier ?? ""
        say("APNs token \(identifier.prefix(6))…\(identifier.suffix(4)) set, no user yet: registered later")
        try await client.authorize(userID: user, tokenProvider: backend.provider)
        let registered = await client.isRegistered
        await client.unread.setUnreadMessageCountDelay(delay)
        if foreground { await client.unread.enterForeground() }
        say(
            "\(user) signed in, device registered: \(registered); "
                + (foreground ? "foreground: live stream" : "background: polling every \(delay) s")
        )
    }

    // Delegate calls arrive on the main actor, in order.
    func didChangeUnreadMessages(_ count: UnreadCount) {
        calls += 1
        self.count = count
        let badge =
            switch count.badge(.capped(at: 99)) {
            case .hidden: "no badge"
            case .text(let text): "badge \"\(text)\""
            case .dot: "badge •"
            }
        say("unread \(count), \(badge)")
    }

    func didReceiveNetwork(_ error: PushRelayError) {
        calls += 1
        say("network error: \(error)")
    }

    /// Waits until the delegate was told `total`.
    func expect(total: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while count?.total != total {
            guard ContinuousClock.now < deadline else {
                throw ExampleFailure(
                    "\(name): the count did not become \(total) within \(timeout) s (it is \(count.map { "\($0.total)" } ?? "unknown"))"
                )
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// The app's backend: signs a user JWT (HS256, `sub`, `exp`) with the app's user-token key.
final class Backend: Sendable {
    let key: SymmetricKey
    let lifetime: Int
    private let count = Counter()

    init(key: SymmetricKey, lifetime: Int) {
        self.key = key
        self.lifetime = lifetime
    }

    var provider: UserTokenProvider {
        { [self] user in
            count.increment()
            return sign(user: user)
        }
    }

    func issued() -> Int { count.value }

    func sign(user: String) -> String {
        func base64url(_ data: some DataProtocol) -> String {
            Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let header = base64url(Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let claims = try! JSONSerialization.data(withJSONObject: ["sub": user, "exp": Int(Date().timeIntervalSince1970) + lifetime])
        let input = header + "." + base64url(claims)
        let signature = HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: key)
        return input + "." + base64url(Data(signature))
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

/// The helpdesk: posts the Zendesk Support SDK webhook for a reply.
struct Helpdesk {
    let url: URL

    @discardableResult
    func reply(ticket: String, to identifiers: [String], note: String) async throws -> Int64 {
        let devices = identifiers.map { ["identifier": $0, "type": "ios"] }
        let body: [String: Any] = ["devices": devices, "notification": ["title": "Agent replied", "body": "Hello", "ticket_id": ticket]]
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let answer = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        guard status == 202, let id = (answer?["notification_id"] as? NSNumber)?.int64Value else {
            throw ExampleFailure("the webhook was answered \(status): \(String(decoding: data, as: UTF8.self))")
        }
        print("[helpdesk] agent replied on ticket \(ticket), \(note): notification \(id)")
        return id
    }
}
